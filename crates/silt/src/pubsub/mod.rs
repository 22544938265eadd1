//! Publish/subscribe on LSM storage (seed 001 ch. 4): subscriptions that
//! receive the stored publications matching them at once and the future
//! ones as they are published, both expiring.
//!
//! - [`model`]: subscriptions, publications and the match rule (the
//!   validity decisions the text leaves open).
//! - [`store`]: the storage designs RepQueries, TwoDB and DualDB over
//!   datasets with a valuelist index (`crate::index::valuelist`), and the
//!   operations SUBSCRIBE, PUBLISH and the RepQueries poll.
//! - [`delivery`]: live delivery (beyond the paper): per-subscriber queues
//!   of matches written with the operation, a durable cursor, listeners.
//!
//! The layer sits on `db` and `dataset`.

pub mod delivery;
pub mod hierarchy;
pub mod model;
pub mod store;

pub use delivery::{Delivery, Listener};
pub use hierarchy::Granularity;
pub use model::{Filter, Publication, Subscription, live_at, matches};
pub use store::{Design, PubSub, PubSubOptions, PublishResult, SubscribeResult};
