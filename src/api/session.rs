//! One connection's login, as the Kafka APIs see it: the listener it came through, and —
//! where SASL is required — how far its login got. [`super::decode`] asks
//! [`Session::admits`] before any handler runs, so a client that has not logged in
//! reaches nothing but ApiVersions and the SASL APIs; SaslHandshake and SaslAuthenticate
//! move the login on in their in-order phase, before the next request is decoded.

use std::{
    cell::{Cell, RefCell},
    net::SocketAddr,
};

use kafka_protocol::messages::ApiKey;
use weir_client::sasl::SaslMechanism;

use crate::security::scram_server::ServerExchange;

use super::SecurityProtocol;

/// The principal of a client that needed no login (Kafka's name for it).
pub const ANONYMOUS: &str = "ANONYMOUS";

/// Longest a client may take between two messages of its login, however long the idle
/// timeout: a stalled login holds its connection no longer than this.
pub const LOGIN_STEP_TIME_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// How far a connection's login got.
#[derive(Debug)]
pub enum LoginState {
    /// The listener requires no login.
    Open,
    /// SASL is required and no SaslHandshake has come yet.
    AwaitingHandshake,
    /// The client chose a mechanism; its first SaslAuthenticate is due.
    Chosen(SaslMechanism),
    /// A SCRAM exchange sent its server-first message; the client-final is due.
    Exchanging(ServerExchange),
    /// Logged in as this user.
    LoggedIn(String),
    /// The login failed: the connection closes once the answer is sent.
    Refused,
}

/// One connection's listener and login.
#[derive(Debug)]
pub struct Session {
    protocol: SecurityProtocol,
    peer: Option<SocketAddr>,
    state: RefCell<LoginState>,
    /// `User:<subject DN>` of the client's certificate, under mutual TLS.
    certificate_principal: Option<String>,
    /// SaslHandshake v0 chose the mechanism: its messages come as bare length-prefixed
    /// tokens, not SaslAuthenticate requests, until the login is done.
    raw_tokens: Cell<bool>,
}

impl Session {
    /// A new connection through a listener of `protocol` from `peer`, which must log in
    /// with SASL first when `sasl_required`.
    pub fn new(
        protocol: SecurityProtocol,
        peer: Option<SocketAddr>,
        sasl_required: bool,
    ) -> Session {
        let state = if sasl_required {
            LoginState::AwaitingHandshake
        } else {
            LoginState::Open
        };
        Session {
            protocol,
            peer,
            state: RefCell::new(state),
            certificate_principal: None,
            raw_tokens: Cell::new(false),
        }
    }

    /// The same session, its client known by its certificate: without SASL, that is
    /// its principal (Kafka's default for mutual TLS).
    pub fn with_certificate_principal(self, principal: Option<String>) -> Session {
        Session {
            certificate_principal: principal,
            ..self
        }
    }

    /// The listener's security protocol.
    pub fn protocol(&self) -> SecurityProtocol {
        self.protocol
    }

    /// The client's address, when known.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// True when a request of `key` may run now: before login only ApiVersions and the
    /// SASL API due next; nothing once a login failed.
    pub fn admits(&self, key: ApiKey) -> bool {
        match &*self.state.borrow() {
            LoginState::Open | LoginState::LoggedIn(_) => true,
            LoginState::AwaitingHandshake => {
                matches!(key, ApiKey::ApiVersions | ApiKey::SaslHandshake)
            }
            LoginState::Chosen(_) | LoginState::Exchanging(_) => key == ApiKey::SaslAuthenticate,
            LoginState::Refused => false,
        }
    }

    /// Says the login's messages come as bare tokens (SaslHandshake v0).
    pub fn use_raw_tokens(&self) {
        self.raw_tokens.set(true);
    }

    /// True when the next frame is a bare SASL token, not a Kafka request: a login
    /// started with SaslHandshake v0 is under way.
    pub fn expects_raw_token(&self) -> bool {
        self.raw_tokens.get()
            && matches!(
                &*self.state.borrow(),
                LoginState::Chosen(_) | LoginState::Exchanging(_)
            )
    }

    /// How long the connection may wait for the client's next bytes: `idle`, or less
    /// while a required login is not done ([`LOGIN_STEP_TIME_MAX`]).
    pub fn read_limit(&self, idle: std::time::Duration) -> std::time::Duration {
        match &*self.state.borrow() {
            LoginState::Open | LoginState::LoggedIn(_) => idle,
            _ => idle.min(LOGIN_STEP_TIME_MAX),
        }
    }

    /// True once a login failed: the connection reads no more requests and closes
    /// after sending the answers it owes.
    pub fn closing(&self) -> bool {
        matches!(&*self.state.borrow(), LoginState::Refused)
    }

    /// The login's state, taken out (left `Refused` until [`Session::set`] puts the next
    /// one in: a step that fails part-way closes the connection).
    pub fn take(&self) -> LoginState {
        std::mem::replace(&mut *self.state.borrow_mut(), LoginState::Refused)
    }

    /// Sets the login's state.
    pub fn set(&self, state: LoginState) {
        *self.state.borrow_mut() = state;
    }

    /// Who the client is, as Kafka writes principals: `User:NAME` once logged in with
    /// SASL; where no login is required, its certificate's `User:<subject DN>` under
    /// mutual TLS, else `User:ANONYMOUS`; `None` before a required login.
    pub fn principal(&self) -> Option<String> {
        match &*self.state.borrow() {
            LoginState::Open => Some(
                self.certificate_principal
                    .clone()
                    .unwrap_or_else(|| format!("User:{ANONYMOUS}")),
            ),
            LoginState::LoggedIn(user) => Some(format!("User:{user}")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_login_only_the_sasl_apis_pass() {
        let s = Session::new(SecurityProtocol::Plaintext, None, true);
        assert!(s.admits(ApiKey::ApiVersions) && s.admits(ApiKey::SaslHandshake));
        assert!(!s.admits(ApiKey::Produce) && !s.admits(ApiKey::SaslAuthenticate));
        s.set(LoginState::Chosen(SaslMechanism::Plain));
        assert!(s.admits(ApiKey::SaslAuthenticate) && !s.admits(ApiKey::Metadata));
        assert_eq!(s.principal(), None);
        s.set(LoginState::LoggedIn("alice".into()));
        assert!(s.admits(ApiKey::Produce));
        assert_eq!(s.principal().as_deref(), Some("User:alice"));
        let _ = s.take();
        assert!(s.closing() && !s.admits(ApiKey::ApiVersions));
        let open = Session::new(SecurityProtocol::Ssl, None, false);
        assert!(open.admits(ApiKey::Fetch));
        assert_eq!(open.principal().as_deref(), Some("User:ANONYMOUS"));
    }
}
