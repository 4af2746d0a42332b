//! PLAIN (RFC 4616): `authzid NUL authcid NUL password` in one message. The password is
//! checked against the user's stored SCRAM credential, so PLAIN and SCRAM share one set
//! of users and the broker still keeps no password.

/// Longest PLAIN message accepted.
pub const MESSAGE_BYTES_MAX: usize = 1024;

/// A PLAIN login's user and password.
pub struct PlainLogin {
    /// The user.
    pub user: String,
    /// The password (never logged: this type has no Debug).
    pub password: String,
}

/// Why a PLAIN message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// Not `authzid NUL user NUL password`, too long, empty fields or not UTF-8.
    #[error("malformed PLAIN message")]
    Malformed,
    /// An authorisation identity other than the user.
    #[error("authorisation identity {0:?} is not the user")]
    Authzid(String),
}

/// Reads a PLAIN message.
pub fn parse(message: &[u8]) -> Result<PlainLogin, PlainError> {
    if message.len() > MESSAGE_BYTES_MAX {
        return Err(PlainError::Malformed);
    }
    let text = std::str::from_utf8(message).map_err(|_| PlainError::Malformed)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(PlainError::Malformed);
    };
    if user.is_empty() || password.is_empty() {
        return Err(PlainError::Malformed);
    }
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::Authzid(authzid.to_string()));
    }
    Ok(PlainLogin {
        user: user.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_parse_or_are_refused() {
        let ok = parse(b"\0alice\0pw").expect("plain");
        assert_eq!((ok.user.as_str(), ok.password.as_str()), ("alice", "pw"));
        assert!(parse(b"alice\0alice\0pw").is_ok());
        assert_eq!(
            parse(b"bob\0alice\0pw").err(),
            Some(PlainError::Authzid("bob".into()))
        );
        for bad in [
            &b""[..],
            b"\0alice",
            b"\0\0pw",
            b"\0alice\0",
            b"\0a\0b\0c",
            &[0xff, 0, 0x41, 0, 0x41],
        ] {
            assert_eq!(parse(bad).err(), Some(PlainError::Malformed));
        }
    }
}
