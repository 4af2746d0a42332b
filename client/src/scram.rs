//! SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512) as Kafka uses it: no
//! channel binding, no authorisation identity other than the user itself. The key
//! derivations both sides share ([`Mechanism`]), the message attribute syntax, and the
//! client's side of an exchange ([`ClientExchange`]). The crypto is *ring*'s (PBKDF2,
//! HMAC, SHA-2), the same library rustls runs on; nothing here is hand-rolled beyond
//! the message syntax.

use std::num::NonZeroU32;

use base64::{engine::general_purpose::STANDARD as BASE64, Engine};
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};
use subtle::ConstantTimeEq;

/// Fewest PBKDF2 iterations a credential may have (Kafka's minimum).
pub const ITERATIONS_MIN: u32 = 4096;

/// Most PBKDF2 iterations a credential may have (Kafka's maximum): bounds the work a
/// PLAIN login costs the broker.
pub const ITERATIONS_MAX: u32 = 16384;

/// A SCRAM mechanism: the hash its keys and proofs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// `SCRAM-SHA-256` (RFC 7677).
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

impl Mechanism {
    /// Both, in Kafka's order.
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism called `name` (exactly as SASL spells it).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's number for it in the user SCRAM credential APIs.
    pub fn kafka_type(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    /// The mechanism Kafka numbers `n`.
    pub fn from_kafka_type(n: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.kafka_type() == n)
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            Mechanism::Sha256 => hmac::HMAC_SHA256,
            Mechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this mechanism's HMAC. Costs
    /// `iterations` HMACs: keep it off a reactor.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let (algorithm, len) = match self {
            Mechanism::Sha256 => (pbkdf2::PBKDF2_HMAC_SHA256, 32),
            Mechanism::Sha512 => (pbkdf2::PBKDF2_HMAC_SHA512, 64),
        };
        let mut out = vec![0u8; len];
        pbkdf2::derive(algorithm, iterations, salt, password, &mut out);
        out
    }

    /// `HMAC(key, data)`.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        let algorithm = match self {
            Mechanism::Sha256 => &digest::SHA256,
            Mechanism::Sha512 => &digest::SHA512,
        };
        digest::digest(algorithm, data).as_ref().to_vec()
    }

    /// What a server keeps of a salted password: `StoredKey = H(HMAC(salted, "Client
    /// Key"))` and `ServerKey = HMAC(salted, "Server Key")`. Neither lets anyone log in
    /// (the client key is not derivable from them).
    pub fn keys(self, salted_password: &[u8]) -> Keys {
        let client_key = self.hmac(salted_password, b"Client Key");
        Keys {
            stored_key: self.hash(&client_key),
            server_key: self.hmac(salted_password, b"Server Key"),
        }
    }
}

/// The keys a server stores for one user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// `H(ClientKey)`: what a client's proof is checked against.
    pub stored_key: Vec<u8>,
    /// What the server signs its final message with.
    pub server_key: Vec<u8>,
}

/// `a XOR b`, over the shorter length (proofs and signatures are the same length).
pub fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// True when `a == b`, in time independent of where they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// `n` random bytes from the operating system.
pub fn random_bytes(n: usize) -> Result<Vec<u8>, ScramError> {
    let mut out = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| ScramError::Random)?;
    Ok(out)
}

/// A fresh nonce: 24 random bytes in base64 (printable, no commas).
pub fn nonce() -> Result<String, ScramError> {
    Ok(BASE64.encode(random_bytes(24)?))
}

/// Base64 as SCRAM writes it.
pub fn encode64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Bytes from SCRAM's base64.
pub fn decode64(text: &str) -> Result<Vec<u8>, ScramError> {
    BASE64
        .decode(text)
        .map_err(|_| ScramError::Malformed("invalid base64"))
}

/// Why a SCRAM exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message does not follow RFC 5802's syntax.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// The server's nonce does not extend the client's.
    #[error("the server's nonce does not extend the client's")]
    Nonce,
    /// The server asked for fewer or more iterations than allowed.
    #[error("iteration count {0} is outside {ITERATIONS_MIN}..={ITERATIONS_MAX}")]
    Iterations(u32),
    /// The server's signature is wrong: it does not know the password.
    #[error("the server's signature does not match")]
    ServerSignature,
    /// The server refused (`e=`).
    #[error("the server refused: {0}")]
    Refused(String),
    /// The operating system gave no random bytes.
    #[error("no random bytes from the operating system")]
    Random,
}

/// The value of attribute `name` in a SCRAM message (`a=1,b=2`), if present. Values may
/// hold `=` but never `,`.
pub fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

/// A user name as SCRAM writes it: `,` and `=` escaped as `=2C` and `=3D`.
pub fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// A user name as SCRAM wrote it, unescaped; `None` when an `=` escapes anything else.
pub fn unescape_name(written: &str) -> Option<String> {
    let mut out = String::with_capacity(written.len());
    let mut rest = written;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// Salted passwords this thread computed lately, newest last: a server offers the same
/// salt and iteration count again at the next login, and RFC 5802 (5.1) lets a client
/// keep the salted password instead of paying the PBKDF2 iterations on every connection.
const SALTED_CACHED_MAX: usize = 8;

/// A computed salted password and what it was computed from.
struct Salted {
    mechanism: Mechanism,
    password: Vec<u8>,
    salt: Vec<u8>,
    iterations: u32,
    salted: Vec<u8>,
}

thread_local! {
    static SALTED: std::cell::RefCell<Vec<Salted>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `Hi(password, salt, iterations)`, from this thread's cache when it was computed
/// lately.
fn salted_cached(m: Mechanism, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
    let found = SALTED.with_borrow(|cache| {
        cache
            .iter()
            .find(|c| {
                c.mechanism == m
                    && c.iterations == iterations.get()
                    && c.salt == salt
                    && same(&c.password, password)
            })
            .map(|c| c.salted.clone())
    });
    if let Some(salted) = found {
        return salted;
    }
    let salted = m.salted_password(password, salt, iterations);
    SALTED.with_borrow_mut(|cache| {
        if cache.len() == SALTED_CACHED_MAX {
            cache.remove(0);
        }
        cache.push(Salted {
            mechanism: m,
            password: password.to_vec(),
            salt: salt.to_vec(),
            iterations: iterations.get(),
            salted: salted.clone(),
        });
    });
    salted
}

/// The GS2 header Kafka's clients send: no channel binding, no authorisation identity.
pub const GS2_HEADER: &str = "n,,";

/// The client's side of one SCRAM exchange: [`ClientExchange::start`] gives the
/// client-first message, [`ClientExchange::answer`] turns the server-first into the
/// client-final, [`ClientExchange::verify`] checks the server-final.
#[derive(Debug)]
pub struct ClientExchange {
    mechanism: Mechanism,
    password: Vec<u8>,
    nonce: String,
    client_first_bare: String,
    /// The server signature expected, once the client-final is computed.
    expected_signature: Option<Vec<u8>>,
}

impl ClientExchange {
    /// Starts an exchange for `user` with `password`; returns it and the client-first
    /// message.
    pub fn start(
        mechanism: Mechanism,
        user: &str,
        password: &str,
    ) -> Result<(ClientExchange, Vec<u8>), ScramError> {
        let nonce = nonce()?;
        let client_first_bare = format!("n={},r={nonce}", escape_name(user));
        let first = format!("{GS2_HEADER}{client_first_bare}").into_bytes();
        Ok((
            ClientExchange {
                mechanism,
                password: password.as_bytes().to_vec(),
                nonce,
                client_first_bare,
                expected_signature: None,
            },
            first,
        ))
    }

    /// The client-final message answering `server_first`.
    pub fn answer(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        if let Some(refusal) = attribute(server_first, 'e') {
            return Err(ScramError::Refused(refusal.to_string()));
        }
        let nonce = attribute(server_first, 'r').ok_or(ScramError::Malformed("no nonce"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Nonce);
        }
        let salt = decode64(attribute(server_first, 's').ok_or(ScramError::Malformed("no salt"))?)?;
        let iterations: u32 = attribute(server_first, 'i')
            .and_then(|i| i.parse().ok())
            .ok_or(ScramError::Malformed("no iteration count"))?;
        let counted = NonZeroU32::new(iterations)
            .filter(|_| (ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations))
            .ok_or(ScramError::Iterations(iterations))?;
        let m = self.mechanism;
        let salted = salted_cached(m, &self.password, &salt, counted);
        let without_proof = format!("c={},r={nonce}", encode64(GS2_HEADER.as_bytes()));
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&m.hash(&client_key), auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        let server_key = m.hmac(&salted, b"Server Key");
        self.expected_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", encode64(&proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it knows the password.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let server_final =
            std::str::from_utf8(server_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        if let Some(refusal) = attribute(server_final, 'e') {
            return Err(ScramError::Refused(refusal.to_string()));
        }
        let signature = decode64(
            attribute(server_final, 'v').ok_or(ScramError::Malformed("no server signature"))?,
        )?;
        match &self.expected_signature {
            Some(expected) if same(expected, &signature) => Ok(()),
            _ => Err(ScramError::ServerSignature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example exchange (user "user", password "pencil"), with the RFC's
    /// client nonce: every derived value must match the RFC's.
    #[test]
    fn rfc_7677_example() {
        let m = Mechanism::Sha256;
        let salt = decode64("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = m.salted_password(b"pencil", &salt, NonZeroU32::new(4096).expect("nonzero"));
        let mut exchange = ClientExchange {
            mechanism: m,
            password: b"pencil".to_vec(),
            nonce: "rOprNGfwEbeRWgbNEkqO".into(),
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            expected_signature: None,
        };
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = exchange.answer(server_first).expect("answer");
        assert_eq!(
            String::from_utf8(last).expect("utf8"),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        exchange
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .expect("server signature");
        assert_eq!(
            exchange.verify(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramError::ServerSignature)
        );
        // The stored key is what the client proof checks against.
        let keys = m.keys(&salted);
        assert_eq!(keys.stored_key.len(), 32);
    }

    #[test]
    fn names_escape_and_unescape() {
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(unescape_name("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(unescape_name("a=xx"), None);
        assert_eq!(unescape_name("a="), None);
        assert_eq!(attribute("n=x,r=a=b", 'r'), Some("a=b"));
        assert_eq!(attribute("n=x", 'r'), None);
    }

    #[test]
    fn the_server_must_extend_the_nonce_and_bound_iterations() {
        let (mut exchange, _) = ClientExchange::start(Mechanism::Sha512, "u", "p").expect("start");
        let nonce = exchange.nonce.clone();
        assert_eq!(
            exchange.answer(b"r=other,s=AAAA,i=4096"),
            Err(ScramError::Nonce)
        );
        assert_eq!(
            exchange.answer(format!("r={nonce}x,s=AAAA,i=100").as_bytes()),
            Err(ScramError::Iterations(100))
        );
        assert_eq!(
            exchange.answer(b"e=invalid-proof"),
            Err(ScramError::Refused("invalid-proof".into()))
        );
    }
}
