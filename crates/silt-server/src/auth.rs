//! Authentication: who is connecting, for both front ends.
//!
//! - **Mode.** When the server starts, authentication is on if the
//!   database has a role that can log in (`LOGIN` and a password; see
//!   [`silt::Role`]), or if the configuration demands it. Otherwise
//!   nobody is asked for a password and every session may do everything,
//!   which is only allowed on loopback addresses.
//! - **PostgreSQL**: SCRAM-SHA-256 (with channel binding,
//!   SCRAM-SHA-256-PLUS, over TLS), checked against the role's stored
//!   verifier; the password never reaches the server. An unknown user or a
//!   role that may not log in gets a made-up verifier, so that the answer
//!   ("password authentication failed", 28P01) does not tell which users
//!   exist.
//! - **HTTP**: `Authorization: Basic` (user and password, checked against
//!   the same verifier) or `Authorization: Bearer` with a token from
//!   `POST /auth/token` ([`Tokens`]). Credentials are taken only over TLS
//!   or from a loopback peer.
//! - **Failed logins** are logged (user, address) and limited per client
//!   address ([`Throttle`]): after 5 failures within a minute the address is
//!   refused for 30 s, doubling with each further failure up to 15 minutes;
//!   a success clears it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use parking_lot::Mutex;
use silt::Database;
use silt_sql::scram::Verifier;

/// Failures within this window count together.
const WINDOW: Duration = Duration::from_secs(60);
/// Failures within the window before an address is refused.
const FREE_FAILURES: u32 = 5;
/// The first refusal; it doubles with each further failure.
const FIRST_BLOCK: Duration = Duration::from_secs(30);
const MAX_BLOCK: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most (the oldest are forgotten first).
const MAX_TRACKED: usize = 100_000;

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    first: Instant,
    blocked_until: Option<Instant>,
}

/// Failed logins per client address.
#[derive(Default)]
pub struct Throttle {
    by_addr: Mutex<HashMap<IpAddr, Failures>>,
}

impl Throttle {
    /// `Err(wait)` when `addr` is refused for now.
    pub fn check(&self, addr: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        match self.by_addr.lock().get(&addr).and_then(|f| f.blocked_until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Count a failed login from `addr`.
    pub fn failed(&self, addr: IpAddr) {
        let now = Instant::now();
        let mut m = self.by_addr.lock();
        if m.len() >= MAX_TRACKED && !m.contains_key(&addr) {
            // Forget the addresses whose window ended and are not blocked;
            // if that frees nothing, the oldest half.
            m.retain(|_, f| {
                now.duration_since(f.first) < WINDOW || f.blocked_until.is_some_and(|u| u > now)
            });
            if m.len() >= MAX_TRACKED {
                let mut firsts: Vec<Instant> = m.values().map(|f| f.first).collect();
                firsts.sort();
                let cut = firsts[firsts.len() / 2];
                m.retain(|_, f| f.first > cut);
            }
        }
        let f = m.entry(addr).or_insert(Failures {
            count: 0,
            first: now,
            blocked_until: None,
        });
        if now.duration_since(f.first) > WINDOW && f.blocked_until.is_none_or(|u| u <= now) {
            *f = Failures {
                count: 0,
                first: now,
                blocked_until: None,
            };
        }
        f.count += 1;
        if f.count >= FREE_FAILURES {
            let doublings = (f.count - FREE_FAILURES).min(10);
            let block = FIRST_BLOCK.saturating_mul(1 << doublings).min(MAX_BLOCK);
            f.blocked_until = Some(now + block);
        }
    }

    /// A successful login from `addr` clears its failures.
    pub fn succeeded(&self, addr: IpAddr) {
        self.by_addr.lock().remove(&addr);
    }
}

/// A bearer token's record (the token itself is not kept, only its hash).
#[derive(Clone, Debug)]
struct TokenInfo {
    user: String,
    /// The role's verifier when the token was issued: a new password (or
    /// a dropped role) makes the token invalid.
    verifier: String,
    expires: SystemTime,
}

/// Tokens issued at most at once.
const MAX_TOKENS: usize = 100_000;

/// Bearer tokens for HTTP clients, kept in memory (a restart revokes them
/// all): 32 random bytes, `silt_` + base64url, valid until they expire, are
/// revoked, or their role's password changes.
#[derive(Default)]
pub struct Tokens {
    by_hash: Mutex<HashMap<[u8; 32], TokenInfo>>,
}

fn token_hash(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// Why a token was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
    Unknown,
    Expired,
    /// Its role was dropped or got a new password.
    Revoked,
    /// Too many tokens are live.
    Full,
}

impl Tokens {
    /// Issue a token for `user` (whose current verifier is `verifier`),
    /// valid for `ttl`.
    pub fn issue(
        &self,
        user: &str,
        verifier: &str,
        ttl: Duration,
    ) -> Result<(String, SystemTime), TokenError> {
        use rand::RngCore;
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        let token = format!("silt_{}", URL_SAFE_NO_PAD.encode(raw));
        let expires = SystemTime::now() + ttl;
        let mut m = self.by_hash.lock();
        if m.len() >= MAX_TOKENS {
            let now = SystemTime::now();
            m.retain(|_, t| t.expires > now);
            if m.len() >= MAX_TOKENS {
                return Err(TokenError::Full);
            }
        }
        m.insert(
            token_hash(&token),
            TokenInfo {
                user: user.to_owned(),
                verifier: verifier.to_owned(),
                expires,
            },
        );
        Ok((token, expires))
    }

    /// The user a token stands for.
    pub fn check(&self, db: &Database, token: &str) -> Result<String, TokenError> {
        let h = token_hash(token);
        let info = self
            .by_hash
            .lock()
            .get(&h)
            .cloned()
            .ok_or(TokenError::Unknown)?;
        if info.expires <= SystemTime::now() {
            self.by_hash.lock().remove(&h);
            return Err(TokenError::Expired);
        }
        let current = db.role(&info.user).filter(|r| r.login);
        match current.and_then(|r| r.verifier) {
            Some(v) if v == info.verifier => Ok(info.user),
            _ => {
                self.by_hash.lock().remove(&h);
                Err(TokenError::Revoked)
            }
        }
    }

    /// Revoke one token; whether it was live.
    pub fn revoke(&self, token: &str) -> bool {
        self.by_hash.lock().remove(&token_hash(token)).is_some()
    }

    /// Revoke every token of `user`; how many there were.
    pub fn revoke_user(&self, user: &str) -> usize {
        let mut m = self.by_hash.lock();
        let before = m.len();
        m.retain(|_, t| t.user != user);
        before - m.len()
    }
}

/// The server's authentication state.
pub struct Auth {
    /// Passwords are required (latched: once a role can log in, they stay
    /// required even if it is dropped, so that a server that was safe to
    /// expose never opens up again).
    required: std::sync::atomic::AtomicBool,
    pub throttle: Throttle,
    pub tokens: Tokens,
    /// Made-up verifiers for unknown users are derived from this, so that
    /// one user name always gets the same salt (as a real one would).
    fake_seed: [u8; 32],
}

impl Auth {
    pub fn new(required: bool) -> Auth {
        use rand::RngCore;
        let mut fake_seed = [0u8; 32];
        rand::rng().fill_bytes(&mut fake_seed);
        Auth {
            required: std::sync::atomic::AtomicBool::new(required),
            throttle: Throttle::default(),
            tokens: Tokens::default(),
            fake_seed,
        }
    }

    /// Whether new connections must log in: from the first moment a role of
    /// `db` can log in (one created by SQL counts at once, for the next
    /// connection), and from then on.
    pub fn required(&self, db: &Database) -> bool {
        use std::sync::atomic::Ordering;
        if self.required.load(Ordering::Acquire) {
            return true;
        }
        if Auth::has_login_roles(db) {
            self.required.store(true, Ordering::Release);
            return true;
        }
        false
    }

    /// Whether `db` has a role that can log in.
    pub fn has_login_roles(db: &Database) -> bool {
        db.roles().iter().any(|r| r.login && r.verifier.is_some())
    }

    /// The verifier to run SCRAM against for `user`: the role's, or a
    /// made-up one that no password matches.
    pub fn verifier_for(&self, db: &Database, user: &str) -> Verifier {
        let real = db
            .role(user)
            .filter(|r| r.login)
            .and_then(|r| r.verifier)
            .and_then(|v| Verifier::parse(&v).ok());
        real.unwrap_or_else(|| self.fake_verifier(user))
    }

    fn fake_verifier(&self, user: &str) -> Verifier {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(self.fake_seed);
        h.update(user.as_bytes());
        let d: [u8; 32] = h.finalize().into();
        let mut k = sha2::Sha256::new();
        k.update(d);
        let key: [u8; 32] = k.finalize().into();
        Verifier {
            iterations: silt_sql::scram::ITERATIONS,
            salt: d[..16].to_vec(),
            stored_key: key.to_vec(),
            server_key: key.to_vec(),
        }
    }

    /// Check a user name and password (HTTP Basic); the role's verifier
    /// on success. Costs the PBKDF2 rounds: call it off the async threads.
    pub fn check_password(&self, db: &Database, user: &str, password: &str) -> Option<String> {
        // The same work whether or not the user exists, so that the time
        // taken does not tell.
        let ok = self.verifier_for(db, user).matches(password);
        let current = db.role(user).filter(|r| r.login).and_then(|r| r.verifier);
        current.filter(|_| ok)
    }
}

/// Split an HTTP `Authorization: Basic` value into user and password.
pub fn parse_basic(value: &str) -> Option<(String, String)> {
    let b64 = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let raw = STANDARD.decode(b64.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_owned(), p.to_owned()))
}

/// Seconds since the epoch (for token expiry in responses).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Shared by the listeners.
pub type SharedAuth = Arc<Auth>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_blocks_after_five_and_clears_on_success() {
        let t = Throttle::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..4 {
            t.failed(a);
            assert!(t.check(a).is_ok());
        }
        t.failed(a);
        let wait = t.check(a).unwrap_err();
        assert!(wait <= FIRST_BLOCK && wait > FIRST_BLOCK / 2);
        t.failed(a);
        assert!(t.check(a).unwrap_err() > FIRST_BLOCK);
        assert!(t.check(b).is_ok());
        t.succeeded(a);
        assert!(t.check(a).is_ok());
    }

    #[test]
    fn basic_header() {
        let v = format!("Basic {}", STANDARD.encode("ann:pa:ss"));
        assert_eq!(parse_basic(&v), Some(("ann".into(), "pa:ss".into())));
        assert_eq!(parse_basic("Basic !!!"), None);
        assert_eq!(parse_basic("Bearer x"), None);
        assert_eq!(
            parse_basic(&format!("Basic {}", STANDARD.encode("nocolon"))),
            None
        );
    }
}
