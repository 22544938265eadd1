//! Silt core library. See `docs/architecture.md` for the map.
pub mod error;
pub mod lsm;
pub mod value;

pub use error::{Error, Result};
