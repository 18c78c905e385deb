//! Pusher webhooks: the app's server hears, by HTTP POST to its
//! `webhook_url`, when its channels become occupied or vacated, when
//! presence members are added or removed, when a client event is sent and
//! when a cache channel misses.
//!
//! Each POST is `{"time_ms":T,"events":[{"name":..,"channel":..,..}]}` with
//! `X-Pusher-Key` (the app key) and `X-Pusher-Signature` (HMAC-SHA256 hex of
//! the body with the app secret), as the server SDKs' `webhook()` checks.
//! Events are queued on a bounded queue ([`QUEUE`]; beyond it they are
//! dropped and counted, never waited for: the hub calls in under its locks)
//! and sent by one task per app in batches of up to [`BATCH`], in order. A
//! POST that fails or answers non-2xx is retried after 1, 2 and 4 s, then
//! its batch is dropped with a warning. Occupancy and membership are what
//! the hub's observer reports: this node's alone, or, in a cluster, the
//! cluster-wide transitions, each reported by one node
//! (docs/decisions/0012-pusher-cluster.md). `channel_vacated` waits out
//! `vacated_delay_ms` first ([`super::Apps::observe`] on one node, the
//! broker in a cluster), so a quick reconnect makes neither it nor
//! `channel_occupied`.
//!
//! An app may choose which of the events it gets (`webhook_events`, default
//! all); the others are not queued.
//!
//! The URL is `http://` or `https://` (rustls, trusting the app's
//! `webhook_ca_file`, by default the system's bundle); the request is a
//! plain HTTP/1.1 POST with `Connection: close`.

use herald_pusher::sign;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Every webhook event's name; an app may choose some (`webhook_events`).
pub const EVENTS: [&str; 6] = [
    "channel_occupied",
    "channel_vacated",
    "member_added",
    "member_removed",
    "client_event",
    "cache_miss",
];

/// Events waiting to be sent, per app.
pub const QUEUE: usize = 10_000;
/// Most events in one POST.
pub const BATCH: usize = 100;
/// Bound on connecting, writing and reading the status line of one POST.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to POST.
#[derive(Debug, Clone)]
struct Target {
    host: String,
    port: u16,
    path: String,
    /// For `https://`: the client configuration (trusted roots).
    tls: Option<Arc<rustls::ClientConfig>>,
    key: String,
    secret: Vec<u8>,
}

/// Why a webhook URL was refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("webhook_url {0:?}: expected http://HOST[:PORT][/PATH] or https://...")]
pub struct UrlError(pub String);

/// A webhook URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    /// `https://`.
    pub tls: bool,
    /// Host name or address.
    pub host: String,
    /// Port (80 or 443 unless given).
    pub port: u16,
    /// Path (`/` unless given).
    pub path: String,
}

/// Splits `http[s]://host[:port][/path]`.
pub fn parse_url(url: &str) -> Result<WebhookUrl, UrlError> {
    let bad = || UrlError(url.to_string());
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(bad()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().map_err(|_| bad())?),
        None => (authority, if tls { 443 } else { 80 }),
    };
    if host.is_empty() || path.contains([' ', '\r', '\n']) {
        return Err(bad());
    }
    Ok(WebhookUrl {
        tls,
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

/// One app's webhook queue.
#[derive(Debug)]
pub struct Webhooks {
    tx: mpsc::Sender<Value>,
    /// The events the app wants: bit `i` for `EVENTS[i]`.
    wanted: u8,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
}

impl Webhooks {
    /// Starts the sender task on the current tokio runtime; `events`: the
    /// names of the events to send (`None`: all; unknown names are ignored,
    /// the configuration refuses them); `tls`: how to reach an `https://`
    /// URL (one is refused without).
    pub fn start(
        url: &str,
        key: &str,
        secret: &[u8],
        events: Option<&[String]>,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Webhooks, UrlError> {
        let u = parse_url(url)?;
        if u.tls && tls.is_none() {
            return Err(UrlError(url.to_string()));
        }
        let target = Target {
            host: u.host,
            port: u.port,
            path: u.path,
            tls: if u.tls { tls } else { None },
            key: key.to_string(),
            secret: secret.to_vec(),
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(rx, target));
        let wanted = match events {
            None => u8::MAX,
            Some(names) => EVENTS
                .iter()
                .enumerate()
                .filter(|(_, e)| names.iter().any(|n| n == *e))
                .fold(0, |m, (i, _)| m | 1 << i),
        };
        Ok(Webhooks {
            tx,
            wanted,
            dropped: AtomicU64::new(0),
        })
    }

    /// Whether the app wants event `name`.
    pub fn wants(&self, name: &str) -> bool {
        EVENTS
            .iter()
            .position(|e| *e == name)
            .is_some_and(|i| self.wanted & (1 << i) != 0)
    }

    /// Queues one event (`{"name":..,"channel":..}`) if the app wants it;
    /// never waits.
    pub fn send(&self, event: Value) {
        if !event["name"].as_str().is_some_and(|n| self.wants(n)) {
            return;
        }
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn run(mut rx: mpsc::Receiver<Value>, target: Target) {
    while let Some(first) = rx.recv().await {
        let mut events = vec![first];
        while events.len() < BATCH {
            match rx.try_recv() {
                Ok(e) => events.push(e),
                Err(_) => break,
            }
        }
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let body = serde_json::json!({ "time_ms": time_ms, "events": events }).to_string();
        let mut delay = Duration::from_secs(1);
        for attempt in 0..4 {
            match tokio::time::timeout(TIMEOUT, post(&target, &body)).await {
                Ok(Ok(status)) if (200..300).contains(&status) => break,
                outcome => {
                    let why = match outcome {
                        Ok(Ok(status)) => format!("status {status}"),
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => "timed out".into(),
                    };
                    if attempt == 3 {
                        tracing::warn!(host = %target.host, %why, events = events.len(), "webhook dropped");
                        break;
                    }
                    tracing::debug!(host = %target.host, %why, "webhook failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
            }
        }
    }
}

/// One POST; returns the response status.
async fn post(t: &Target, body: &str) -> std::io::Result<u16> {
    let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port)).await?;
    let Some(tls) = &t.tls else {
        return exchange(tcp, t, body).await;
    };
    let name = rustls_pki_types::ServerName::try_from(t.host.clone())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await?;
    exchange(stream, t, body).await
}

/// Writes the request on `stream` and reads the response's status.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    t: &Target,
    body: &str,
) -> std::io::Result<u16> {
    let signature = sign::hmac_hex(&t.secret, body.as_bytes());
    let head = format!(
        "POST {} HTTP/1.1\r\nhost: {}:{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-pusher-key: {}\r\nx-pusher-signature: {}\r\nconnection: close\r\n\r\n",
        t.path,
        t.host,
        t.port,
        body.len(),
        t.key,
        signature
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    // The status line is all we need: "HTTP/1.1 200 ...".
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 256];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < 4096 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    line.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let url = |tls: bool, host: &str, port: u16, path: &str| WebhookUrl {
            tls,
            host: host.into(),
            port,
            path: path.into(),
        };
        assert_eq!(
            parse_url("http://127.0.0.1:9000/hooks/pusher"),
            Ok(url(false, "127.0.0.1", 9000, "/hooks/pusher"))
        );
        assert_eq!(
            parse_url("http://example.com"),
            Ok(url(false, "example.com", 80, "/"))
        );
        assert_eq!(
            parse_url("https://example.com/h"),
            Ok(url(true, "example.com", 443, "/h"))
        );
        for bad in [
            "ftp://x",
            "http://",
            "https://",
            "http://x:port/",
            "http://x/a b",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
