//! The NBD front end against real clients over loopback: libnbd's `nbdsh`,
//! `nbdinfo` and `nbdcopy`, qemu's `qemu-io` and `qemu-img`, and a tiny raw
//! client written here for what those clients never send (bad options, bad
//! magic, requests past the end, deep pipelines).
//!
//! The external tools come from Debian's `libnbd-bin`, `python3-libnbd` and
//! `qemu-utils` (`scripts/test-deps.sh` installs them). Without them these
//! tests fail, unless `SILT_SKIP_NBD_TOOLS=1`, which skips them.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use silt_volume::nbd::{BlockDevice, MemoryDevice, NbdServer};

const EXPORT: &str = "hydra";
const MIB: u64 = 1 << 20;

/// A server on 127.0.0.1:0 with its own runtime; the test thread stays free
/// to run blocking clients. Shut down on drop.
struct Served {
    rt: tokio::runtime::Runtime,
    server: Option<NbdServer>,
    addr: SocketAddr,
}

impl Served {
    fn new(device: Arc<dyn BlockDevice>) -> Served {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let server = rt
            .block_on(NbdServer::bind(
                "127.0.0.1:0".parse().expect("addr"),
                EXPORT,
                device,
            ))
            .expect("bind");
        let addr = server.local_addr();
        Served {
            rt,
            server: Some(server),
            addr,
        }
    }

    fn url(&self) -> String {
        format!("nbd://{}/{EXPORT}", self.addr)
    }

    fn shutdown(&mut self) {
        if let Some(server) = self.server.take() {
            self.rt.block_on(server.shutdown());
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn memory(size: u64) -> Arc<MemoryDevice> {
    Arc::new(MemoryDevice::new(size, 4096))
}

// ---- external tools -------------------------------------------------------

/// `nbdsh` runs `python3 -m nbd`; Debian's `python3-libnbd` is importable
/// only by Debian's own `/usr/bin/python3`, which a pyenv or venv `python3`
/// earlier on PATH would shadow.
fn tool_path() -> OsString {
    let mut path = OsString::from("/usr/bin");
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    path
}

fn tool_works(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .env("PATH", tool_path())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True if all `tools` run; otherwise fails the test telling how to install
/// them, or (with `SILT_SKIP_NBD_TOOLS=1`) prints a line and returns false.
fn have_tools(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !tool_works(t)).collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("SILT_SKIP_NBD_TOOLS").as_deref() == Ok("1") {
        println!("skipping: NBD test tools missing ({missing:?}) and SILT_SKIP_NBD_TOOLS=1");
        return false;
    }
    panic!(
        "NBD test tools missing or not working: {missing:?}. Run scripts/test-deps.sh \
         (Debian packages libnbd-bin, python3-libnbd, qemu-utils), or set \
         SILT_SKIP_NBD_TOOLS=1 to skip these tests."
    );
}

/// Runs `program args` under a 120 s `timeout` (a hung server must fail the
/// test, not hang it); returns stdout+stderr, panicking if it failed.
fn run(program: &str, args: &[&str]) -> String {
    let (ok, out) = try_run(program, args);
    assert!(ok, "{program} {args:?} failed:\n{out}");
    out
}

fn try_run(program: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new("timeout")
        .arg("120")
        .arg(program)
        .args(args)
        .env("PATH", tool_path())
        .output()
        .expect("spawn timeout");
    let mut out = String::from_utf8_lossy(&output.stdout).into_owned();
    out.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), out)
}

/// Runs Python `code` in `nbdsh` connected to `url`.
fn nbdsh(url: &str, code: &str) -> String {
    run("nbdsh", &["-u", url, "-c", code])
}

fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    // xorshift64*: reproducible, incompressible, no dependency.
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn device_bytes(served: &Served, device: &MemoryDevice, offset: u64, len: u32) -> Vec<u8> {
    served
        .rt
        .block_on(device.read(offset, len))
        .expect("device read")
}

// ---- nbdsh / nbdinfo ------------------------------------------------------

/// Writes (aligned, unaligned, FUA), reads back, zero gaps, trim, write
/// zeroes (with and without NO_HOLE), flush, zero-length and out-of-range
/// requests (the connection keeps working), and an aio batch. libnbd's
/// strict mode is turned off so that it sends what it would otherwise refuse
/// client side.
const NBDSH_SCRIPT: &str = r#"
import os
MIB = 1 << 20
size = h.get_size()
assert size == 16 * MIB, size
assert h.get_block_size(nbd.SIZE_MINIMUM) == 4096
assert h.get_block_size(nbd.SIZE_PREFERRED) == 4096
assert h.get_block_size(nbd.SIZE_MAXIMUM) == 32 * MIB
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero()
assert h.can_multi_conn()
assert not h.is_read_only()
h.set_strict_mode(0)

cases = [(0, 4096), (8192, 65536), (1 * MIB, MIB), (3 * MIB + 1, 1),
         (3 * MIB + 513, 1000), (4 * MIB - 100, 300), (5 * MIB + 7, 200000),
         (6 * MIB, 4 * MIB), (size - 4096, 4096)]
data = {}
for i, (off, n) in enumerate(cases):
    data[off] = os.urandom(n)
    h.pwrite(data[off], off, nbd.CMD_FLAG_FUA if i % 2 else 0)
for off, n in cases:
    assert h.pread(n, off) == data[off], ("mismatch", off, n)
# Gaps read as zeros, and reads spanning data and gaps line up.
assert h.pread(4096, 4096) == bytes(4096)
assert h.pread(12288, 0) == data[0] + bytes(4096) + data[8192][:4096]
assert h.pread(2000, 3 * MIB) == bytes(1) + data[3 * MIB + 1] + bytes(511) + data[3 * MIB + 513] + bytes(487)

# Trim, aligned and not: zeros there, neighbours intact.
h.trim(65536, 8192)
assert h.pread(65536, 8192) == bytes(65536)
h.trim(5000, MIB + 1000)
got = h.pread(MIB, MIB)
assert got[:1000] == data[MIB][:1000] and got[1000:6000] == bytes(5000) and got[6000:] == data[MIB][6000:]

# Write zeroes: plain, FUA, NO_HOLE, unaligned.
h.zero(MIB, 6 * MIB)
assert h.pread(MIB, 6 * MIB) == bytes(MIB)
h.zero(1000, 7 * MIB + 3, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
assert h.pread(1000, 7 * MIB + 3) == bytes(1000)
assert h.pread(4096, 7 * MIB) == data[6 * MIB][MIB:MIB + 3] + bytes(1000) + data[6 * MIB][MIB + 1003:MIB + 4096]
h.flush()

# Zero-length requests are harmless.
assert h.pread(0, 0) == b""
h.pwrite(b"", 0)

# Out of range, oversized, bad flags: errors, and the connection goes on.
def fails(errno, f, *args):
    try:
        f(*args)
    except nbd.Error as e:
        assert e.errno == errno, (errno, e)
        return
    raise AssertionError("no error from %s%r" % (f.__name__, args))
fails("EINVAL", h.pread, 512, size)
fails("EINVAL", h.pread, 1024, size - 512)
fails("EINVAL", h.pread, 512, 1 << 63)
fails("ENOSPC", h.pwrite, b"x" * 1024, size - 512)
fails("EINVAL", h.trim, 4096, size)
fails("ENOSPC", h.zero, 4096, size - 1)
fails("EINVAL", h.pread, 33 * MIB, 0)
fails("EINVAL", h.pwrite, bytes(33 * MIB), 0)
fails("EINVAL", h.pread, 512, 0, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(4096, 0) == data[0]

# A batch of concurrent writes, a flush, then concurrent reads.
base = 11 * MIB
blocks = [os.urandom(65536) for _ in range(48)]
wbufs = [nbd.Buffer.from_bytearray(b) for b in blocks]
cookies = [h.aio_pwrite(b, base + i * 65536) for i, b in enumerate(wbufs)]
cookies.append(h.aio_flush())
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
bufs = [nbd.Buffer(65536) for _ in blocks]
cookies = [h.aio_pread(b, base + i * 65536) for i, b in enumerate(bufs)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
for b, want in zip(bufs, blocks):
    assert bytes(b.to_bytearray()) == want
print("nbdsh checks passed")
"#;

#[test]
fn nbdsh_reads_writes_trims_zeroes_and_errors() {
    if !have_tools(&["nbdsh"]) {
        return;
    }
    let device = memory(16 * MIB);
    let served = Served::new(device.clone());
    let out = nbdsh(&served.url(), NBDSH_SCRIPT);
    assert!(out.contains("nbdsh checks passed"), "{out}");
    assert!(device.flushes() >= 2, "flushes reached the device");
    // The device itself holds what the client saw after the trims.
    assert_eq!(device_bytes(&served, &device, 65536, 65536), vec![0; 65536]);
}

#[test]
fn nbdsh_default_export_and_unknown_export() {
    if !have_tools(&["nbdsh", "nbdinfo"]) {
        return;
    }
    let served = Served::new(memory(MIB));
    // "" is the default export: ours.
    let default = format!("nbd://{}", served.addr);
    let out = nbdsh(&default, "print(h.get_size())");
    assert!(out.contains("1048576"), "{out}");
    let (ok, out) = try_run(
        "nbdsh",
        &["-u", &format!("nbd://{}/nope", served.addr), "-c", "pass"],
    );
    assert!(!ok, "connecting to an unknown export succeeded: {out}");
    let out = run("nbdinfo", &["--list", &default]);
    assert!(out.contains(EXPORT), "{out}");
    let out = run("nbdinfo", &[&served.url()]);
    assert!(out.contains("block_size_minimum: 4096"), "{out}");
    assert!(out.contains("block_size_maximum: 33554432"), "{out}");
}

// ---- qemu-io / qemu-img / nbdcopy ------------------------------------------

#[test]
fn qemu_io_patterns_aio_discard_zeroes_flush() {
    if !have_tools(&["qemu-io"]) {
        return;
    }
    let device = memory(16 * MIB);
    let served = Served::new(device.clone());
    let commands = [
        "write -P 0xab 0 64k",
        "read -P 0xab 0 64k",
        // Unaligned: qemu does read-modify-write over the 4 KiB minimum.
        "write -P 0x11 513 1000",
        "read -P 0xab 0 513",
        "read -P 0x11 513 1000",
        "read -P 0xab 1513 64023",
        "write -P 0x22 1M 1M",
        "write -f -P 0x33 2M 12345",
        "read -P 0x33 2M 12345",
        "read -P 0 2109497 3",
        // Concurrent writes, then wait for all.
        "aio_write -P 0xc1 4M 256k",
        "aio_write -P 0xc2 5M 256k",
        "aio_write -P 0xc3 6M 256k",
        "aio_write -P 0xc4 6400k 64k",
        "aio_flush",
        "aio_read -P 0xc1 4M 256k",
        "aio_read -P 0xc2 5M 256k",
        "aio_read -P 0xc4 6400k 64k",
        "aio_flush",
        "read -P 0xc3 6M 256k",
        "discard 1M 512k",
        "read -P 0 1M 512k",
        "read -P 0x22 1536k 512k",
        "write -z 6M 128k",
        "read -P 0 6M 128k",
        "read -P 0xc3 6272k 128k",
        "write -z -u 5M 4k",
        "read -P 0 5M 4k",
        "write -P 0x55 16773120 4096",
        "flush",
        "read -P 0x55 16773120 4096",
    ];
    let mut args = vec!["-f", "raw"];
    for c in &commands {
        args.push("-c");
        args.push(c);
    }
    let url = served.url();
    args.push(&url);
    let out = run("qemu-io", &args);
    assert!(
        !out.contains("failed") && !out.contains("error"),
        "qemu-io reported a failure:\n{out}"
    );
    // What qemu wrote is what the device holds.
    let mut want = vec![0xab; 65536];
    want[513..1513].fill(0x11);
    assert_eq!(device_bytes(&served, &device, 0, 65536), want);
    assert_eq!(
        device_bytes(&served, &device, 16 * MIB - 4096, 4096),
        vec![0x55; 4096]
    );
    assert!(device.flushes() >= 1);
}

#[test]
fn qemu_img_convert_and_compare_4mib() {
    if !have_tools(&["qemu-img"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    let data = random_bytes(4 * MIB as usize, 0x5eed);
    std::fs::write(&input, &data).expect("write input");
    // The device is larger than the file: its tail must stay zero.
    let device = memory(8 * MIB);
    let served = Served::new(device.clone());
    let url = served.url();
    let (input, output) = (path_str(&input), path_str(&output));

    run(
        "qemu-img",
        &["convert", "-n", "-f", "raw", "-O", "raw", input, &url],
    );
    let out = run(
        "qemu-img",
        &["compare", "-f", "raw", "-F", "raw", input, &url],
    );
    assert!(out.contains("Images are identical"), "{out}");
    assert_eq!(device_bytes(&served, &device, 0, 4 * MIB as u32), data);

    run(
        "qemu-img",
        &["convert", "-f", "raw", "-O", "raw", &url, output],
    );
    let copied = std::fs::read(output).expect("read output");
    assert_eq!(copied.len(), 8 * MIB as usize);
    assert!(copied[..4 * MIB as usize] == data[..], "round trip differs");
    assert!(copied[4 * MIB as usize..].iter().all(|&b| b == 0));
    let out = run("qemu-img", &["info", "-f", "raw", &url]);
    assert!(out.contains("8 MiB"), "{out}");

    // A changed byte is noticed.
    let mut changed = data.clone();
    changed[3 * MIB as usize + 17] ^= 1;
    std::fs::write(input, &changed).expect("rewrite input");
    let (same, out) = try_run(
        "qemu-img",
        &["compare", "-f", "raw", "-F", "raw", input, &url],
    );
    assert!(!same, "compare missed a difference: {out}");
}

#[test]
fn nbdcopy_multi_connection_round_trip() {
    if !have_tools(&["nbdcopy"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    let data = random_bytes(4 * MIB as usize, 0xc0ffee);
    std::fs::write(&input, &data).expect("write input");
    std::fs::write(&output, []).expect("create output");
    let device = memory(4 * MIB);
    let served = Served::new(device.clone());
    let url = served.url();
    // CAN_MULTI_CONN lets nbdcopy split the copy over 4 connections, with
    // several requests in flight on each, and flush on one of them.
    run(
        "nbdcopy",
        &[
            "--connections=4",
            "--requests=16",
            "--flush",
            path_str(&input),
            &url,
        ],
    );
    assert_eq!(device_bytes(&served, &device, 0, 4 * MIB as u32), data);
    assert!(device.flushes() >= 1);
    run("nbdcopy", &["--connections=4", &url, path_str(&output)]);
    assert!(
        std::fs::read(&output).expect("read output") == data,
        "round trip differs"
    );
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

// The raw-protocol tests.
#[path = "nbd/raw.rs"]
mod raw;
