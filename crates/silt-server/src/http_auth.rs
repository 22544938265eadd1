//! The HTTP front end's authentication (see [`crate::auth`]).
//!
//! - Every route but `GET /health` needs credentials when the server has
//!   users: `Authorization: Basic <user:password>` or `Authorization:
//!   Bearer <token>`. They are taken only over TLS or from a loopback peer
//!   (elsewhere they would cross the network in the clear): 403 otherwise.
//! - `POST /auth/token` (with Basic credentials; optional `ttl` seconds as
//!   a query parameter, default 3600, at most 86400) issues a bearer token:
//!   `{"token", "token_type": "Bearer", "user", "expires_in",
//!   "expires_at"}`. `DELETE /auth/token` (with the token as Bearer)
//!   revokes it. A token also dies with its role or its role's password.
//! - Missing or wrong credentials: 401 with `WWW-Authenticate`; a client
//!   address with too many failures: 429 with `Retry-After`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;

use crate::Shared;
use crate::auth::{TokenError, parse_basic, unix_secs};

/// The connection a request came on (set by the accept loop).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer {
    pub addr: SocketAddr,
    pub tls: bool,
}

/// Who sent the request (`user: None`: a server without users).
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    pub user: Option<String>,
}

const DEFAULT_TTL: u64 = 3600;
const MAX_TTL: u64 = 86_400;

fn json_error(status: StatusCode, code: &str, msg: &str) -> Response {
    let body = serde_json::json!({
        "status": "fatal",
        "errors": [{"code": code, "msg": msg}],
    });
    (status, axum::Json(body)).into_response()
}

fn unauthorized(msg: &str) -> Response {
    let mut r = json_error(StatusCode::UNAUTHORIZED, "28P01", msg);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"silt\", charset=\"UTF-8\""),
    );
    r
}

enum Credentials {
    Basic(String, String),
    Bearer(String),
}

/// A refusal to send instead of running the request (boxed: responses are big).
type Refusal = Box<Response>;

fn refuse(msg: &str) -> Refusal {
    Box::new(unauthorized(msg))
}

fn credentials(req: &Request) -> Result<Option<Credentials>, Refusal> {
    let Some(v) = req.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let v = v
        .to_str()
        .map_err(|_| Box::new(unauthorized("the Authorization header is not text")))?;
    if let Some(t) = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
    {
        return Ok(Some(Credentials::Bearer(t.trim().to_owned())));
    }
    match parse_basic(v) {
        Some((u, p)) => Ok(Some(Credentials::Basic(u, p))),
        None => Err(Box::new(unauthorized(
            "unreadable Authorization header: send `Basic base64(user:password)` or `Bearer <token>`",
        ))),
    }
}

/// Check the request's credentials; the user on success, the response to
/// send otherwise.
async fn check(
    shared: &Arc<Shared>,
    peer: Option<Peer>,
    creds: Result<Option<Credentials>, Refusal>,
    bearer_ok: bool,
) -> Result<String, Refusal> {
    let creds = creds?.ok_or_else(|| {
        refuse(
            "this server needs credentials: HTTP Basic (user and password) or a bearer token from POST /auth/token",
        )
    })?;
    if let Some(p) = peer
        && !p.tls
        && !p.addr.ip().is_loopback()
    {
        return Err(Box::new(json_error(
            StatusCode::FORBIDDEN,
            "28000",
            "credentials are accepted only over TLS (start the server with --tls-cert/--tls-key and use https://) or from this machine",
        )));
    }
    let ip = peer.map(|p| p.addr.ip());
    if let Some(ip) = ip
        && let Err(wait) = shared.auth.throttle.check(ip)
    {
        let secs = wait.as_secs() + 1;
        let mut r = json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "28000",
            &format!("too many failed logins from {ip}; retry in {secs} s"),
        );
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return Err(Box::new(r));
    }
    let failed = |user: &str, why: &str| {
        if let Some(ip) = ip {
            shared.auth.throttle.failed(ip);
        }
        tracing::warn!(
            "failed HTTP login for user \"{user}\" from {}: {why}",
            ip.map_or("?".to_owned(), |i| i.to_string())
        );
    };
    match creds {
        Credentials::Basic(user, password) => {
            let s = shared.clone();
            let u = user.clone();
            let ok = tokio::task::spawn_blocking(move || {
                s.auth
                    .check_password(s.engine.database(), &u, &password)
                    .is_some()
            })
            .await
            .unwrap_or(false);
            if ok {
                if let Some(ip) = ip {
                    shared.auth.throttle.succeeded(ip);
                }
                Ok(user)
            } else {
                failed(&user, "wrong password or no such user");
                Err(refuse(&format!(
                    "password authentication failed for user \"{user}\""
                )))
            }
        }
        Credentials::Bearer(_) if !bearer_ok => Err(refuse(
            "a token cannot issue tokens: send the user and password (HTTP Basic)",
        )),
        Credentials::Bearer(token) => {
            match shared.auth.tokens.check(shared.engine.database(), &token) {
                Ok(user) => Ok(user),
                Err(e) => {
                    let why = match e {
                        TokenError::Expired => {
                            "the token has expired; get a new one from POST /auth/token"
                        }
                        TokenError::Revoked => {
                            "the token was revoked (its role was dropped or its password changed)"
                        }
                        TokenError::Unknown | TokenError::Full => {
                            "unknown token (tokens do not survive a server restart); get one from POST /auth/token"
                        }
                    };
                    failed("(token)", why);
                    Err(refuse(why))
                }
            }
        }
    }
}

/// The authentication layer of the routes that need it.
pub(crate) async fn require(
    State(shared): State<Arc<Shared>>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = if shared.auth.required(shared.engine.database()) {
        let peer = req.extensions().get::<Peer>().copied();
        let creds = credentials(&req);
        match check(&shared, peer, creds, true).await {
            Ok(user) => Caller { user: Some(user) },
            Err(r) => return *r,
        }
    } else {
        Caller::default()
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// `POST /auth/token`.
pub(crate) async fn issue_token(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    if !shared.auth.required(shared.engine.database()) {
        return json_error(
            StatusCode::NOT_FOUND,
            "28000",
            "this server has no users, so it issues no tokens (add one with CREATE ROLE ... LOGIN PASSWORD)",
        );
    }
    let ttl = match q.get("ttl").map(|t| t.parse::<u64>()) {
        None => DEFAULT_TTL,
        Some(Ok(t)) if (1..=MAX_TTL).contains(&t) => t,
        Some(_) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "22023",
                &format!("ttl must be a number of seconds from 1 to {MAX_TTL}"),
            );
        }
    };
    let peer = req.extensions().get::<Peer>().copied();
    let creds = credentials(&req);
    drop(req);
    let user = match check(&shared, peer, creds, false).await {
        Ok(u) => u,
        Err(r) => return *r,
    };
    let Some(verifier) = shared
        .engine
        .database()
        .role(&user)
        .and_then(|r| r.verifier)
    else {
        return unauthorized("the role changed while logging in; try again");
    };
    match shared
        .auth
        .tokens
        .issue(&user, &verifier, Duration::from_secs(ttl))
    {
        Ok((token, expires)) => {
            tracing::info!("issued an HTTP token for user \"{user}\" ({ttl} s)");
            axum::Json(serde_json::json!({
                "token": token,
                "token_type": "Bearer",
                "user": user,
                "expires_in": ttl,
                "expires_at": unix_secs(expires),
            }))
            .into_response()
        }
        Err(_) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "53300",
            "too many live tokens; retry later",
        ),
    }
}

/// `DELETE /auth/token`.
pub(crate) async fn revoke_token(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let token = match credentials(&req) {
        Ok(Some(Credentials::Bearer(t))) => t,
        Ok(_) => {
            return unauthorized("send the token to revoke as `Authorization: Bearer <token>`");
        }
        Err(r) => return *r,
    };
    if shared.auth.tokens.revoke(&token) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        unauthorized("unknown token")
    }
}
