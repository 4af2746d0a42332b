//! Logging in to a broker that requires SASL (Kafka's `SASL_PLAINTEXT` / `SASL_SSL`):
//! a SaslHandshake naming the mechanism, then SaslAuthenticate requests carrying the
//! mechanism's messages until it is done. [`Login`] holds one login's steps without
//! doing any I/O, so the pipelined and the blocking connection share it.

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};

use crate::{
    scram::{ClientExchange, Mechanism, ScramError},
    ClientError, Result,
};

/// The SaslHandshake version clients send: v1 (authentication bytes go in
/// SaslAuthenticate requests, not raw on the socket).
pub const HANDSHAKE_VERSION: i16 = 1;

/// The SaslAuthenticate version clients send.
pub const AUTHENTICATE_VERSION: i16 = 1;

/// A SASL mechanism a client can log in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password itself, so only over TLS on an open network.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(Mechanism),
}

impl SaslMechanism {
    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism called `name` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`; any case).
    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        let upper = name.to_ascii_uppercase();
        if upper == "PLAIN" {
            return Some(SaslMechanism::Plain);
        }
        Mechanism::from_name(&upper).map(SaslMechanism::Scram)
    }
}

/// Who to log in as, and how.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        write!(f, "SaslLogin({} as {})", self.mechanism.name(), self.user)
    }
}

impl SaslLogin {
    /// Parses `NAME:PASSWORD` (the password may hold `:`), logging in with `mechanism`.
    pub fn parse(mechanism: SaslMechanism, text: &str) -> std::result::Result<SaslLogin, String> {
        let (user, password) = text
            .split_once(':')
            .filter(|(u, p)| !u.is_empty() && !p.is_empty())
            .ok_or_else(|| "expected NAME:PASSWORD".to_string())?;
        Ok(SaslLogin {
            mechanism,
            user: user.to_string(),
            password: password.to_string(),
        })
    }

    /// The SaslHandshake request that opens this login.
    pub fn handshake(&self) -> SaslHandshakeRequest {
        let mut request = SaslHandshakeRequest::default();
        request.mechanism = self.mechanism.name().into();
        request
    }
}

/// One login in progress.
#[derive(Debug)]
pub enum Login {
    /// PLAIN: one message, then done.
    Plain,
    /// SCRAM: the exchange, and whether the client-final was sent.
    Scram(ClientExchange, bool),
}

impl Login {
    /// Starts logging in as `login`; returns the steps and the first SaslAuthenticate.
    pub fn start(login: &SaslLogin) -> Result<(Login, SaslAuthenticateRequest)> {
        let (steps, first) = match login.mechanism {
            SaslMechanism::Plain => (
                Login::Plain,
                format!("\0{}\0{}", login.user, login.password).into_bytes(),
            ),
            SaslMechanism::Scram(m) => {
                let (exchange, first) =
                    ClientExchange::start(m, &login.user, &login.password).map_err(refused)?;
                (Login::Scram(exchange, false), first)
            }
        };
        Ok((steps, authenticate(first)))
    }

    /// Takes the broker's answer to the last SaslAuthenticate: the next one to send, or
    /// `None` when logged in.
    pub fn next(&mut self, server: &[u8]) -> Result<Option<SaslAuthenticateRequest>> {
        match self {
            Login::Plain => Ok(None),
            Login::Scram(exchange, false) => {
                let last = exchange.answer(server).map_err(refused)?;
                *self = match std::mem::replace(self, Login::Plain) {
                    Login::Scram(exchange, _) => Login::Scram(exchange, true),
                    other => other,
                };
                Ok(Some(authenticate(last)))
            }
            Login::Scram(exchange, true) => {
                exchange.verify(server).map_err(refused)?;
                Ok(None)
            }
        }
    }
}

fn authenticate(bytes: Vec<u8>) -> SaslAuthenticateRequest {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = Bytes::from(bytes);
    request
}

fn refused(e: ScramError) -> ClientError {
    ClientError::Sasl(e.to_string())
}
