//! The security settings: which SASL mechanisms every listener requires, the users
//! created (or updated) at start so a new broker is not locked out, and whether ACLs are
//! enforced and who bypasses them.

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

/// Why a security setting was refused: the option and the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct SettingError {
    /// The option, as spelled on the command line.
    pub option: &'static str,
    /// What is wrong.
    pub reason: String,
}

fn refuse(option: &'static str, reason: impl Into<String>) -> SettingError {
    SettingError {
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
    ) -> Result<Option<SaslConfig>, SettingError> {
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

/// `--authorizer acl`: ACLs are enforced on every API; the super users bypass them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `--super-users`: principals (`User:NAME`) allowed everything.
    pub super_users: Vec<String>,
}

impl AuthorizerConfig {
    /// The settings from `--authorizer acl|none` and `--super-users
    /// "User:a;User:b"` (Kafka's separator); `None` when nothing is enforced.
    pub fn from_flags(
        authorizer: Option<&str>,
        super_users: Option<&str>,
    ) -> Result<Option<AuthorizerConfig>, SettingError> {
        let users: Vec<String> = super_users
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = users
            .iter()
            .find(|u| !u.starts_with("User:") || u.len() == 5)
        {
            return Err(refuse(
                "--super-users",
                format!("{bad:?} is not a principal like User:admin"),
            ));
        }
        match authorizer.unwrap_or("none") {
            "none" if users.is_empty() => Ok(None),
            "none" => Err(refuse("--super-users", "needs --authorizer acl")),
            "acl" => Ok(Some(AuthorizerConfig { super_users: users })),
            other => Err(refuse(
                "--authorizer",
                format!("{other:?} is not acl or none"),
            )),
        }
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

    #[test]
    fn authorizer_flags_parse_or_name_the_option() {
        assert_eq!(AuthorizerConfig::from_flags(None, None), Ok(None));
        let on = AuthorizerConfig::from_flags(Some("acl"), Some("User:admin; User:ops"))
            .expect("valid")
            .expect("on");
        assert_eq!(on.super_users, ["User:admin", "User:ops"]);
        for (a, s, option) in [
            (Some("ranger"), None, "--authorizer"),
            (None, Some("User:admin"), "--super-users"),
            (Some("acl"), Some("admin"), "--super-users"),
        ] {
            assert_eq!(
                AuthorizerConfig::from_flags(a, s).map_err(|e| e.option),
                Err(option)
            );
        }
    }
}
