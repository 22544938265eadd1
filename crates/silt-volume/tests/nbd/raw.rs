//! A tiny blocking NBD client, and what the real clients never send: bad
//! options and handshakes, requests past the end or with bad flags, a bad
//! request magic, deep pipelines, and the server's in-flight bounds.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use silt_volume::nbd::{
    BlockDevice, DeviceError, MAX_IN_FLIGHT_BYTES, MAX_IN_FLIGHT_REQUESTS, MAX_PAYLOAD,
    MemoryDevice,
};

use super::{EXPORT, MIB, Served, device_bytes, memory, random_bytes};

const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_STARTTLS: u32 = 5;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;
const OPT_STRUCTURED_REPLY: u32 = 8;
const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
const REP_ERR_INVALID: u32 = (1 << 31) + 3;
const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const CMD_TRIM: u16 = 4;
const EIO: u32 = 5;
const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A minimal blocking NBD client.
struct Client {
    s: TcpStream,
}

impl Client {
    /// Connects and does the greeting with `client_flags`.
    fn connect(addr: SocketAddr, client_flags: u32) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut c = Client { s };
        let g = c.bytes(18);
        assert_eq!(&g[..16], b"NBDMAGICIHAVEOPT");
        assert_eq!(&g[16..], &[0, 3], "FIXED_NEWSTYLE | NO_ZEROES");
        c.s.write_all(&client_flags.to_be_bytes()).expect("flags");
        c
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.s.read_exact(&mut b).expect("read from server");
        b
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut m = b"IHAVEOPT".to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.s.write_all(&m).expect("send option");
    }

    /// (option, reply type, data)
    fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let h = self.bytes(20);
        assert_eq!(u64_at(&h, 0), 0x0003_e889_0455_65a9, "option reply magic");
        let data = self.bytes(u32_at(&h, 16) as usize);
        (u32_at(&h, 8), u32_at(&h, 12), data)
    }

    /// `NBD_OPT_GO` on `name`; returns the export size.
    fn go(&mut self, name: &str) -> u64 {
        self.option(OPT_GO, &info_data(name, &[]));
        let mut size = None;
        loop {
            let (opt, ty, data) = self.option_reply();
            assert_eq!(opt, OPT_GO);
            match ty {
                REP_INFO if data[..2] == [0, 0] => size = Some(u64_at(&data, 2)),
                REP_INFO => {}
                REP_ACK => return size.expect("NBD_INFO_EXPORT sent"),
                other => panic!("NBD_OPT_GO answered {other:#x}"),
            }
        }
    }

    fn request(
        &mut self,
        flags: u16,
        command: u16,
        handle: u64,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) {
        self.s
            .write_all(&request_bytes(flags, command, handle, offset, len))
            .expect("send request");
        self.s.write_all(payload).expect("send payload");
    }

    /// (error, handle) of the next simple reply.
    fn reply(&mut self) -> (u32, u64) {
        let r = self.bytes(16);
        assert_eq!(u32_at(&r, 0), 0x6744_6698, "simple reply magic");
        (u32_at(&r, 4), u64_at(&r, 8))
    }

    fn read(&mut self, handle: u64, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.request(0, CMD_READ, handle, offset, len, &[]);
        let (error, h) = self.reply();
        assert_eq!(h, handle);
        if error != 0 {
            return Err(error);
        }
        Ok(self.bytes(len as usize))
    }

    fn write(&mut self, handle: u64, offset: u64, data: &[u8]) -> u32 {
        self.request(0, CMD_WRITE, handle, offset, data.len() as u32, data);
        let (error, h) = self.reply();
        assert_eq!(h, handle);
        error
    }

    /// True once the server has closed the connection.
    fn closed(&mut self) -> bool {
        let mut b = [0; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
        }
    }
}

fn request_bytes(flags: u16, command: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut r = 0x2560_9513u32.to_be_bytes().to_vec();
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&command.to_be_bytes());
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    r
}

fn info_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

#[test]
fn options_list_info_and_go() {
    let served = Served::new(memory(2 * MIB));
    let mut c = Client::connect(served.addr, 3);
    c.option(0xbeef, b"whatever this is");
    assert_eq!(c.option_reply(), (0xbeef, REP_ERR_UNSUP, vec![]));
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.option_reply().1, REP_ERR_UNSUP);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.option_reply().1, REP_ERR_UNSUP);

    c.option(OPT_LIST, &[]);
    let (opt, ty, data) = c.option_reply();
    assert_eq!((opt, ty), (OPT_LIST, REP_SERVER));
    assert_eq!(u32_at(&data, 0), 5);
    assert_eq!(&data[4..], EXPORT.as_bytes());
    assert_eq!(c.option_reply(), (OPT_LIST, REP_ACK, vec![]));
    c.option(OPT_LIST, b"junk");
    assert_eq!(c.option_reply().1, REP_ERR_INVALID);

    c.option(OPT_INFO, &info_data("nope", &[]));
    assert_eq!(c.option_reply().1, REP_ERR_UNKNOWN);
    c.option(OPT_INFO, &[0, 0, 0, 9, b'x']);
    assert_eq!(c.option_reply().1, REP_ERR_INVALID);
    c.option(OPT_INFO, &info_data(EXPORT, &[3]));
    let mut seen = HashMap::new();
    loop {
        let (opt, ty, data) = c.option_reply();
        assert_eq!(opt, OPT_INFO);
        if ty == REP_ACK {
            break;
        }
        assert_eq!(ty, REP_INFO);
        seen.insert(u16::from_be_bytes([data[0], data[1]]), data[2..].to_vec());
    }
    let export = &seen[&0];
    assert_eq!(u64_at(export, 0), 2 * MIB);
    let flags = u16::from_be_bytes([export[8], export[9]]);
    // HAS_FLAGS, SEND_FLUSH, SEND_FUA, SEND_TRIM, SEND_WRITE_ZEROES, CAN_MULTI_CONN.
    assert_eq!(flags, 1 | 4 | 8 | 32 | 64 | 256);
    let sizes = &seen[&3];
    assert_eq!(
        (u32_at(sizes, 0), u32_at(sizes, 4), u32_at(sizes, 8)),
        (4096, 4096, MAX_PAYLOAD)
    );

    // After INFO the client may still GO (here on the default export).
    assert_eq!(c.go(""), 2 * MIB);
    assert_eq!(c.write(1, 4096, b"hello"), 0);
    assert_eq!(c.read(2, 4095, 7), Ok(b"\0hello\0".to_vec()));

    // A second connection sees the first one's write (CAN_MULTI_CONN).
    let mut other = Client::connect(served.addr, 3);
    other.go(EXPORT);
    assert_eq!(other.read(1, 4096, 5), Ok(b"hello".to_vec()));

    c.request(0, CMD_DISC, 3, 0, 0, &[]);
    assert!(c.closed(), "server closes after NBD_CMD_DISC");
}

#[test]
fn export_name_abort_and_bad_handshakes() {
    let served = Served::new(memory(MIB));
    // NBD_OPT_EXPORT_NAME without NO_ZEROES: size, flags and 124 zeros.
    let mut c = Client::connect(served.addr, 1);
    c.option(OPT_EXPORT_NAME, EXPORT.as_bytes());
    let r = c.bytes(134);
    assert_eq!(u64_at(&r, 0), MIB);
    assert!(r[10..].iter().all(|&b| b == 0));
    assert_eq!(c.read(1, 0, 16), Ok(vec![0; 16]));

    // Unknown name: no way to say so but closing.
    let mut c = Client::connect(served.addr, 3);
    c.option(OPT_EXPORT_NAME, b"nope");
    assert!(c.closed());

    let mut c = Client::connect(served.addr, 3);
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.option_reply(), (OPT_ABORT, REP_ACK, vec![]));
    assert!(c.closed());

    // Unknown client flags, or an option without IHAVEOPT: closed.
    let mut c = Client::connect(served.addr, 1 << 5);
    assert!(c.closed());
    let mut c = Client::connect(served.addr, 3);
    c.s.write_all(&[0x55; 16]).expect("send");
    assert!(c.closed());
}

#[test]
fn bad_requests_keep_the_connection_until_bad_magic() {
    let device = memory(MIB);
    let served = Served::new(device.clone());
    let mut c = Client::connect(served.addr, 3);
    let size = c.go(EXPORT);
    assert_eq!(c.write(1, 0, &[7; 4096]), 0);

    assert_eq!(c.read(2, size, 512), Err(EINVAL));
    assert_eq!(c.read(3, size - 512, 1024), Err(EINVAL));
    assert_eq!(c.read(4, u64::MAX - 10, 512), Err(EINVAL));
    assert_eq!(c.read(5, 0, MAX_PAYLOAD + 1), Err(EINVAL));
    // Writes past the end: ENOSPC (the spec's advice), payload consumed.
    assert_eq!(c.write(6, size - 10, &[1; 20]), ENOSPC);
    // A write over the payload limit: its data is drained, then EINVAL.
    let big = vec![9; MAX_PAYLOAD as usize + 4096];
    assert_eq!(c.write(7, 0, &big), EINVAL);
    c.request(0, CMD_TRIM, 8, size, 1, &[]);
    assert_eq!(c.reply(), (EINVAL, 8));
    c.request(0, 99, 9, 0, 0, &[]);
    assert_eq!(c.reply(), (EINVAL, 9));
    c.request(1 << 9, CMD_READ, 10, 0, 512, &[]);
    assert_eq!(c.reply(), (EINVAL, 10));
    c.request(1, CMD_FLUSH, 11, 0, 0, &[]);
    assert_eq!(c.reply(), (0, 11));
    // None of that broke the stream or touched the data.
    assert_eq!(c.read(12, 0, 4096), Ok(vec![7; 4096]));
    assert_eq!(device_bytes(&served, &device, 4096, 4096), vec![0; 4096]);

    // A request without the magic: the stream is lost, the server closes.
    let mut bad = request_bytes(0, CMD_READ, 13, 0, 512);
    bad[0] ^= 0xff;
    c.s.write_all(&bad).expect("send");
    assert!(c.closed(), "server closes on a bad request magic");
    // The server itself is fine.
    let mut c = Client::connect(served.addr, 3);
    c.go(EXPORT);
    assert_eq!(c.read(1, 0, 4), Ok(vec![7; 4]));
}

#[test]
fn many_pipelined_requests() {
    let device = memory(4 * MIB);
    let served = Served::new(device.clone());
    let mut c = Client::connect(served.addr, 3);
    c.go(EXPORT);
    const N: u64 = 300;
    let block = |i: u64| random_bytes(4096, i + 1);
    // A thread sends a whole batch without waiting while this one reads the
    // replies, which may come in any order but each exactly once. Writes go
    // first as a batch of their own: NBD does not order a read after a
    // write still in flight.
    let batches: [Vec<u8>; 2] = [
        (0..N)
            .flat_map(|i| {
                let mut r = request_bytes(0, CMD_WRITE, i, i * 4096, 4096);
                r.extend_from_slice(&block(i));
                r
            })
            .collect(),
        (0..N)
            .flat_map(|i| request_bytes(0, CMD_READ, N + i, i * 4096, 4096))
            .collect(),
    ];
    for (batch, bytes) in batches.into_iter().enumerate() {
        let mut sender = c.s.try_clone().expect("clone");
        let send = std::thread::spawn(move || sender.write_all(&bytes).expect("send batch"));
        let mut answered = vec![false; N as usize];
        for _ in 0..N {
            let (error, handle) = c.reply();
            assert_eq!(error, 0, "handle {handle}");
            let i = handle - batch as u64 * N;
            assert!(!answered[i as usize], "handle {handle} answered twice");
            answered[i as usize] = true;
            if batch == 1 {
                assert_eq!(c.bytes(4096), block(i), "block {i}");
            }
        }
        send.join().expect("sender");
    }
    assert_eq!(device_bytes(&served, &device, 17 * 4096, 4096), block(17));
}

/// Delays reads of offset 0; everything else is immediate.
struct SlowFirstBlock(MemoryDevice);

#[async_trait::async_trait]
impl BlockDevice for SlowFirstBlock {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn block_size(&self) -> u32 {
        self.0.block_size()
    }
    async fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, DeviceError> {
        if offset == 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if offset == 8192 {
            panic!("test device panics on offset 8192");
        }
        self.0.read(offset, len).await
    }
    async fn write(&self, offset: u64, data: Vec<u8>, fua: bool) -> Result<(), DeviceError> {
        self.0.write(offset, data, fua).await
    }
    async fn flush(&self) -> Result<(), DeviceError> {
        Err(DeviceError::Unavailable("no leader".into()))
    }
    async fn trim(&self, _offset: u64, _len: u32) -> Result<(), DeviceError> {
        Err(DeviceError::ReadOnly)
    }
}

#[test]
fn replies_come_out_of_order_and_device_errors_map() {
    let served = Served::new(Arc::new(SlowFirstBlock(MemoryDevice::new(MIB, 4096))));
    let mut c = Client::connect(served.addr, 3);
    c.go(EXPORT);
    c.request(0, CMD_READ, 1, 0, 512, &[]);
    c.request(0, CMD_READ, 2, 4096, 512, &[]);
    let (error, handle) = c.reply();
    assert_eq!((error, handle), (0, 2), "the fast read is answered first");
    c.bytes(512);
    assert_eq!(c.reply(), (0, 1));
    c.bytes(512);
    // Device errors become NBD errors; a panicking device answers EIO.
    c.request(0, CMD_FLUSH, 3, 0, 0, &[]);
    assert_eq!(c.reply(), (EIO, 3));
    c.request(0, CMD_TRIM, 4, 0, 4096, &[]);
    assert_eq!(c.reply(), (1, 4), "EPERM");
    assert_eq!(c.read(5, 8192, 512), Err(EIO));
    assert_eq!(c.read(6, 4096, 4), Ok(vec![0; 4]));
}

/// Holds every operation until the gate opens, recording how many run at once.
struct Gated {
    gate: tokio::sync::Semaphore,
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Gated {
    fn new() -> Gated {
        Gated {
            gate: tokio::sync::Semaphore::new(0),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }
    async fn pass(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        // Closed (opened for good) by the test; an error means "go".
        let _ = self.gate.acquire().await;
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl BlockDevice for Gated {
    fn size(&self) -> u64 {
        256 * MIB
    }
    fn block_size(&self) -> u32 {
        4096
    }
    async fn read(&self, _offset: u64, len: u32) -> Result<Vec<u8>, DeviceError> {
        self.pass().await;
        Ok(vec![0; len as usize])
    }
    async fn write(&self, _offset: u64, _data: Vec<u8>, _fua: bool) -> Result<(), DeviceError> {
        self.pass().await;
        Ok(())
    }
    async fn flush(&self) -> Result<(), DeviceError> {
        self.pass().await;
        Ok(())
    }
    async fn trim(&self, _offset: u64, _len: u32) -> Result<(), DeviceError> {
        self.pass().await;
        Ok(())
    }
}

/// Sends `requests` while the device is held shut, waits until `expected`
/// operations run (or long enough), and returns how many the server let run
/// at once; then opens the device and
/// collects every reply (`read_len` bytes of data each if nonzero).
fn peak_in_flight(requests: Vec<Vec<u8>>, read_len: usize, expected: usize) -> usize {
    let device = Arc::new(Gated::new());
    let served = Served::new(device.clone());
    let mut c = Client::connect(served.addr, 3);
    c.go(EXPORT);
    let n = requests.len();
    let mut sender = c.s.try_clone().expect("clone");
    let send = std::thread::spawn(move || {
        for r in requests {
            // Blocks, not fails, if the bound stops the server reading.
            sender.write_all(&r).expect("send");
        }
    });
    // Wait for the server to fill up to its bound, then a little longer to
    // see that it does not go past it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while device.running.load(Ordering::SeqCst) < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let peak = device.peak.load(Ordering::SeqCst);
    device.gate.close();
    for _ in 0..n {
        let (error, _) = c.reply();
        assert_eq!(error, 0);
        if read_len > 0 {
            c.bytes(read_len);
        }
    }
    send.join().expect("sender");
    peak
}

#[test]
fn in_flight_requests_and_bytes_are_bounded() {
    let flushes = (0..200)
        .map(|i| request_bytes(0, CMD_FLUSH, i, 0, 0))
        .collect();
    assert_eq!(
        peak_in_flight(flushes, 0, MAX_IN_FLIGHT_REQUESTS),
        MAX_IN_FLIGHT_REQUESTS
    );
    // 32 MiB reads: the byte budget admits only so many at once.
    let len = MAX_PAYLOAD;
    let reads = (0..6)
        .map(|i| request_bytes(0, CMD_READ, i, u64::from(i as u32) * u64::from(len), len))
        .collect();
    let admitted = MAX_IN_FLIGHT_BYTES / len as usize;
    assert_eq!(peak_in_flight(reads, len as usize, admitted), admitted);
}

#[test]
fn shutdown_closes_connections_and_the_listener() {
    let mut served = Served::new(memory(MIB));
    let mut idle = Client::connect(served.addr, 3);
    idle.go(EXPORT);
    let mut haggling = Client::connect(served.addr, 3);
    served.shutdown();
    assert!(idle.closed());
    assert!(haggling.closed());
    assert!(TcpStream::connect(served.addr).is_err(), "listener closed");
}
