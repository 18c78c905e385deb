//! The client side of HTTP/1.1 for the bench's SSE, long-polling and
//! publish-API connections: request heads written into a buffer, responses
//! decoded in place, no I/O (like `herald-ws`'s codec, so the engine drives
//! it the same way).
//!
//! Why our own and not hyper's client: the bench is one readiness loop with
//! no async runtime (see `engine.rs`), and a subscriber may receive hundreds
//! of thousands of events per second; here a response body (or a chunk of an
//! event stream) is handed out as a slice of the engine's read buffer, never
//! copied. Only what the server under test sends is needed: `Content-Length`
//! bodies (poll and API answers), `chunked` bodies (event streams), and
//! bodies that run to the end of the connection.

/// What one step of decoding found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A response head.
    Head {
        /// The status code.
        status: u16,
        /// `text/event-stream` with a body of unknown length: an SSE stream
        /// whose body arrives as [`Event::Data`] until [`Event::End`].
        event_stream: bool,
    },
    /// A whole `Content-Length` body: the response is complete.
    Complete(&'a [u8]),
    /// A piece of a `chunked` (or until-close) body.
    Data(&'a [u8]),
    /// The end of a `chunked` body: the response is complete.
    End,
}

/// Why a response could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HttpError {
    /// The status line or headers are malformed.
    #[error("malformed response head: {0}")]
    Head(String),
    /// A `Content-Length` the bench will not buffer.
    #[error("response body of {0} bytes is larger than the limit")]
    TooBig(usize),
    /// Chunked framing is broken.
    #[error("malformed chunked body: {0}")]
    Chunk(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(usize),
    ChunkSize,
    ChunkData(usize),
    ChunkEnd,
    Trailer,
    UntilClose,
}

/// Decodes the responses of one connection, one after the other.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    state: State,
    max_body: usize,
}

/// Longest response head or chunk-size line accepted.
const MAX_LINE: usize = 16 * 1024;

impl ResponseDecoder {
    /// A decoder that refuses `Content-Length` bodies above `max_body`.
    pub fn new(max_body: usize) -> ResponseDecoder {
        ResponseDecoder {
            state: State::Head,
            max_body,
        }
    }

    /// Decodes from the start of `buf`: `Ok(None)` when more bytes are
    /// needed, else the bytes consumed and what they were (possibly an empty
    /// `Data` for framing bytes alone). A `Content-Length`
    /// body is returned only once it is complete (the caller keeps the
    /// unconsumed bytes and calls again with more).
    pub fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(usize, Event<'a>)>, HttpError> {
        // Bytes consumed by framing alone (chunk sizes, CRLFs) must be
        // reported even when no data follows yet.
        let more = |pos: usize| (pos > 0).then_some((pos, Event::Data(&[])));
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Head => {
                    if rest.is_empty() {
                        return Ok(more(pos));
                    }
                    let mut headers = [httparse::EMPTY_HEADER; 32];
                    let mut resp = httparse::Response::new(&mut headers);
                    let head_len = match resp.parse(rest) {
                        Ok(httparse::Status::Complete(n)) => n,
                        Ok(httparse::Status::Partial) if rest.len() <= MAX_LINE => {
                            return Ok(more(pos))
                        }
                        Ok(httparse::Status::Partial) => {
                            return Err(HttpError::Head("head too long".into()))
                        }
                        Err(e) => return Err(HttpError::Head(e.to_string())),
                    };
                    let status = resp.code.unwrap_or(0);
                    let mut length = None;
                    let mut chunked = false;
                    let mut event_stream = false;
                    for h in resp.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let v = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .ok_or_else(|| HttpError::Head("bad Content-Length".into()))?;
                            length = Some(v);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = h
                                .value
                                .split(|&b| b == b',')
                                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
                        } else if h.name.eq_ignore_ascii_case("content-type") {
                            event_stream = h.value.starts_with(b"text/event-stream");
                        }
                    }
                    self.state = if chunked {
                        State::ChunkSize
                    } else if let Some(n) = length {
                        if n > self.max_body {
                            return Err(HttpError::TooBig(n));
                        }
                        State::Length(n)
                    } else if status == 204 || status == 304 || (100..200).contains(&status) {
                        State::Length(0)
                    } else {
                        State::UntilClose
                    };
                    let event_stream = event_stream && !matches!(self.state, State::Length(_));
                    return Ok(Some((
                        pos + head_len,
                        Event::Head {
                            status,
                            event_stream,
                        },
                    )));
                }
                State::Length(n) => {
                    if rest.len() < n {
                        return Ok(more(pos));
                    }
                    self.state = State::Head;
                    return Ok(Some((pos + n, Event::Complete(&rest[..n]))));
                }
                State::UntilClose => {
                    if rest.is_empty() {
                        return Ok(more(pos));
                    }
                    return Ok(Some((buf.len(), Event::Data(rest))));
                }
                State::ChunkSize => {
                    let Some(eol) = find_crlf(rest) else {
                        return if rest.len() > MAX_LINE {
                            Err(HttpError::Chunk("chunk-size line too long"))
                        } else {
                            Ok(more(pos))
                        };
                    };
                    let line = &rest[..eol];
                    let hex = line
                        .split(|&b| b == b';')
                        .next()
                        .unwrap_or_default()
                        .trim_ascii();
                    let size = parse_hex(hex).ok_or(HttpError::Chunk("bad chunk size"))?;
                    pos += eol + 2;
                    self.state = if size == 0 {
                        State::Trailer
                    } else {
                        State::ChunkData(size)
                    };
                }
                State::ChunkData(n) => {
                    if rest.is_empty() {
                        return Ok(more(pos));
                    }
                    let k = n.min(rest.len());
                    self.state = if k == n {
                        State::ChunkEnd
                    } else {
                        State::ChunkData(n - k)
                    };
                    return Ok(Some((pos + k, Event::Data(&rest[..k]))));
                }
                State::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok(more(pos));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(HttpError::Chunk("chunk data not followed by CRLF"));
                    }
                    pos += 2;
                    self.state = State::ChunkSize;
                }
                State::Trailer => {
                    let Some(eol) = find_crlf(rest) else {
                        return if rest.len() > MAX_LINE {
                            Err(HttpError::Chunk("trailer too long"))
                        } else {
                            Ok(more(pos))
                        };
                    };
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = State::Head;
                        return Ok(Some((pos, Event::End)));
                    }
                }
            }
        }
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

fn parse_hex(s: &[u8]) -> Option<usize> {
    if s.is_empty() || s.len() > 15 {
        return None;
    }
    let mut v = 0usize;
    for &c in s {
        let d = (c as char).to_digit(16)?;
        v = v * 16 + d as usize;
    }
    Some(v)
}

/// Appends a request head (and `body`, with its `Content-Length`, when the
/// method carries one). `headers` are extra `(name, value)` pairs.
pub fn write_request(
    out: &mut Vec<u8>,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(body) = body {
        out.extend_from_slice(b"Content-Length: ");
        crate::herald_wire::write_u64(out, body.len() as u64);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(b"\r\n");
    }
}

/// Splits `carry ++ data` into Server-Sent Events (each ended by a blank
/// line) and calls `on` with each event's lines. Whatever follows the last
/// complete event is kept in `carry`; when `carry` starts empty, complete
/// events are handed out of `data` without copying.
pub fn split_events<E>(
    carry: &mut Vec<u8>,
    data: &[u8],
    max: usize,
    mut on: impl FnMut(&[u8]) -> Result<(), E>,
    too_big: impl FnOnce() -> E,
) -> Result<(), E> {
    if carry.is_empty() {
        let used = each_event(data, &mut on)?;
        carry.extend_from_slice(&data[used..]);
    } else {
        carry.extend_from_slice(data);
        let used = each_event(carry, &mut on)?;
        carry.drain(..used);
    }
    if carry.len() > max {
        return Err(too_big());
    }
    Ok(())
}

/// Calls `on` with each complete event of `buf`; returns the bytes used.
fn each_event<E>(buf: &[u8], on: &mut impl FnMut(&[u8]) -> Result<(), E>) -> Result<usize, E> {
    let mut start = 0;
    while let Some(i) = buf[start..].windows(2).position(|w| w == b"\n\n") {
        let event = &buf[start..start + i];
        let event = event.strip_suffix(b"\r").unwrap_or(event);
        on(event)?;
        start += i + 2;
    }
    Ok(start)
}

/// The fields of one SSE event the bench reads (all borrowed).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// `id:`.
    pub id: Option<&'a [u8]>,
    /// `event:`.
    pub event: Option<&'a [u8]>,
    /// The first `data:` line (the bench's payloads are one line).
    pub data: Option<&'a [u8]>,
    /// More than one `data:` line.
    pub multiline: bool,
}

/// Parses the lines of one event (comments and unknown fields ignored).
pub fn parse_event(block: &[u8]) -> SseEvent<'_> {
    let mut ev = SseEvent::default();
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.starts_with(b":") {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"id" => ev.id = Some(value),
            b"event" => ev.event = Some(value),
            b"data" => {
                if ev.data.is_some() {
                    ev.multiline = true;
                } else {
                    ev.data = Some(value);
                }
            }
            _ => {}
        }
    }
    ev
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn content_length_response() {
        let mut d = ResponseDecoder::new(100);
        let resp = b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}HTTP/1.1";
        let (n, ev) = d.decode(resp).unwrap().unwrap();
        assert_eq!(
            ev,
            Event::Head {
                status: 202,
                event_stream: false
            }
        );
        assert_eq!(
            d.decode(&resp[n..n + 1]).unwrap(),
            None,
            "waits for the whole body"
        );
        let (m, ev) = d.decode(&resp[n..]).unwrap().unwrap();
        assert_eq!(ev, Event::Complete(b"{}"));
        assert_eq!(d.decode(&resp[n + m..]).unwrap(), None);
        let mut d = ResponseDecoder::new(1);
        assert_eq!(
            d.decode(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"),
            Err(HttpError::TooBig(2))
        );
        assert!(ResponseDecoder::new(9).decode(b"HTTX 200\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_event_stream() {
        let mut d = ResponseDecoder::new(100);
        let resp = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n";
        let mut pos = 0;
        let mut seen = Vec::new();
        // Feed one byte more at a time: every split point must work.
        for end in 0..=resp.len() {
            while let Some((n, ev)) = d
                .decode(&resp[pos..end])
                .map_err(|e| format!("{e} at {pos}..{end}"))
                .unwrap()
            {
                pos += n;
                seen.push(format!("{ev:?}"));
            }
        }
        let data: String = seen
            .iter()
            .filter(|s| s.starts_with("Data"))
            .cloned()
            .collect();
        assert!(seen[0].contains("event_stream: true"), "{seen:?}");
        assert_eq!(seen.last().unwrap(), "End");
        assert_eq!(pos, resp.len());
        assert!(!data.is_empty());
        let mut d = ResponseDecoder::new(100);
        let bad = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        let (n, _) = d.decode(bad).unwrap().unwrap();
        assert!(d.decode(&bad[n..]).is_err());
    }

    #[test]
    fn events_split_across_reads() {
        let stream =
            b"retry: 2000\n: herald\n\nid: e:1\ndata: {\"a\":1}\n\nid: e:2\ndata: x\ndata: y\n\n";
        for cut in 0..stream.len() {
            let mut carry = Vec::new();
            let mut events = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                split_events(
                    &mut carry,
                    part,
                    1000,
                    |e| {
                        events.push(e.to_vec());
                        Ok::<(), ()>(())
                    },
                    || (),
                )
                .unwrap();
            }
            assert_eq!(events.len(), 3, "cut at {cut}");
            assert!(carry.is_empty());
            let e = parse_event(&events[1]);
            assert_eq!(e.id, Some(&b"e:1"[..]));
            assert_eq!(e.data, Some(&b"{\"a\":1}"[..]));
            assert_eq!(parse_event(&events[0]).data, None);
            assert!(parse_event(&events[2]).multiline);
        }
        let mut carry = Vec::new();
        assert!(split_events(&mut carry, b"data: long", 4, |_| Ok(()), || ()).is_err());
    }

    #[test]
    fn requests() {
        let mut out = Vec::new();
        write_request(&mut out, "POST", "h:1", "/poll", &[], Some(b"[1]"));
        assert_eq!(
            out,
            b"POST /poll HTTP/1.1\r\nHost: h:1\r\nContent-Length: 3\r\n\r\n[1]"
        );
        out.clear();
        write_request(
            &mut out,
            "GET",
            "h",
            "/sse?channel=a",
            &[("Last-Event-ID", "e:1")],
            None,
        );
        assert_eq!(
            out,
            b"GET /sse?channel=a HTTP/1.1\r\nHost: h\r\nLast-Event-ID: e:1\r\n\r\n"
        );
    }
}
