//! How a client reaches a broker: plain TCP, or TLS (Kafka's `SSL` security protocol)
//! trusting a given CA and checking that the broker's certificate names the host dialled.
//! A [`Dialer`] is cheap to clone and `Send`, so one set-up serves every core.

use std::{
    io,
    path::Path,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::{client::TlsStream, TlsConnector};
use glommio::net::TcpStream;
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, ServerName},
    ClientConfig, RootCertStore,
};

use crate::{sasl::SaslLogin, ClientError, Result};

/// Plain TCP or TLS, and the SASL login to run on every new connection, if any.
#[derive(Clone, Default)]
pub struct Dialer {
    tls: Option<TlsConnector>,
    sasl: Option<SaslLogin>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tls = if self.tls.is_some() {
            "tls"
        } else {
            "plaintext"
        };
        match &self.sasl {
            Some(login) => write!(f, "Dialer({tls}, {login:?})"),
            None => write!(f, "Dialer({tls})"),
        }
    }
}

impl Dialer {
    /// Plain TCP.
    pub fn plaintext() -> Dialer {
        Dialer::default()
    }

    /// TLS, trusting the CA certificates in the PEM file `ca`. Blocking (reads the file).
    pub fn tls(ca: &Path) -> Result<Dialer> {
        let bad = |reason: String| ClientError::Tls {
            what: ca.display().to_string(),
            reason,
        };
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
            roots
                .add(cert.map_err(|e| bad(e.to_string()))?)
                .map_err(|e| bad(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(bad("no certificate in the file".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Dialer {
            tls: Some(TlsConnector::from(Arc::new(config))),
            sasl: None,
        })
    }

    /// The same dialer, logging in as `login` on every connection it opens
    /// ([`crate::connection::connect_with`] runs the login).
    pub fn with_sasl(self, login: Option<SaslLogin>) -> Dialer {
        Dialer {
            sasl: login,
            ..self
        }
    }

    /// The SASL login connections run first, if any.
    pub fn sasl(&self) -> Option<&SaslLogin> {
        self.sasl.as_ref()
    }

    /// True when this dialer speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Opens a stream to `addr` (`host:port`), through a TLS handshake when this dialer
    /// speaks TLS (the certificate must name `host`).
    pub async fn open(&self, addr: &str) -> Result<Stream> {
        let io = ClientError::io(addr);
        let stream = TcpStream::connect(addr).await.map_err(|e| io(e.into()))?;
        stream.set_nodelay(true).map_err(|e| io(e.into()))?;
        let Some(connector) = &self.tls else {
            return Ok(Stream::Plain(stream));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let name = ServerName::try_from(host.to_string()).map_err(|e| ClientError::Tls {
            what: addr.to_string(),
            reason: e.to_string(),
        })?;
        let secured = connector
            .connect(name, stream)
            .await
            .map_err(|e| ClientError::Tls {
                what: addr.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Stream::Tls(Box::new(secured)))
    }
}

/// A connection's byte stream: plain TCP or TLS over it.
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}
