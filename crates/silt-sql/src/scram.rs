//! SCRAM-SHA-256 password verifiers (RFC 5802 and 7677), stored the way
//! PostgreSQL stores them:
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).
//!
//! A verifier lets the server check a SCRAM exchange, or a password sent
//! over TLS (HTTP Basic), without ever storing the password: `StoredKey` is
//! `SHA-256(HMAC(SaltedPassword, "Client Key"))`, `ServerKey` is
//! `HMAC(SaltedPassword, "Server Key")`, and `SaltedPassword` is PBKDF2
//! (HMAC-SHA-256) of the SASLprep-normalized password.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::SqlError;

/// PBKDF2 rounds of new verifiers (PostgreSQL's default).
pub const ITERATIONS: u32 = 4096;

/// The longest password accepted (PostgreSQL's limit is about 1 kB).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// A parsed verifier.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length, so this cannot fail.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    m.update(msg);
    m.finalize().into_bytes().to_vec()
}

/// The password as SCRAM clients hash it: SASLprep-normalized, or as is
/// when it cannot be (what PostgreSQL and libpq do).
fn normalized(password: &str) -> String {
    stringprep::saslprep(password)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| password.to_owned())
}

fn salted_password(password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(normalized(password).as_bytes(), salt, iterations, &mut out);
    out.to_vec()
}

fn check_password_text(password: &str) -> Result<(), SqlError> {
    if password.is_empty() {
        return Err(SqlError::Invalid(
            "an empty password cannot be used to log in; give a password or use NOLOGIN".into(),
        ));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(SqlError::Invalid(format!(
            "the password is longer than {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

impl Verifier {
    /// A verifier of `password` with a fresh random salt.
    pub fn new(password: &str) -> Result<Verifier, SqlError> {
        check_password_text(password)?;
        let mut salt = vec![0u8; 16];
        rand::rng().fill_bytes(&mut salt);
        Ok(Verifier::with_salt(password, salt, ITERATIONS))
    }

    fn with_salt(password: &str, salt: Vec<u8>, iterations: u32) -> Verifier {
        let sp = salted_password(password, &salt, iterations);
        Verifier {
            iterations,
            salt,
            stored_key: Sha256::digest(hmac(&sp, b"Client Key")).to_vec(),
            server_key: hmac(&sp, b"Server Key"),
        }
    }

    /// Whether `password` is the one this verifier was made from. Costs the
    /// PBKDF2 rounds; the comparison takes the same time wherever it differs.
    pub fn matches(&self, password: &str) -> bool {
        if password.is_empty() || password.len() > MAX_PASSWORD_BYTES {
            return false;
        }
        let v = Verifier::with_salt(password, self.salt.clone(), self.iterations);
        let diff = v
            .stored_key
            .iter()
            .zip(&self.stored_key)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0 && v.stored_key.len() == self.stored_key.len()
    }

    /// Parse the stored form (see the module documentation).
    pub fn parse(s: &str) -> Result<Verifier, SqlError> {
        let bad = |why: &str| SqlError::Invalid(format!("not a SCRAM-SHA-256 verifier: {why}"));
        let rest = s
            .strip_prefix("SCRAM-SHA-256$")
            .ok_or_else(|| bad("it must start with `SCRAM-SHA-256$`"))?;
        let (params, keys) = rest
            .split_once('$')
            .ok_or_else(|| bad("expected `<iterations>:<salt>$<StoredKey>:<ServerKey>`"))?;
        let (iters, salt) = params
            .split_once(':')
            .ok_or_else(|| bad("expected `<iterations>:<salt>`"))?;
        let (stored, server) = keys
            .split_once(':')
            .ok_or_else(|| bad("expected `<StoredKey>:<ServerKey>`"))?;
        let iterations: u32 = iters
            .parse()
            .ok()
            .filter(|i| (1..=10_000_000).contains(i))
            .ok_or_else(|| bad("bad iteration count"))?;
        let b64 = |x: &str, what: &str| {
            STANDARD
                .decode(x)
                .map_err(|_| bad(&format!("{what} is not base64")))
        };
        let v = Verifier {
            iterations,
            salt: b64(salt, "the salt")?,
            stored_key: b64(stored, "StoredKey")?,
            server_key: b64(server, "ServerKey")?,
        };
        if v.salt.is_empty() || v.stored_key.len() != 32 || v.server_key.len() != 32 {
            return Err(bad(
                "the salt must not be empty and both keys must be 32 bytes",
            ));
        }
        Ok(v)
    }

    /// A password given to `CREATE ROLE ... PASSWORD`: a verifier already
    /// (as `pg_dumpall` writes them) is kept, anything else is hashed.
    pub fn from_password_or_verifier(p: &str) -> Result<Verifier, SqlError> {
        if p.starts_with("SCRAM-SHA-256$") {
            Verifier::parse(p)
        } else {
            Verifier::new(p)
        }
    }
}

impl std::fmt::Display for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example: user "user", password "pencil", salt
    /// `W22ZaJ0SNY7soEsUEjb6gQ==`, 4096 rounds.
    #[test]
    fn rfc7677_keys() {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let v = Verifier::with_salt("pencil", salt, 4096);
        // ServerSignature of the RFC's exchange, from its ServerKey.
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        assert_eq!(
            STANDARD.encode(hmac(&v.server_key, auth.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        // The RFC's ClientProof checks out against StoredKey the way a
        // server checks it: SHA-256(proof XOR HMAC(StoredKey, auth)).
        let proof = STANDARD
            .decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        let sig = hmac(&v.stored_key, auth.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        assert_eq!(Sha256::digest(&client_key).to_vec(), v.stored_key);
        assert!(v.matches("pencil"));
        assert!(!v.matches("pencil "));
        assert!(!v.matches(""));
    }

    #[test]
    fn round_trip_and_bad_forms() {
        let v = Verifier::new("s3cret").unwrap();
        let s = v.to_string();
        assert!(s.starts_with("SCRAM-SHA-256$4096:"));
        let p = Verifier::parse(&s).unwrap();
        assert_eq!(p, v);
        assert!(p.matches("s3cret"));
        assert_eq!(Verifier::from_password_or_verifier(&s).unwrap(), v);
        for bad in [
            "md5abc",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$4096:c2FsdA==",
            "SCRAM-SHA-256$x:c2FsdA==$a:b",
            "SCRAM-SHA-256$4096:c2FsdA==$!!:??",
            "SCRAM-SHA-256$4096:c2FsdA==$c2FsdA==:c2FsdA==",
        ] {
            assert!(Verifier::parse(bad).is_err(), "{bad}");
        }
        assert!(Verifier::new("").is_err());
        assert!(Verifier::new(&"x".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
        // Two verifiers of one password differ (fresh salts).
        assert_ne!(Verifier::new("a").unwrap(), Verifier::new("a").unwrap());
    }
}
