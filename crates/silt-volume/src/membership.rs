//! Who replicates a shard: its members and their addresses, written as
//! `ID=REPLICATION_ADDR/CLIENT_ADDR,...` (the form `silt volume node
//! --nodes` takes, kept in the block map and carried by reconfigurations).
//!
//! A shard's membership changes online by OmniPaxos's reconfiguration
//! (seed 001 §6.2 leaves it to the consensus layer): the leader proposes a
//! stop sign naming the next configuration's members, and once it is
//! decided each replica goes on in a new group with a log of its own
//! (`shard-<s>/cfg-<config>`). Members that stay apply it and continue;
//! a member that joins, or one that missed the change, learns of it from
//! the others' announcements and installs a snapshot from one of them; a
//! member that is removed stops serving the shard.

use crate::node::NodeAddrs;
use silt_replica::NodeId;
use std::collections::BTreeMap;

/// A configuration's members.
pub type Members = BTreeMap<NodeId, NodeAddrs>;

/// `1=127.0.0.1:7001/127.0.0.1:7101,2=...`
pub fn encode(m: &Members) -> String {
    m.iter()
        .map(|(id, a)| format!("{id}={}/{}", a.replica, a.client))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse [`encode`]'s form (or a list of such specs).
pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Members, String> {
    let mut out = Members::new();
    for spec in specs.iter().flat_map(|s| s.as_ref().split(',')) {
        let spec = spec.trim();
        if spec.is_empty() {
            continue;
        }
        let bad = || format!("{spec:?}: expected ID=REPLICATION_ADDR/CLIENT_ADDR");
        let (id, addrs) = spec.split_once('=').ok_or_else(bad)?;
        let (replica, client) = addrs.split_once('/').ok_or_else(bad)?;
        let id: NodeId = id
            .trim()
            .parse()
            .ok()
            .filter(|i| *i > 0)
            .ok_or_else(|| format!("{spec:?}: the id must be a positive integer"))?;
        let replica = replica
            .trim()
            .parse()
            .map_err(|e| format!("{spec:?}: replication address: {e}"))?;
        let client = client
            .trim()
            .parse()
            .map_err(|e| format!("{spec:?}: client address: {e}"))?;
        if out.insert(id, NodeAddrs { replica, client }).is_some() {
            return Err(format!("node {id} is listed twice"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_and_bad_specs_are_named() {
        let m =
            parse(&["1=127.0.0.1:7001/127.0.0.1:7101,2=127.0.0.1:7002/127.0.0.1:7102"]).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(parse(&[encode(&m)]).unwrap(), m);
        for (spec, want) in [
            ("1=127.0.0.1:7001", "expected ID="),
            ("x=127.0.0.1:1/127.0.0.1:2", "positive integer"),
            ("0=127.0.0.1:1/127.0.0.1:2", "positive integer"),
            ("1=nowhere/127.0.0.1:2", "replication address"),
            (
                "1=127.0.0.1:1/127.0.0.1:2,1=127.0.0.1:3/127.0.0.1:4",
                "twice",
            ),
        ] {
            let e = parse(&[spec]).unwrap_err();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }
}
