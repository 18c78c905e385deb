//! Herald's own HTTP/1.1 answers, for the requests it serves without hyper
//! (an event stream's head or refusal, long-polling): a complete response
//! written as hyper would have written it, header values read as hyper reads
//! them, and a gentle close.
//!
//! Why not hyper for these: see [`crate::transport::sse::conn`] and
//! docs/decisions/0010-idle-memory.md — an idle SSE or long-polling client
//! on hyper holds its buffers and dispatcher for as long as it stays.

use crate::respond::Body;
use http::Response;
use http_body_util::BodyExt;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A header value as text, on the same terms as `http::HeaderValue::to_str`
/// (visible ASCII and tabs): a value hyper would not read as text is not
/// read here either.
pub fn header_text(value: &[u8]) -> Option<&str> {
    if value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// The `date:` header line of a response written now.
pub fn date_line() -> String {
    format!(
        "date: {}\r\n",
        httpdate::fmt_http_date(std::time::SystemTime::now())
    )
}

/// Writes a complete answer (status, headers, `content-length` and body) as
/// hyper would have written it on an HTTP/1.1 connection, kept alive unless
/// `close` (then it says `connection: close`).
pub async fn write_response<S: AsyncWrite + Unpin>(
    stream: &mut S,
    response: Response<Body>,
    close: bool,
) -> io::Result<()> {
    let (parts, body) = response.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(never) => match never {},
    };
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(
        parts
            .status
            .canonical_reason()
            .unwrap_or("Unknown")
            .as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(date_line().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    stream.write_all(&out).await
}

/// A plain answer that refuses a request on the lean path (before any
/// driver runs): its status line, extra header lines and body.
#[derive(Debug)]
pub struct Refusal {
    /// The status, e.g. `"403 Forbidden"`.
    pub status: &'static str,
    /// Extra header lines, each ending in CRLF.
    pub extra: &'static str,
    /// The body (plain text, or the JSON of [`Refusal::json`]).
    pub body: String,
}

impl Refusal {
    /// A plain-text refusal.
    pub fn text(status: &'static str, body: &str) -> Refusal {
        Refusal {
            status,
            extra: "",
            body: body.to_string(),
        }
    }

    /// A refusal whose body is a protocol error:
    /// `{"error":{"code":C,"message":"..."}}` (`message` given as JSON-safe text).
    pub fn json(status: &'static str, code: u16, message: &str) -> Refusal {
        Refusal {
            status,
            extra: "",
            body: format!("{{\"error\":{{\"code\":{code},\"message\":\"{message}\"}}}}\n"),
        }
    }

    /// Writes the refusal as a complete answer, then closes gently: half-close
    /// and drain the peer's input (bounded), so the peer reads the answer
    /// instead of a reset.
    pub async fn send<S: AsyncRead + AsyncWrite + Unpin>(self, mut stream: S) {
        let text = format!(
            "HTTP/1.1 {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n{}\r\n{}",
            self.status,
            self.body.len(),
            self.extra,
            self.body
        );
        let _ = stream.write_all(text.as_bytes()).await;
        linger(stream).await;
    }
}

/// Half-closes `stream` and reads whatever the peer still sends (bounded), so
/// that closing does not reset the connection before the peer has read our answer.
pub async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_text_is_visible_ascii() {
        assert_eq!(header_text(b"Bearer a.b\tc"), Some("Bearer a.b\tc"));
        assert_eq!(header_text(b"caf\xc3\xa9"), None);
        assert_eq!(header_text(b"a\x7fb"), None);
        assert_eq!(header_text(b"a\x01b"), None);
    }
}
