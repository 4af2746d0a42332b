//! The SASL settings: which mechanisms every listener requires, and the users created
//! (or updated) at start so a new broker is not locked out.

use weir_client::{
    sasl::{SaslLogin, SaslMechanism},
    scram::Mechanism,
};

/// SASL is required on every listener (Kafka's `SASL_PLAINTEXT` beside `SASL_SSL`).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// The mechanisms offered, in the order given.
    pub mechanisms: Vec<SaslMechanism>,
    /// `--sasl-user NAME:PASSWORD`: created or updated (both SCRAM mechanisms) at start.
    /// The first is also who this host's followers log in as on other hosts.
    pub users: Vec<(String, String)>,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only, never passwords.
        let names: Vec<&str> = self.mechanisms.iter().map(|m| m.name()).collect();
        let users: Vec<&str> = self.users.iter().map(|(u, _)| u.as_str()).collect();
        write!(f, "SaslConfig({names:?}, users {users:?})")
    }
}

/// Why the SASL settings were refused: the option and the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct SaslConfigError {
    /// The option, as spelled on the command line.
    pub option: &'static str,
    /// What is wrong.
    pub reason: String,
}

fn refuse(option: &'static str, reason: impl Into<String>) -> SaslConfigError {
    SaslConfigError {
        option,
        reason: reason.into(),
    }
}

impl SaslConfig {
    /// The settings from `--sasl-mechanisms LIST` and `--sasl-user NAME:PASSWORD`s;
    /// `None` when SASL is off (no mechanisms, no users).
    pub fn from_flags(
        mechanisms: Option<&str>,
        users: &[String],
    ) -> Result<Option<SaslConfig>, SaslConfigError> {
        let Some(list) = mechanisms else {
            if users.is_empty() {
                return Ok(None);
            }
            return Err(refuse("--sasl-user", "needs --sasl-mechanisms"));
        };
        let mut parsed = Vec::new();
        for name in list.split(',').map(str::trim) {
            let m = SaslMechanism::from_name(name).ok_or_else(|| {
                refuse(
                    "--sasl-mechanisms",
                    format!("{name:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                )
            })?;
            if !parsed.contains(&m) {
                parsed.push(m);
            }
        }
        let users = users
            .iter()
            .map(|text| {
                SaslLogin::parse(SaslMechanism::Plain, text)
                    .map(|l| (l.user, l.password))
                    .map_err(|e| refuse("--sasl-user", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(SaslConfig {
            mechanisms: parsed,
            users,
        }))
    }

    /// How this host's followers log in to other hosts: as the first `--sasl-user`,
    /// with the strongest mechanism offered. `None` without users.
    pub fn replica_login(&self) -> Option<SaslLogin> {
        let (user, password) = self.users.first()?;
        let strongest = [
            SaslMechanism::Scram(Mechanism::Sha512),
            SaslMechanism::Scram(Mechanism::Sha256),
            SaslMechanism::Plain,
        ]
        .into_iter()
        .find(|m| self.mechanisms.contains(m))?;
        Some(SaslLogin {
            mechanism: strongest,
            user: user.clone(),
            password: password.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_flags_parse_or_name_the_option() {
        assert_eq!(SaslConfig::from_flags(None, &[]), Ok(None));
        let users = vec!["admin:a:b".to_string()];
        let c = SaslConfig::from_flags(Some("plain, SCRAM-SHA-256"), &users)
            .expect("valid")
            .expect("on");
        assert_eq!(c.users, vec![("admin".to_string(), "a:b".to_string())]);
        let login = c.replica_login().expect("a login");
        assert_eq!(login.mechanism, SaslMechanism::Scram(Mechanism::Sha256));
        assert!(!format!("{c:?}").contains("a:b"));
        assert_eq!(
            SaslConfig::from_flags(None, &users).map_err(|e| e.option),
            Err("--sasl-user")
        );
        assert_eq!(
            SaslConfig::from_flags(Some("GSSAPI"), &[]).map_err(|e| e.option),
            Err("--sasl-mechanisms")
        );
        assert_eq!(
            SaslConfig::from_flags(Some("PLAIN"), &["nopass".into()]).map_err(|e| e.option),
            Err("--sasl-user")
        );
    }
}
