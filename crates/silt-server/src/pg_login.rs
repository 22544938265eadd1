//! The PostgreSQL front end's login: the TLS requirement, the throttle on
//! failed logins, and SCRAM-SHA-256 against the roles' verifiers (see
//! [`crate::auth`]). A successful login makes the connection's SQL session
//! run as the role.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::sasl::scram::{ScramAuth, ScramSecret};
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use silt_sql::SqlSession;

use crate::Shared;

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".to_owned(),
        code.to_owned(),
        message,
    )))
}

/// The roles' SCRAM verifiers, for `pgwire`'s SCRAM exchange.
struct Verifiers {
    shared: Arc<Shared>,
}

impl Debug for Verifiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifiers")
    }
}

#[async_trait]
impl AuthSource for Verifiers {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        // Only SCRAM is offered, which asks for the verifier below.
        Err(PgWireError::UnsupportedSASLAuthMethod(
            "password".to_owned(),
        ))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let user = login.user().unwrap_or_default();
        let v = self
            .shared
            .auth
            .verifier_for(self.shared.engine.database(), user);
        Ok((
            ScramSecret::Verifier {
                salt: v.salt,
                iterations: v.iterations as usize,
                stored_key: v.stored_key,
                server_key: v.server_key,
            },
            None,
        ))
    }
}

/// No authentication (a server without users, on loopback).
struct Trust;

impl NoopStartupHandler for Trust {}

/// The startup handler of one connection.
pub struct Login {
    shared: Arc<Shared>,
    session: Arc<SqlSession>,
    scram: Option<SASLAuthStartupHandler<DefaultServerParameterProvider>>,
    trust: Trust,
}

impl Login {
    pub(crate) fn new(shared: Arc<Shared>, session: Arc<SqlSession>) -> Result<Login, PgWireError> {
        let scram = if shared.auth.required(shared.engine.database()) {
            let mut s = ScramAuth::new(Arc::new(Verifiers {
                shared: shared.clone(),
            }));
            if let Some(tls) = &shared.tls {
                // Offers SCRAM-SHA-256-PLUS (channel binding) over TLS.
                s.configure_certificate(&tls.cert_pem)?;
            }
            Some(
                SASLAuthStartupHandler::new(Arc::new(DefaultServerParameterProvider::default()))
                    .with_scram(s),
            )
        } else {
            None
        };
        Ok(Login {
            shared,
            session,
            scram,
            trust: Trust,
        })
    }
}

#[async_trait]
impl StartupHandler for Login {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let addr = client.socket_addr().ip();
        if let PgWireFrontendMessage::Startup(_) = &message {
            if self.shared.tls_required && !client.is_secure() {
                return Err(fatal(
                    "28000",
                    "this server accepts TLS connections only: connect with sslmode=require (or verify-full)".to_owned(),
                ));
            }
            if let Err(wait) = self.shared.auth.throttle.check(addr) {
                return Err(fatal(
                    "28000",
                    format!(
                        "too many failed logins from {addr}; retry in {} s",
                        wait.as_secs() + 1
                    ),
                ));
            }
        }
        let Some(scram) = &self.scram else {
            return self.trust.on_startup(client, message).await;
        };
        let password = matches!(message, PgWireFrontendMessage::PasswordMessageFamily(_));
        let r = scram.on_startup(client, message).await;
        if password {
            let user = client.metadata().get("user").cloned().unwrap_or_default();
            // PostgreSQL's wording, with the user of the startup message
            // (SCRAM's own user name is empty with libpq).
            let r = match r {
                Err(PgWireError::InvalidPassword(_)) => Err(fatal(
                    "28P01",
                    format!("password authentication failed for user \"{user}\""),
                )),
                other => other,
            };
            match &r {
                Err(e) => {
                    self.shared.auth.throttle.failed(addr);
                    tracing::warn!("failed login for user \"{user}\" from {addr}: {e}");
                }
                Ok(()) if matches!(client.state(), PgWireConnectionState::ReadyForQuery) => {
                    self.shared.auth.throttle.succeeded(addr);
                    tracing::debug!("user \"{user}\" logged in from {addr}");
                    self.session.set_user(Some(user));
                }
                Ok(()) => {}
            }
            return r;
        }
        r
    }
}
