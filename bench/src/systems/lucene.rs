//! Apache Lucene (`LatLonPoint`: a BKD tree per segment) as a peer of the
//! spatial workloads, through the small Java driver in `bench/lucene/` (built by
//! `bench/setup.sh` with Maven into `bench/lucene/target/silt-lucene-peer.jar`).
//! The harness writes the records and the queries to files, runs the driver
//! with `java` (`$SILT_BENCH_JAVA` overrides it) and reads back its timings
//! (taken inside the JVM after a warm-up pass) and the answers to the first
//! queries, which take part in the checks like every other system's. The
//! driver's own documentation (`LucenePeer.java`) has the protocol and method.

use std::{
    collections::HashMap,
    fs,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::spatial::data::{Answer, Queries, TweetData};

/// Queries of each kind run untimed before each timed phase (JIT warm-up).
pub const WARMUP: usize = 300;
/// Maximum heap of the driver's JVM.
pub const JVM_HEAP: &str = "-Xmx3g";

/// The driver's kind of the within-distance queries (its `L`, `T`, `C` lines).
pub const RADIUS: &str = "radius";
/// The driver's kind of the index nested-loop joins.
pub const JOIN: &str = "join";

/// The driver's results for one query phase (0 after ingest + commit, 1 after
/// forceMerge(1)) and access path (fetch = with records).
#[derive(Default, Debug)]
pub struct LucenePhase {
    /// Latencies in nanoseconds, per selectivity label, "knn", [`RADIUS`] and
    /// [`JOIN`] (one per join).
    pub lat_ns: HashMap<String, Vec<u64>>,
    /// Result totals per selectivity label, [`RADIUS`] (records) and [`JOIN`]
    /// (pairs).
    pub totals: HashMap<String, u64>,
    /// The first `check` answers per selectivity label and of [`RADIUS`], the
    /// first `join_check` of [`JOIN`].
    pub checks: HashMap<String, Vec<Answer>>,
    /// The distances of the first `check` kNN answers.
    pub dists: Vec<Vec<f64>>,
}

#[derive(Default, Debug)]
pub struct LuceneResult {
    pub meta: HashMap<String, String>,
    /// Keyed by (phase, fetch).
    pub phases: HashMap<(u8, bool), LucenePhase>,
}

impl LuceneResult {
    pub fn meta_f64(&self, key: &str) -> Result<f64> {
        let v = self
            .meta
            .get(key)
            .with_context(|| format!("the Lucene driver did not report {key}"))?;
        v.parse::<f64>()
            .with_context(|| format!("the Lucene driver reported {key} = {v:?}"))
    }

    pub fn phase(&self, phase: u8, fetch: bool) -> Result<&LucenePhase> {
        self.phases
            .get(&(phase, fetch))
            .with_context(|| format!("the Lucene driver reported no phase {phase} (fetch {fetch})"))
    }
}

/// A Java and the built driver.
pub struct Lucene {
    java: PathBuf,
    jar: PathBuf,
    /// "Java 17.0.15" (the Lucene release comes from the driver's output).
    pub java_version: String,
}

pub fn jar_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("lucene/target/silt-lucene-peer.jar")
}

impl Lucene {
    /// Finds `java` and the driver's jar; `Err(reason)` says why the peer can't
    /// run and how to fix it.
    pub fn find() -> std::result::Result<Self, String> {
        let java = std::env::var_os("SILT_BENCH_JAVA")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("java"));
        let out = Command::new(&java)
            .arg("-version")
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {} ({e}): install a JDK 17+ (bench/setup.sh does) or set SILT_BENCH_JAVA",
                    java.display()
                )
            })?;
        if !out.status.success() {
            return Err(format!("{} -version failed", java.display()));
        }
        // `java -version` writes `openjdk version "17.0.15" ...` to stderr.
        let text = String::from_utf8_lossy(&out.stderr);
        let java_version = text
            .split('"')
            .nth(1)
            .map_or_else(|| "?".to_string(), str::to_string);
        let jar = jar_path();
        if !jar.exists() {
            return Err(format!(
                "no {} (run bench/setup.sh, or `cd bench/lucene && mvn -q package`; needs Maven)",
                jar.display()
            ));
        }
        Ok(Self {
            java,
            jar,
            java_version: format!("Java {java_version}"),
        })
    }

    /// Writes the inputs into `dir`, runs the driver (its index in
    /// `dir/index`) and parses its results: the answers of the first `check`
    /// queries of each kind and of the first `join_check` joins come back.
    pub fn run(
        &self,
        dir: &Path,
        data: &TweetData,
        q: &Queries,
        check: usize,
        join_check: usize,
    ) -> Result<LuceneResult> {
        let records = dir.join("records.bin");
        {
            let f = fs::File::create(&records)
                .with_context(|| format!("creating {}", records.display()))?;
            let mut w = BufWriter::new(f);
            for i in 0..data.len() {
                let json = serde_json::to_vec(&serde_json::json!({
                    "id": data.id(i),
                    "user_id": data.user_id[i],
                    "ts": data.ts[i],
                    "lon": data.lon[i],
                    "lat": data.lat[i],
                    "text": data.text(i),
                }))?;
                let len = i32::try_from(json.len()).context("a record of more than 2 GiB")?;
                w.write_all(&data.id(i).to_be_bytes())?;
                w.write_all(&data.lon[i].to_be_bytes())?;
                w.write_all(&data.lat[i].to_be_bytes())?;
                w.write_all(&len.to_be_bytes())?;
                w.write_all(&json)?;
            }
            w.flush()
                .with_context(|| format!("writing {}", records.display()))?;
        }
        let queries = dir.join("queries.txt");
        {
            let mut s = format!(
                "k {}\ncheck {check}\njoincheck {join_check}\nwarmup {WARMUP}\n",
                q.k
            );
            for sel in &q.sels {
                s.push_str(&format!("sel {} {}\n", sel.label(), sel.rects.len()));
                for r in &sel.rects {
                    // `{}` prints the shortest text that parses back to the same f64.
                    s.push_str(&format!("{} {} {} {}\n", r[0], r[1], r[2], r[3]));
                }
            }
            s.push_str(&format!("knn {}\n", q.knn.len()));
            for &(x, y) in &q.knn {
                s.push_str(&format!("{x} {y}\n"));
            }
            let rq = &q.radius;
            s.push_str(&format!("{RADIUS} {} {}\n", rq.metres, rq.centres.len()));
            for &(x, y) in &rq.centres {
                s.push_str(&format!("{x} {y}\n"));
            }
            // One line per join: its probe points as lon lat pairs.
            let jq = &q.joins;
            s.push_str(&format!("{JOIN} {} {}\n", jq.metres, jq.probes.len()));
            for probes in &jq.probes {
                let line: Vec<String> = probes.iter().map(|&(x, y)| format!("{x} {y}")).collect();
                s.push_str(&line.join(" "));
                s.push('\n');
            }
            fs::write(&queries, s).with_context(|| format!("writing {}", queries.display()))?;
        }
        let out = dir.join("lucene-results.txt");
        let index = dir.join("index");
        let status = Command::new(&self.java)
            .arg(JVM_HEAP)
            .arg("-jar")
            .arg(&self.jar)
            .arg(&records)
            .arg(&queries)
            .arg(&out)
            .arg(&index)
            .status()
            .with_context(|| {
                format!(
                    "running {} -jar {}",
                    self.java.display(),
                    self.jar.display()
                )
            })?;
        if !status.success() {
            bail!("the Lucene driver failed ({status})");
        }
        let text =
            fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
        let res = parse(&text).with_context(|| format!("parsing {}", out.display()))?;
        for f in [&records, &queries, &out] {
            let _ = fs::remove_file(f);
        }
        Ok(res)
    }
}

fn parse(text: &str) -> Result<LuceneResult> {
    let mut res = LuceneResult::default();
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split_ascii_whitespace();
        let Some(tag) = f.next() else { continue };
        let ctx = || format!("line {}: {line:.80}", n + 1);
        if tag == "M" {
            let key = f.next().with_context(ctx)?;
            res.meta
                .insert(key.to_string(), f.collect::<Vec<_>>().join(" "));
            continue;
        }
        let phase: u8 = f.next().with_context(ctx)?.parse().with_context(ctx)?;
        let fetch = f.next().with_context(ctx)? == "1";
        let kind = f.next().with_context(ctx)?.to_string();
        let p = res.phases.entry((phase, fetch)).or_default();
        match tag {
            "L" => {
                let v = f
                    .map(|x| x.parse::<u64>())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .with_context(ctx)?;
                p.lat_ns.insert(kind, v);
            }
            "T" => {
                let v = f.next().with_context(ctx)?.parse().with_context(ctx)?;
                p.totals.insert(kind, v);
            }
            "C" => {
                let mut v = Vec::new();
                for pair in f {
                    let (c, s) = pair.split_once(':').with_context(ctx)?;
                    v.push(Answer {
                        count: c.parse().with_context(ctx)?,
                        id_sum: s.parse().with_context(ctx)?,
                    });
                }
                p.checks.insert(kind, v);
            }
            "D" => {
                // `kind` is the query number; answers come in order.
                let v = f
                    .map(|x| x.parse::<f64>())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .with_context(ctx)?;
                p.dists.push(v);
            }
            other => bail!("unknown tag {other:?} ({})", ctx()),
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_driver_output() {
        let r = parse(
            "M lucene_version 9.12.3\nM ingest_ns 5\nL 0 1 ~10 3 4 5\nT 0 1 ~10 12\n\
             C 0 1 ~10 2:7 0:0\nD 0 1 0 1.5 2.25\nL 1 0 knn 9\n\
             L 1 0 radius 7 8\nT 1 0 radius 30\nC 1 0 radius 3:-4\n\
             L 1 1 join 11\nT 1 1 join 40\nC 1 1 join 40:9223372036854775807\n",
        )
        .unwrap();
        assert_eq!(r.meta_f64("ingest_ns").unwrap(), 5.0);
        let p = r.phase(0, true).unwrap();
        assert_eq!(p.lat_ns["~10"], vec![3, 4, 5]);
        assert_eq!(p.totals["~10"], 12);
        assert_eq!(
            p.checks["~10"][0],
            Answer {
                count: 2,
                id_sum: 7
            }
        );
        assert_eq!(p.dists, vec![vec![1.5, 2.25]]);
        let p = r.phase(1, false).unwrap();
        assert_eq!(p.lat_ns["knn"], vec![9]);
        assert_eq!(p.lat_ns[RADIUS], vec![7, 8]);
        assert_eq!(p.totals[RADIUS], 30);
        assert_eq!(
            p.checks[RADIUS],
            vec![Answer {
                count: 3,
                id_sum: -4
            }]
        );
        let p = r.phase(1, true).unwrap();
        assert_eq!((p.lat_ns[JOIN].len(), p.totals[JOIN]), (1, 40));
        assert_eq!(p.checks[JOIN][0].id_sum, i64::MAX);
        assert!(parse("X 0 0 a\n").is_err());
    }
}
