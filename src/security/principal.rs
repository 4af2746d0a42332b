//! The principal of a client that presented a certificate (mutual TLS), as Kafka names
//! it by default: `User:` and the certificate subject's distinguished name in RFC 2253
//! form, most specific part first (`User:CN=alice,OU=ops,O=example`).

use x509_parser::prelude::{FromDer, X509Certificate};

/// Short names of the attributes RFC 2253 names (others are written as dotted OIDs).
const SHORT_NAMES: [(&str, &str); 7] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.25", "DC"),
];

/// `User:<subject DN>` of the DER certificate `der`; `None` when it cannot be parsed or
/// its subject holds a value that is not a string.
pub fn of_certificate(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut parts = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut attrs = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type().to_id_string();
            let name = SHORT_NAMES
                .iter()
                .find(|(o, _)| *o == oid)
                .map_or(oid.clone(), |(_, n)| n.to_string());
            attrs.push(format!("{name}={}", escape(attr.as_str().ok()?)));
        }
        parts.push(attrs.join("+"));
    }
    parts.reverse();
    Some(format!("User:{}", parts.join(",")))
}

/// A DN attribute value with RFC 2253's special characters escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let leading = i == 0 && (c == ' ' || c == '#');
        let trailing = i + 1 == value.chars().count() && c == ' ';
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') || leading || trailing {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_rfc_2253_says() {
        assert_eq!(escape("alice"), "alice");
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(of_certificate(b"not a certificate"), None);
    }
}
