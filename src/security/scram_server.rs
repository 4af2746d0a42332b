//! The server's side of one SCRAM exchange (RFC 5802): the client-first message is
//! answered with the server-first (the client's nonce extended, the user's salt and
//! iteration count), the client-final's proof is checked against the stored key and
//! answered with the server's signature. A user without a credential for the mechanism
//! gets a made-up salt and fails only at the proof, as Kafka does, so the exchange does
//! not tell who exists.

use weir_client::scram::{
    self, attribute, decode64, encode64, unescape_name, Mechanism, ITERATIONS_MIN,
};

use super::credentials::ScramCredential;

/// Longest SCRAM message accepted (user names and nonces are short).
pub const MESSAGE_BYTES_MAX: usize = 4096;

/// Why an exchange failed. The client learns only that it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// A message does not follow RFC 5802 (or asks for channel binding).
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// The proof is wrong, or the user has no credential for the mechanism.
    #[error("invalid credentials")]
    Credentials,
    /// The operating system gave no random bytes.
    #[error("no random bytes for a nonce")]
    Random,
}

/// An exchange after the server-first message went out.
#[derive(Debug)]
pub struct ServerExchange {
    mechanism: Mechanism,
    user: String,
    /// `client-first-bare,server-first`: the start of the AuthMessage.
    transcript: String,
    nonce: String,
    credential: Option<ScramCredential>,
}

impl ServerExchange {
    /// Reads the client-first message; `lookup` finds the user's credential. Returns
    /// the exchange and the server-first message.
    pub fn start(
        mechanism: Mechanism,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(ServerExchange, Vec<u8>), ExchangeError> {
        let text = text(client_first)?;
        // gs2-header: "n,," (no channel binding) or "y,," (client could but thinks the
        // server cannot); "p=" asks for binding, which this server does not offer. An
        // authorisation identity other than the user itself is refused later.
        let (binding, rest) = text
            .split_once(',')
            .ok_or(ExchangeError::Malformed("no GS2 header"))?;
        if binding != "n" && binding != "y" {
            return Err(ExchangeError::Malformed("channel binding is not supported"));
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ExchangeError::Malformed("no GS2 header"))?;
        if bare.starts_with("m=") {
            return Err(ExchangeError::Malformed("mandatory extensions"));
        }
        let user = attribute(bare, 'n')
            .and_then(unescape_name)
            .filter(|u| !u.is_empty())
            .ok_or(ExchangeError::Malformed("no user name"))?;
        if let Some(id) = authzid.strip_prefix("a=") {
            if unescape_name(id).as_deref() != Some(user.as_str()) {
                return Err(ExchangeError::Malformed("authorisation identity"));
            }
        } else if !authzid.is_empty() {
            return Err(ExchangeError::Malformed("GS2 header"));
        }
        let client_nonce = attribute(bare, 'r')
            .filter(|r| !r.is_empty())
            .ok_or(ExchangeError::Malformed("no nonce"))?;
        let credential = lookup(&user);
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => (
                scram::random_bytes(32).map_err(|_| ExchangeError::Random)?,
                ITERATIONS_MIN,
            ),
        };
        let nonce = format!(
            "{client_nonce}{}",
            scram::nonce().map_err(|_| ExchangeError::Random)?
        );
        let server_first = format!("r={nonce},s={},i={iterations}", encode64(&salt));
        Ok((
            ServerExchange {
                mechanism,
                user,
                transcript: format!("{bare},{server_first}"),
                nonce,
                credential,
            },
            server_first.into_bytes(),
        ))
    }

    /// The user the client-first message named.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks the client-final message's proof; returns the user, now authenticated,
    /// and the server-final message.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ExchangeError> {
        let text = text(client_final)?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ExchangeError::Malformed("no proof"))?;
        let binding = decode64(
            attribute(without_proof, 'c').ok_or(ExchangeError::Malformed("no channel binding"))?,
        )
        .map_err(|_| ExchangeError::Malformed("channel binding"))?;
        if !(binding.starts_with(b"n,") || binding.starts_with(b"y,")) {
            return Err(ExchangeError::Malformed("channel binding"));
        }
        // The nonce must end with the server's (Kafka's rule: librdkafka sends its own
        // nonce again in front of it, and Kafka accepts that).
        if !attribute(without_proof, 'r').is_some_and(|r| r.ends_with(self.nonce.as_str())) {
            return Err(ExchangeError::Malformed("nonce"));
        }
        let proof = decode64(proof).map_err(|_| ExchangeError::Malformed("proof"))?;
        let credential = self.credential.ok_or(ExchangeError::Credentials)?;
        let m = self.mechanism;
        let auth_message = format!("{},{without_proof}", self.transcript);
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ExchangeError::Credentials);
        }
        let client_key = scram::xor(&proof, &signature);
        if !scram::same(&m.hash(&client_key), &credential.stored_key) {
            return Err(ExchangeError::Credentials);
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((
            self.user,
            format!("v={}", encode64(&server_signature)).into_bytes(),
        ))
    }
}

fn text(bytes: &[u8]) -> Result<&str, ExchangeError> {
    if bytes.len() > MESSAGE_BYTES_MAX {
        return Err(ExchangeError::Malformed("too long"));
    }
    std::str::from_utf8(bytes).map_err(|_| ExchangeError::Malformed("not UTF-8"))
}

#[cfg(test)]
mod tests {
    use weir_client::scram::ClientExchange;

    use super::*;
    use crate::security::credentials::ScramHash;

    fn login(password: &str, stored: &ScramCredential, m: Mechanism) -> Result<String, String> {
        let (mut client, first) = ClientExchange::start(m, "al,ice", password).expect("start");
        let (server, server_first) =
            ServerExchange::start(m, &first, |u| (u == "al,ice").then(|| stored.clone()))
                .map_err(|e| e.to_string())?;
        let last = client.answer(&server_first).map_err(|e| e.to_string())?;
        let (user, server_final) = server.finish(&last).map_err(|e| e.to_string())?;
        client.verify(&server_final).map_err(|e| e.to_string())?;
        Ok(user)
    }

    #[test]
    fn the_right_password_logs_in_and_the_wrong_one_does_not() {
        for hash in [ScramHash::Sha256, ScramHash::Sha512] {
            let stored = ScramCredential::from_password(hash, "pw", 4096).expect("credential");
            let m = hash.mechanism();
            assert_eq!(login("pw", &stored, m), Ok("al,ice".to_string()));
            assert_eq!(login("px", &stored, m), Err("invalid credentials".into()));
        }
    }

    #[test]
    fn an_unknown_user_fails_only_at_the_proof() {
        let m = Mechanism::Sha512;
        let (mut client, first) = ClientExchange::start(m, "nobody", "pw").expect("start");
        let (server, server_first) = ServerExchange::start(m, &first, |_| None).expect("first");
        let last = client
            .answer(&server_first)
            .expect("a salt and iterations as usual");
        assert_eq!(server.finish(&last).err(), Some(ExchangeError::Credentials));
    }

    #[test]
    fn malformed_messages_are_refused() {
        let m = Mechanism::Sha256;
        for bad in [
            &b""[..],
            b"n,,",
            b"p=tls-unique,,n=a,r=x",
            b"n,a=bob,n=alice,r=x",
            b"n,,n=,r=x",
            b"n,,n=a=zz,r=x",
            b"n,,n=a",
            b"n,,m=ext,n=a,r=x",
            &[0xff, 0xfe],
        ] {
            assert!(
                ServerExchange::start(m, bad, |_| None).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let (server, _) = ServerExchange::start(m, b"n,,n=a,r=abc", |_| None).expect("first");
        assert!(matches!(
            server.finish(b"c=biws,r=abc,p=AAAA"),
            Err(ExchangeError::Malformed("nonce"))
        ));
    }
}
