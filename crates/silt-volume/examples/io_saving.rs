//! A first look at Hydra's reference trick (seed 001 §6.4, "about 50 % less
//! disk I/O"): three replicas in this process on loopback, `clients`
//! threads writing random blocks, once with the trick and once without;
//! prints the bytes the process wrote to disk (`/proc/self/io`
//! `write_bytes`, all three replicas: logs, data, block maps) per logical
//! byte, throughput and latency.
//!
//! cargo run --release -p silt-volume --example io_saving -- [BLOCK_BYTES] [CLIENTS] [MIB]
//! (`ONLY=reference` or `ONLY=inline` in the environment: one mode)

use silt_volume::client::VolumeClient;
use silt_volume::file_store::Mode;
use silt_volume::node::{Node, NodeAddrs, NodeConfig};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

fn free() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn run(mode: Mode, block: usize, clients: usize, mib: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let nodes: BTreeMap<u64, NodeAddrs> = (1..=3)
        .map(|id| {
            (
                id,
                NodeAddrs {
                    replica: free(),
                    client: free(),
                },
            )
        })
        .collect();
    let running: Vec<Node> = nodes
        .keys()
        .map(|&id| {
            let mut cfg = NodeConfig::new(id, dir.path().join(format!("n{id}")), nodes.clone());
            cfg.mode = mode;
            cfg.block_size = block as u32;
            cfg.blocks = (1u64 << 30) / block as u64;
            Node::start(cfg).expect("a node")
        })
        .collect();
    let addrs: Vec<SocketAddr> = nodes.values().map(|a| a.client).collect();
    // Warm up: a leader, and every connection made.
    VolumeClient::connect(&addrs)
        .and_then(|mut c| c.write(0, &vec![1u8; block]))
        .expect("a first write");
    let per_client = (mib << 20) / block / clients;
    let before = written_bytes();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|t| {
            let addrs = addrs.clone();
            std::thread::spawn(move || {
                let mut c = VolumeClient::connect(&addrs).expect("a client");
                let blocks = c.blocks();
                let mut lat = Vec::with_capacity(per_client);
                let mut x = 0x9e3779b97f4a7c15u64 ^ t as u64;
                for i in 0..per_client {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let b = x % blocks;
                    let data = vec![(i % 251) as u8; block];
                    let s = Instant::now();
                    c.write(b, &data).expect("a write");
                    lat.push(s.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("a writer"))
        .collect();
    let secs = t0.elapsed().as_secs_f64();
    let disk = written_bytes() - before;
    lat.sort();
    let logical = (per_client * clients * block) as f64;
    println!(
        "{mode:?} block={block} clients={clients}: {:.0} writes/s, {:.1} MiB/s, p50 {:.2} ms, p99 {:.2} ms, disk bytes per logical byte {:.2} (3 replicas)",
        lat.len() as f64 / secs,
        logical / secs / (1 << 20) as f64,
        lat[lat.len() / 2].as_secs_f64() * 1e3,
        lat[lat.len() * 99 / 100].as_secs_f64() * 1e3,
        disk as f64 / logical
    );
    drop(running);
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let block = args.first().copied().unwrap_or(4096);
    let clients = args.get(1).copied().unwrap_or(16);
    let mib = args.get(2).copied().unwrap_or(64);
    // `ONLY=reference` or `ONLY=inline`: one mode (for a profile).
    let only = std::env::var("ONLY").unwrap_or_default();
    for mode in [Mode::Reference, Mode::Inline] {
        if !only.is_empty() && !format!("{mode:?}").eq_ignore_ascii_case(&only) {
            continue;
        }
        run(mode, block, clients, mib);
    }
}
