//! The metrics endpoint: a small HTTP/1.1 server on its own thread, off every shard,
//! answering `GET /metrics` (Prometheus text format 0.0.4, or OpenMetrics when the
//! `Accept` header asks for it), `GET /health` (the process is up) and `GET /ready`
//! (every shard recovered its storage and is accepting connections).
//!
//! It serves nothing else: other paths get 404, other methods 405, a malformed request
//! 400, a request head over [`REQUEST_HEAD_BYTES_MAX`] 431. Each connection gets one
//! answer and is closed; at most [`CONNECTIONS_MAX`] are served at once (more are
//! closed unanswered) and each has [`IO_TIMEOUT`] to send its request and take its
//! answer, so a slow or hostile client cannot hold the endpoint.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use super::BrokerMetrics;

/// Largest request head (request line and headers) read.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 << 10;
/// Connections served at once.
pub const CONNECTIONS_MAX: usize = 8;
/// How long a client has to send its request, and to take each part of the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `addr` and serves the endpoint on a thread of its own for the life of the
/// process. Fails only if the address cannot be bound.
pub fn start(addr: SocketAddr, metrics: Arc<BrokerMetrics>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let busy = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("weir-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if busy.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
                    busy.fetch_sub(1, Ordering::AcqRel);
                    tracing::debug!("metrics endpoint busy: closing a connection unanswered");
                    continue;
                }
                let (metrics, busy) = (Arc::clone(&metrics), Arc::clone(&busy));
                let spawned = std::thread::Builder::new()
                    .name("weir-metrics-conn".into())
                    .spawn(move || {
                        if let Err(e) = answer(stream, &metrics) {
                            tracing::debug!(error = %e, "metrics connection failed");
                        }
                        busy.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    tracing::warn!("cannot start a metrics connection thread");
                }
            }
        })?;
    tracing::info!(%bound, "serving /metrics, /health and /ready");
    Ok(bound)
}

/// What a request asked for, once its head is read.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// A GET (or HEAD) of `path`.
    Get {
        /// The path, without its query.
        path: String,
        /// Whether the `Accept` header asks for OpenMetrics.
        openmetrics: bool,
        /// HEAD: headers only.
        head_only: bool,
    },
    /// Another method.
    BadMethod,
    /// Not an HTTP/1 request head.
    Malformed,
    /// A head longer than [`REQUEST_HEAD_BYTES_MAX`].
    TooLarge,
}

/// Reads a request head (up to the blank line) and says what it asks for.
fn read_request(stream: &mut TcpStream) -> std::io::Result<Asked> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(parse_head(&head));
        }
        if head.len() > REQUEST_HEAD_BYTES_MAX {
            return Ok(Asked::TooLarge);
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(Asked::Malformed);
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// Reads a request head (the bytes before the blank line). Never panics, whatever the
/// bytes.
pub fn parse_head(head: &[u8]) -> Asked {
    let Ok(head) = std::str::from_utf8(head) else {
        return Asked::Malformed;
    };
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Malformed;
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Asked::Malformed;
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Asked::BadMethod,
    };
    let openmetrics = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept")
                && value.contains("application/openmetrics-text")
        })
    });
    let path = target.split('?').next().unwrap_or("").to_string();
    Asked::Get {
        path,
        openmetrics,
        head_only,
    }
}

fn answer(mut stream: TcpStream, metrics: &BrokerMetrics) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let (status, content_type, body, head_only) = match read_request(&mut stream)? {
        Asked::Get {
            path,
            openmetrics,
            head_only,
        } => {
            let (status, content_type, body) = match path.as_str() {
                "/metrics" => {
                    let (content_type, body) = exposition(metrics, openmetrics);
                    ("200 OK", content_type, body)
                }
                "/health" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/ready" if metrics.ready() => ("200 OK", "text/plain", "ready\n".to_string()),
                "/ready" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready: shards are still recovering\n".to_string(),
                ),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            (status, content_type, body, head_only)
        }
        Asked::BadMethod => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
            false,
        ),
        Asked::TooLarge => (
            "431 Request Header Fields Too Large",
            "text/plain",
            "request head too large\n".to_string(),
            false,
        ),
        Asked::Malformed => (
            "400 Bad Request",
            "text/plain",
            "bad request\n".to_string(),
            false,
        ),
    };
    let allow = if status.starts_with("405") {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes())?;
    if !head_only {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

/// The metrics as OpenMetrics text, or as Prometheus text format 0.0.4: the same
/// samples without `# UNIT` and `# EOF`, and each counter's `# HELP`/`# TYPE` under the
/// name its samples carry (`…_total`).
pub fn exposition(metrics: &BrokerMetrics, openmetrics: bool) -> (&'static str, String) {
    let mut text = String::new();
    if openmetrics {
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, metrics.registry()) {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        return (OPENMETRICS, text);
    }
    if let Err(e) =
        prometheus_client::encoding::text::encode_registry(&mut text, metrics.registry())
    {
        tracing::error!(error = %e, "cannot encode metrics");
    }
    (PROMETHEUS_TEXT, to_prometheus_text(&text))
}

fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_are_parsed_strictly() {
        assert_eq!(
            parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nAccept: application/openmetrics-text"),
            Asked::Get {
                path: "/metrics".into(),
                openmetrics: true,
                head_only: false
            }
        );
        assert_eq!(parse_head(b"POST /metrics HTTP/1.1"), Asked::BadMethod);
        assert_eq!(parse_head(b"GET /metrics"), Asked::Malformed);
        assert_eq!(parse_head(b"GET metrics HTTP/1.1"), Asked::Malformed);
        assert_eq!(parse_head(&[0xff, 0xfe]), Asked::Malformed);
    }

    #[test]
    fn prometheus_text_names_counters_by_their_samples() {
        let om = "# HELP weir_x Things.\n# TYPE weir_x counter\nweir_x_total 3\n# HELP weir_y_bytes Y.\n# TYPE weir_y_bytes gauge\n# UNIT weir_y_bytes bytes\nweir_y_bytes 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP weir_x_total Things.\n# TYPE weir_x_total counter\nweir_x_total 3\n# HELP weir_y_bytes Y.\n# TYPE weir_y_bytes gauge\nweir_y_bytes 1\n"
        );
    }
}
