//! The controller channel's mutual TLS: with `--controller-tls-cert`, `-key` and `-ca`,
//! every connection to a controller listener — a voter's Raft messages, a host's
//! registration and heartbeats, `weir cluster` — is TLS in which both ends present a
//! certificate the shared CA signed. A listener refuses a peer without one before
//! reading a byte of its requests; a caller refuses a controller whose certificate does
//! not name the address it dialled (an IP address in its subject alternative names for
//! `ID@IP:PORT` voters, as Kafka's `ssl.endpoint.identification.algorithm=https`).

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use rustls::{
    pki_types::{pem::PemObject, PrivateKeyDer, ServerName},
    server::WebPkiClientVerifier,
    ClientConfig, RootCertStore, ServerConfig,
};
use tokio::net::TcpStream;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};

use crate::security::tls::{certificates, pem_error, TlsError};

/// Where a host's controller-channel certificate, key and CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTlsFiles {
    /// This host's certificate chain (PEM, leaf first); a voter's must name its
    /// controller address.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA (PEM) that signs every host's certificate; a peer it did not sign is
    /// refused.
    pub ca: PathBuf,
}

/// Both ends of the controller channel's TLS, built once from [`PeerTlsFiles`]; cheap
/// to clone.
#[derive(Clone)]
pub struct PeerTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
}

fn rustls_error(e: rustls::Error) -> TlsError {
    TlsError::Rustls(e.to_string())
}

impl PeerTlsFiles {
    /// Reads the PEM files and builds the listener's and the callers' configurations
    /// (TLS 1.2 and 1.3, ring's cipher suites). Blocking: call at start.
    pub fn load(&self) -> Result<PeerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| pem_error(&self.key, e))?;
        let mut roots = RootCertStore::empty();
        for c in certificates(&self.ca)? {
            roots.add(c).map_err(|e| pem_error(&self.ca, e))?;
        }
        let roots = Arc::new(roots);
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
        let listener = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(rustls_error)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(rustls_error)?;
        let caller = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(rustls_error)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(rustls_error)?;
        Ok(PeerTls {
            acceptor: TlsAcceptor::from(Arc::new(listener)),
            connector: TlsConnector::from(Arc::new(caller)),
        })
    }
}

impl PeerTls {
    /// The listener's handshake: fails unless the peer presents a certificate the CA
    /// signed.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<server::TlsStream<TcpStream>> {
        self.acceptor.accept(stream).await
    }

    /// The caller's handshake with the controller at `addr` (`IP:PORT` or
    /// `HOST:PORT`): fails unless its certificate, signed by the CA, names that address.
    pub async fn connect(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> std::io::Result<client::TlsStream<TcpStream>> {
        self.connector.connect(server_name(addr)?, stream).await
    }
}

/// The name a controller's certificate must carry to be the one at `addr`.
fn server_name(addr: &str) -> std::io::Result<ServerName<'static>> {
    if let Ok(socket) = addr.parse::<SocketAddr>() {
        return Ok(ServerName::IpAddress(socket.ip().into()));
    }
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    ServerName::try_from(host.to_string()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr}: not a name a certificate can carry: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_controller_is_named_by_the_address_dialled() {
        assert!(matches!(
            server_name("10.0.0.1:9091"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:9091"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("ctl.example.com:9091"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(server_name("not a name:9091").is_err());
    }
}
