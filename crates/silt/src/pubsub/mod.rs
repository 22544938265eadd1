//! Publish/subscribe on LSM storage (seed 001 ch. 4): subscriptions that
//! receive the stored publications matching them at once and the future
//! ones as they are published, both expiring.
//!
//! - [`model`]: subscriptions, publications and the match rule (the
//!   validity decisions the text leaves open).
//! - [`store`]: the storage designs RepQueries, TwoDB and DualDB over
//!   datasets with a valuelist index (`crate::index::valuelist`), and the
//!   operations SUBSCRIBE, PUBLISH and the RepQueries poll.
//!
//! The layer sits on `db` and `dataset`.

pub mod hierarchy;
pub mod model;
pub mod store;

pub use hierarchy::Granularity;
pub use model::{Publication, Subscription, live_at, matches};
pub use store::{Design, PubSub, PubSubOptions, PublishResult, SubscribeResult};
