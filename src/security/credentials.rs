//! SCRAM credentials as the metadata keeps them: per user and mechanism, the salt, the
//! iteration count and the two keys a server needs (RFC 5802's StoredKey and
//! ServerKey) — never the password, and nothing a client could log in with.

use std::{collections::BTreeMap, num::NonZeroU32};

use serde::{Deserialize, Serialize};
use weir_client::scram::{self, Mechanism, ScramError, ITERATIONS_MAX, ITERATIONS_MIN};

/// A SCRAM mechanism as the metadata spells it (one-to-one with
/// [`weir_client::scram::Mechanism`], which has no serde form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl From<Mechanism> for ScramHash {
    fn from(m: Mechanism) -> ScramHash {
        match m {
            Mechanism::Sha256 => ScramHash::Sha256,
            Mechanism::Sha512 => ScramHash::Sha512,
        }
    }
}

impl ScramHash {
    /// The mechanism.
    pub fn mechanism(self) -> Mechanism {
        match self {
            ScramHash::Sha256 => Mechanism::Sha256,
            ScramHash::Sha512 => Mechanism::Sha512,
        }
    }
}

/// What the server keeps of one user's password for one mechanism.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations, within [`ITERATIONS_MIN`]..=[`ITERATIONS_MAX`].
    pub iterations: u32,
    /// `H(ClientKey)`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScramCredential({} iterations)", self.iterations)
    }
}

/// Why a credential was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The iteration count is outside what Kafka allows.
    #[error("iterations must be within {ITERATIONS_MIN}..={ITERATIONS_MAX}, got {0}")]
    Iterations(i32),
    /// The salted password has the wrong length for its mechanism, or the salt is empty.
    #[error("a {0} salted password must be {1} bytes with a non-empty salt")]
    Shape(&'static str, usize),
    /// The operating system gave no random salt.
    #[error(transparent)]
    Random(#[from] ScramError),
}

impl ScramCredential {
    /// The credential of a password the client already salted (what
    /// AlterUserScramCredentials carries): checked, then reduced to the two keys.
    pub fn from_salted(
        hash: ScramHash,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> Result<ScramCredential, CredentialError> {
        let iterations = u32::try_from(iterations)
            .ok()
            .filter(|i| (ITERATIONS_MIN..=ITERATIONS_MAX).contains(i))
            .ok_or(CredentialError::Iterations(iterations))?;
        let m = hash.mechanism();
        let len = m.hash(b"").len();
        if salt.is_empty() || salted_password.len() != len {
            return Err(CredentialError::Shape(m.name(), len));
        }
        let keys = m.keys(salted_password);
        Ok(ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: keys.stored_key,
            server_key: keys.server_key,
        })
    }

    /// The credential of `password` with a fresh random salt and `iterations` (within
    /// the allowed range). Costs `iterations` HMACs: keep it off a reactor.
    pub fn from_password(
        hash: ScramHash,
        password: &str,
        iterations: u32,
    ) -> Result<ScramCredential, CredentialError> {
        let counted = NonZeroU32::new(iterations)
            .filter(|_| (ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations))
            .ok_or(CredentialError::Iterations(iterations as i32))?;
        let salt = scram::random_bytes(32)?;
        let salted = hash
            .mechanism()
            .salted_password(password.as_bytes(), &salt, counted);
        ScramCredential::from_salted(hash, &salt, &salted, iterations as i32)
    }

    /// True when `password` is the one this credential was made from. Costs
    /// `iterations` HMACs: keep it off a reactor.
    pub fn matches(&self, hash: ScramHash, password: &str) -> bool {
        let Some(counted) = NonZeroU32::new(self.iterations) else {
            return false;
        };
        let m = hash.mechanism();
        let salted = m.salted_password(password.as_bytes(), &self.salt, counted);
        scram::same(&m.keys(&salted).stored_key, &self.stored_key)
    }
}

/// Every user's SCRAM credentials: user → mechanism → credential. A user with no
/// credential left is no user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Users(pub BTreeMap<String, BTreeMap<ScramHash, ScramCredential>>);

/// One change to the users' credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScramChange {
    /// Sets (creates or replaces) `user`'s credential for `hash`.
    Upsert {
        /// The user.
        user: String,
        /// The mechanism.
        hash: ScramHash,
        /// The credential.
        credential: ScramCredential,
    },
    /// Removes `user`'s credential for `hash` (nothing if there is none).
    Delete {
        /// The user.
        user: String,
        /// The mechanism.
        hash: ScramHash,
    },
}

impl Users {
    /// `user`'s credential for `hash`.
    pub fn get(&self, user: &str, hash: ScramHash) -> Option<&ScramCredential> {
        self.0.get(user)?.get(&hash)
    }

    /// Applies `changes` in order. Deterministic.
    pub fn apply(&mut self, changes: &[ScramChange]) {
        for change in changes {
            match change {
                ScramChange::Upsert {
                    user,
                    hash,
                    credential,
                } => {
                    self.0
                        .entry(user.clone())
                        .or_default()
                        .insert(*hash, credential.clone());
                }
                ScramChange::Delete { user, hash } => {
                    if let Some(held) = self.0.get_mut(user) {
                        held.remove(hash);
                        if held.is_empty() {
                            self.0.remove(user);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_matches_its_password_only() {
        let c = ScramCredential::from_password(ScramHash::Sha512, "s3cret", 4096).expect("make");
        assert!(c.matches(ScramHash::Sha512, "s3cret"));
        assert!(!c.matches(ScramHash::Sha512, "s3cret "));
        assert_eq!(c.stored_key.len(), 64);
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn bad_credentials_are_refused() {
        assert_eq!(
            ScramCredential::from_salted(ScramHash::Sha256, b"salt", &[0; 32], 100),
            Err(CredentialError::Iterations(100))
        );
        assert!(matches!(
            ScramCredential::from_salted(ScramHash::Sha256, b"salt", &[0; 64], 4096),
            Err(CredentialError::Shape(_, 32))
        ));
        assert!(matches!(
            ScramCredential::from_salted(ScramHash::Sha512, b"", &[0; 64], 4096),
            Err(CredentialError::Shape(_, 64))
        ));
    }

    #[test]
    fn users_without_credentials_disappear() {
        let c = ScramCredential::from_salted(ScramHash::Sha256, b"s", &[1; 32], 4096).expect("ok");
        let mut users = Users::default();
        users.apply(&[ScramChange::Upsert {
            user: "alice".into(),
            hash: ScramHash::Sha256,
            credential: c.clone(),
        }]);
        assert_eq!(users.get("alice", ScramHash::Sha256), Some(&c));
        assert_eq!(users.get("alice", ScramHash::Sha512), None);
        users.apply(&[ScramChange::Delete {
            user: "alice".into(),
            hash: ScramHash::Sha256,
        }]);
        assert!(users.0.is_empty());
    }
}
