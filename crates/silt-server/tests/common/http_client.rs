//! reqwest clients for the tests. reqwest is built with rustls but without a
//! crypto provider of its own (`rustls-no-provider`, so that aws-lc is not
//! compiled): every client needs ring installed as the process's provider.

#![allow(dead_code)]

use pgwire::tokio::tokio_rustls::rustls;

/// Install ring as the default rustls provider (once per process).
pub fn install_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A plain reqwest client.
pub fn client() -> reqwest::Client {
    install_ring();
    reqwest::Client::new()
}
