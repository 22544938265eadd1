//! TLS for both listeners (`rustls` with the `ring` provider, through
//! `pgwire`'s `tokio-rustls`): a certificate chain and its private key, in
//! PEM files.
//!
//! - PostgreSQL: the client asks for TLS with an `SSLRequest` (libpq's
//!   `sslmode=require`, `verify-ca`, `verify-full`) or starts TLS at once
//!   (PostgreSQL 17's `sslnegotiation=direct`, ALPN `postgresql`). Plain
//!   connections are refused when TLS is required.
//! - HTTP: with a certificate, the HTTP listener speaks HTTPS only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::TlsAcceptor;
use pgwire::tokio::tokio_rustls::rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::ServerError;

/// Where the certificate and key are.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM: the server's certificate first, then any intermediates.
    pub cert: PathBuf,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The loaded certificate, ready for both listeners.
pub struct Tls {
    /// The certificate chain in PEM (SCRAM channel binding hashes it).
    pub cert_pem: Vec<u8>,
    pub pg: TlsAcceptor,
    pub http: TlsAcceptor,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> ServerError {
    ServerError::Config(format!("TLS: {}: {why}", path.display()))
}

impl Tls {
    /// Load and check the files.
    pub fn load(files: &TlsFiles) -> Result<Tls, ServerError> {
        let cert_pem = std::fs::read(&files.cert).map_err(|e| bad(&files.cert, e))?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&files.cert, format!("not a PEM certificate file ({e})")))?;
        if certs.is_empty() {
            return Err(bad(
                &files.cert,
                "holds no certificate (expected PEM `CERTIFICATE` blocks)",
            ));
        }
        let key_pem = std::fs::read(&files.key).map_err(|e| bad(&files.key, e))?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            bad(
                &files.key,
                format!("no private key in it ({e}); expected a PEM PRIVATE KEY block"),
            )
        })?;
        let config = |alpn: &[u8]| -> Result<Arc<rustls::ServerConfig>, ServerError> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut c = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| ServerError::Config(format!("TLS: {e}")))?
                .with_no_client_auth()
                .with_single_cert(certs.clone(), key.clone_key())
                .map_err(|e| {
                    ServerError::Config(format!(
                        "TLS: the certificate {} and key {} do not go together: {e}",
                        files.cert.display(),
                        files.key.display()
                    ))
                })?;
            c.alpn_protocols = vec![alpn.to_vec()];
            Ok(Arc::new(c))
        };
        Ok(Tls {
            pg: TlsAcceptor::from(config(b"postgresql")?),
            http: TlsAcceptor::from(config(b"http/1.1")?),
            cert_pem,
        })
    }
}
