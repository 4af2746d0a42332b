//! Why a call to a broker failed.

use kafka_protocol::ResponseError;

use crate::frame::FrameError;

/// Why a call to a broker failed. The broker's address is in every variant, so a
/// message names the host that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed or the broker closed it.
    #[error("broker {addr}: {error}")]
    Io {
        /// The broker address.
        addr: String,
        /// The error (in the message, not a separate cause, so it is printed once).
        error: std::io::Error,
    },
    /// A request could not be encoded or a response decoded.
    #[error("broker {addr}: {error}")]
    Frame {
        /// The broker address.
        addr: String,
        /// What was wrong.
        error: FrameError,
    },
    /// The broker answered with a Kafka error.
    #[error("{what}: {code:?}")]
    Kafka {
        /// The call, and what it was about.
        what: String,
        /// Kafka's error.
        code: ResponseError,
    },
    /// TLS could not be set up (the CA file) or its handshake failed (`what` names the
    /// file or the broker).
    #[error("TLS with {what}: {reason}")]
    Tls {
        /// The CA file or the broker address.
        what: String,
        /// What went wrong.
        reason: String,
    },
    /// A SASL login failed: the broker refused the mechanism or the credentials, or it
    /// could not prove it knows the password.
    #[error("SASL: {0}")]
    Sasl(String),
    /// The topic did not get a leader for every partition in time.
    #[error("topic {0} has partitions without a leader after 10 s")]
    NoLeader(String),
}

/// A client call's result.
pub type Result<T> = std::result::Result<T, ClientError>;

impl ClientError {
    /// `Err` with Kafka's error when `code` is one (not 0), for the call named `what`.
    pub fn check(what: impl Into<String>, code: i16) -> Result<()> {
        match ResponseError::try_from_code(code) {
            Some(code) => Err(ClientError::Kafka {
                what: what.into(),
                code,
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn io(addr: &str) -> impl Fn(std::io::Error) -> ClientError + '_ {
        move |error| ClientError::Io {
            addr: addr.to_string(),
            error,
        }
    }

    pub(crate) fn frame(addr: &str) -> impl Fn(FrameError) -> ClientError + '_ {
        move |error| ClientError::Frame {
            addr: addr.to_string(),
            error,
        }
    }
}
