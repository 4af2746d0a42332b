//! TLS on the Kafka listeners (Kafka's `SSL` security protocol): the settings, and the
//! rustls server configuration built from PEM files once at start. With a client CA,
//! clients must present a certificate it signed (mutual TLS).

use std::{path::PathBuf, sync::Arc};

use futures_rustls::TlsAcceptor;
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};

/// Where TLS is served and with what.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsConfig {
    /// Shard 0's TLS listener; shard `n` listens on `port + n`.
    pub listen: std::net::SocketAddr,
    /// The certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by one of these (PEM).
    pub client_ca: Option<PathBuf>,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the certificate, key or CA.
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// A PEM file's error, naming the file.
pub(crate) fn pem_error(path: &std::path::Path, reason: impl ToString) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Every certificate in a PEM file; none is an error.
pub(crate) fn certificates(
    path: &std::path::Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no certificate in the file"));
    }
    Ok(certs)
}

impl TlsConfig {
    /// Reads the PEM files and builds the acceptor every shard's TLS listener uses
    /// (TLS 1.2 and 1.3, ring's cipher suites). Blocking: call at start.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| pem_error(&self.key, e))?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Rustls(e.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in certificates(ca)? {
                    roots.add(c).map_err(|e| pem_error(ca, e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| TlsError::Rustls(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Rustls(e.to_string()))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
