"""fdatasync latency on this VM with the CPUs idle vs kept busy.

One thread overwrites 400 bytes of a preallocated (zero-written) file and
fdatasyncs it, for 1.5 s: first alone, then while two nice-19 busy loops keep
both vCPUs from idling. Usage: python3 fsync_idle_probe.py DIR
"""
import os, subprocess, sys, time

def probe(d, dur=1.5):
    p = os.path.join(d, "fsync-idle-probe.bin")
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC)
    os.pwrite(fd, b"\0" * (4 << 20), 0)
    os.fdatasync(fd)
    off, lat, t0 = 0, [], time.time()
    while time.time() - t0 < dur:
        a = time.time()
        os.pwrite(fd, b"x" * 400, off)
        off += 400
        os.fdatasync(fd)
        lat.append(time.time() - a)
    os.close(fd)
    os.unlink(p)
    lat.sort()
    return len(lat) / dur, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3

d = sys.argv[1] if len(sys.argv) > 1 else "."
spin = "import time\nt=time.time()\nwhile time.time()-t<3: pass"
for label, spinners in [("CPUs idle", 0), ("2 nice-19 busy loops", 2), ("CPUs idle again", 0)]:
    ps = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", spin]) for _ in range(spinners)]
    time.sleep(0.3 if spinners else 0)
    rate, p50, p99 = probe(d)
    for p in ps:
        p.wait()
    print(f"{label:22s}: {rate:6.0f} fdatasyncs/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
