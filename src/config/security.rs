//! The security section: TLS listeners, SASL and the authorizer. Each is off unless
//! asked for; half of a setting (a certificate without a listener) is refused.

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};
use crate::{
    security::config::{AuthorizerConfig, SaslConfig},
    security::tls::TlsConfig,
};

/// Sets TLS, SASL and the authorizer.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) -> Result<(), ConfigError> {
    c.tls = tls_from(o)?;
    c.sasl = SaslConfig::from_flags(o.sasl_mechanisms.as_deref(), &o.sasl_user)
        .map_err(|e| invalid(e.option, e.reason))?;
    c.authorizer = AuthorizerConfig::from_flags(o.authorizer.as_deref(), o.super_users.as_deref())
        .map_err(|e| invalid(e.option, e.reason))?;
    Ok(())
}

/// The TLS settings: all of listen, cert and key, or none (a client CA needs them).
fn tls_from(o: &ServeOptions) -> Result<Option<TlsConfig>, ConfigError> {
    match (o.tls_listen, &o.tls_cert, &o.tls_key) {
        (None, None, None) if o.tls_client_ca.is_none() => Ok(None),
        (Some(listen), Some(cert), Some(key)) => Ok(Some(TlsConfig {
            listen,
            cert: cert.clone(),
            key: key.clone(),
            client_ca: o.tls_client_ca.clone(),
        })),
        _ => Err(invalid(
            "--tls-listen",
            "TLS needs --tls-listen, --tls-cert and --tls-key together",
        )),
    }
}

/// Checks the TLS ports fit beside the plaintext ones and a cluster host with SASL has
/// a user its followers log in as.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    if c.sasl.as_ref().is_some_and(|s| s.users.is_empty()) && c.cluster.is_some() {
        return Err(invalid(
            "--sasl-user",
            "a cluster host with SASL needs one: its followers log in as the first",
        ));
    }
    if let Some(tls) = &c.tls {
        let (plain, secure) = (u32::from(c.listen.port()), u32::from(tls.listen.port()));
        let shards = c.shards as u32;
        if secure + shards - 1 > u32::from(u16::MAX) {
            return Err(invalid("--tls-listen", "port + shards runs past 65535"));
        }
        if secure < plain + shards && plain < secure + shards {
            return Err(invalid(
                "--tls-listen",
                "its ports overlap the plaintext listener's",
            ));
        }
    }
    Ok(())
}
