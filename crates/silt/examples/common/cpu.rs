//! CPU time from /proc, shared by the profiling examples (CPU time is robust
//! to other processes competing for the cores, unlike wall time).

/// CPU seconds of the calling thread.
#[allow(dead_code)]
pub fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// CPU seconds of the whole process, all threads (utime + stime).
pub fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses); utime and
    // stime are fields 14 and 15 of the line, the 11th and 12th numbers after
    // the state (which does not parse as a number).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0)) / 100.0
}
