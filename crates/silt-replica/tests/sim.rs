//! The deterministic simulation of a replicated group, many seeds.
//! `SILT_SIM_SEEDS=N` runs more (a long run); a failing seed prints itself.

use silt_replica::sim::{Sim, SimConfig, SimReport};

fn run(cfg: SimConfig) -> SimReport {
    let dir = tempfile::tempdir().unwrap();
    let seed = cfg.seed;
    let mut sim = Sim::new(dir.path(), cfg);
    let report = sim.run();
    if let Err(v) = sim.check() {
        panic!("seed {seed}: {report:?}\n{}", v.join("\n"));
    }
    assert!(
        report.acknowledged > 0,
        "seed {seed}: nothing acknowledged: {report:?}"
    );
    report
}

/// `SILT_SIM_SEED=N` runs that seed alone (with the test's other settings).
fn only() -> Option<u64> {
    std::env::var("SILT_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
}

fn seeds() -> u64 {
    std::env::var("SILT_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

#[test]
fn three_replicas_under_lost_messages_delays_cuts_and_crashes() {
    let (mut trims, mut crashes_in_sync) = (0, 0);
    for seed in 0..seeds() {
        if only().is_some_and(|o| o != seed) {
            continue;
        }
        let report = run(SimConfig::new(seed));
        trims += report.trims;
        crashes_in_sync += report.crashes_in_sync;
    }
    // The runs exercise trimming (and restarts from checkpoints above it),
    // and leaders crashing inside a sync after their accept requests left.
    assert!(only().is_some() || trims > 0, "no run trimmed its log");
    assert!(
        only().is_some() || crashes_in_sync > 0,
        "no leader crashed inside its sync"
    );
}

#[test]
fn five_replicas_with_a_hostile_network() {
    for seed in 1000..1000 + seeds() / 2 {
        if only().is_some_and(|o| o != seed) {
            continue;
        }
        let mut cfg = SimConfig::new(seed);
        cfg.replicas = 5;
        cfg.loss = 0.08;
        cfg.max_delay = 8;
        cfg.crash = 0.03;
        cfg.cut = 0.03;
        let _ = run(cfg);
    }
}

#[test]
fn a_quiet_network_decides_everything_proposed_at_a_stable_leader() {
    let mut cfg = SimConfig::new(7);
    cfg.loss = 0.0;
    cfg.crash = 0.0;
    cfg.cut = 0.0;
    cfg.max_delay = 1;
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), cfg);
    let report = sim.run();
    sim.check().unwrap();
    assert!(report.trims > 0, "{report:?}");
    // Proposals are only taken by a leader, and with nothing failing, every
    // one taken is decided.
    assert_eq!(report.acknowledged, report.proposed, "{report:?}");
    assert!(report.proposed > 300, "{report:?}");
}

/// A replica that is not there at first joins by installing a snapshot
/// (its log created as compacted at the snapshot), under the same faults,
/// while the others trim: it must catch up and agree, never be asked for
/// entries it does not have (a replica that fails says so), and trimming
/// waits for it.
#[test]
fn a_replica_joining_late_by_snapshot_catches_up() {
    let mut joined = 0;
    for seed in 2000..2000 + seeds() {
        if only().is_some_and(|o| o != seed) {
            continue;
        }
        let mut cfg = SimConfig::new(seed);
        cfg.late_join = Some(300);
        let dir = tempfile::tempdir().unwrap();
        let mut sim = Sim::new(dir.path(), cfg);
        let report = sim.run();
        if let Err(v) = sim.check() {
            panic!("seed {seed}: {report:?}\n{}", v.join("\n"));
        }
        if report.joined_at.is_some_and(|i| i > 0) {
            joined += 1;
        }
    }
    assert!(
        only().is_some() || joined > 0,
        "no run joined above index 0"
    );
}
