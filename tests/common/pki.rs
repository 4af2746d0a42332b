//! Certificates made by the tests themselves (rcgen): no private key is checked in.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A CA and a certificate it signed, as PEM files in a directory.
pub struct Pki {
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The server's certificate, for 127.0.0.1 to 127.0.0.8 and localhost.
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// A client certificate (CN alice: principal `User:CN=alice` under mutual TLS).
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl Pki {
    /// `weir serve`'s flags for a TLS listener at `listen` with this server
    /// certificate.
    pub fn listener_flags(&self, listen: &str) -> Vec<String> {
        vec![
            "--tls-listen".into(),
            listen.into(),
            "--tls-cert".into(),
            self.server_cert.display().to_string(),
            "--tls-key".into(),
            self.server_key.display().to_string(),
        ]
    }
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("CA");
    (cert.pem(), Issuer::new(params, key))
}

fn leaf(issuer: &Issuer<'static, KeyPair>, names: &[&str], cn: &str) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, issuer).expect("leaf");
    (cert.pem(), key.serialize_pem())
}

/// A CA, a server certificate for the test hosts' addresses, and a client
/// certificate, in `dir` (file names start with `tag`).
pub fn pki(dir: &Path, tag: &str) -> Pki {
    let (ca_pem, issuer) = ca(&format!("weir test CA {tag}"));
    let names: Vec<String> = (1..=8)
        .map(|n| format!("127.0.0.{n}"))
        .chain(["localhost".to_string()])
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (server_pem, server_key) = leaf(&issuer, &names, "127.0.0.1");
    let (client_pem, client_key) = leaf(&issuer, &[], "alice");
    let write = |name: &str, text: &str| {
        let path = dir.join(format!("{tag}-{name}"));
        std::fs::write(&path, text).expect("write PEM");
        path
    };
    Pki {
        ca: write("ca.pem", &ca_pem),
        server_cert: write("server.pem", &server_pem),
        server_key: write("server.key", &server_key),
        client_cert: write("client.pem", &client_pem),
        client_key: write("client.key", &client_key),
    }
}
