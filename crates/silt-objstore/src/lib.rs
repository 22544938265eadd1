//! Silt's remote tier on object storage: the core crate's
//! [`silt::storage::remote::RemoteStore`] implemented with the
//! `object_store` crate, for `s3://bucket/prefix` (Amazon S3 and
//! S3-compatible servers: MinIO, Ceph, R2, moto) and `memory://name`
//! (in-process, for tests and trials).
//!
//! Call [`install`] once at startup; datasets created with a `remote` URL
//! then keep their cold levels in the bucket (`docs/architecture.md`,
//! "Object storage"). S3's settings come from the environment as the AWS
//! tools read them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL` (an S3-compatible server), and
//! `AWS_ALLOW_HTTP=true` for an endpoint without TLS.
//!
//! The core is synchronous; requests run on a small runtime of this
//! crate's own and the calling thread waits for them, so a caller may be
//! a plain thread or a task of another runtime.

mod store;

pub use store::{ObjectBackend, Settings};

use std::sync::Arc;

/// Register the `s3`, `s3a` and `memory` URL schemes with the core crate.
/// Idempotent.
pub fn install() {
    install_with(Settings::default());
}

/// [`install`] with request settings other than the defaults (retries,
/// timeouts, connection reuse).
pub fn install_with(settings: Settings) {
    for scheme in ["s3", "s3a", "memory"] {
        let s = settings.clone();
        silt::storage::remote::register(
            scheme,
            Arc::new(move |url: &str| {
                let b: Arc<dyn silt::storage::remote::RemoteStore> =
                    Arc::new(ObjectBackend::open(url, &s)?);
                Ok(b)
            }),
        );
    }
}
