//! Shared pieces of the spatial workloads: spherical geometry for the peers
//! ([`geo`]) and the generated records, deletes and queries with a brute-force
//! oracle ([`data`]).

pub mod data;
pub mod geo;
