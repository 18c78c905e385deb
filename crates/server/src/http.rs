//! The first bytes of every connection: read the HTTP/1.1 request head, then
//! either upgrade to WebSocket or answer a plain request.
//!
//! The head is parsed with `httparse` into a stack array of headers; the buffer
//! that held it is freed before the connection's long-lived driver starts, so
//! nothing from the handshake stays resident. Plain HTTP answers here are
//! deliberately minimal (`/healthz`, errors); richer HTTP endpoints (SSE,
//! long-polling, the publish API) plug in at [`route`].

use crate::conn::Connection;
use crate::server::Shared;
use crate::ws::shootout::ShootoutConn;
use crate::ws::WsWire;
use herald_core::Session;
use herald_proto::Encoding;
use std::io;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Largest request head accepted.
const MAX_HEAD: usize = 8 * 1024;
/// Most headers in a request head.
const MAX_HEADERS: usize = 32;

/// Reads the request head; returns the buffer and the head's length.
async fn read_head(stream: &TcpStream) -> io::Result<(Vec<u8>, usize)> {
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        stream.readable().await?;
        match stream.try_read(&mut buf[len..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(head)) => {
                buf.truncate(len);
                return Ok((buf, head));
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
        if len == buf.len() {
            if buf.len() >= MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "request head too large",
                ));
            }
            buf.resize((buf.len() * 2).min(MAX_HEAD), 0);
        }
    }
}

/// Writes a complete plain answer, then closes gently: half-close and drain
/// the peer's input (bounded), so the peer reads the answer instead of a reset.
async fn answer(mut stream: TcpStream, status: &str, extra: &str, body: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    crate::server::linger(stream).await;
}

/// Serves one accepted connection until it ends.
pub async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _handshake = Handshaking::new(shared.clone());
    let head = tokio::time::timeout(shared.config.handshake_timeout, read_head(&stream)).await;
    let (buf, head_len) = match head {
        Ok(Ok(h)) => h,
        Ok(Err(e)) if e.kind() == io::ErrorKind::InvalidData => {
            answer(stream, "400 Bad Request", "", "malformed HTTP request\n").await;
            return;
        }
        Ok(Err(_)) => return,
        Err(_) => {
            answer(
                stream,
                "408 Request Timeout",
                "",
                "request head not received in time\n",
            )
            .await;
            return;
        }
    };
    route(stream, shared, &buf, head_len).await;
}

/// Where each request goes.
async fn route(mut stream: TcpStream, shared: Arc<Shared>, buf: &[u8], head_len: usize) {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(buf), Ok(httparse::Status::Complete(_))) {
        answer(stream, "400 Bad Request", "", "malformed HTTP request\n").await;
        return;
    }
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("/");
    let path = path.split('?').next().unwrap_or(path);
    let endpoint = match path {
        "/ws" => Endpoint::Herald,
        "/shootout" => Endpoint::Shootout,
        "/healthz" => {
            answer(stream, "200 OK", "", "ok\n").await;
            return;
        }
        _ => {
            answer(stream, "404 Not Found", "", "not found\n").await;
            return;
        }
    };
    let upgrade = match herald_ws::validate_upgrade(method, req.headers) {
        Ok(u) => u,
        Err(e) => {
            let status = match e.status() {
                405 => "405 Method Not Allowed",
                426 => "426 Upgrade Required",
                _ => "400 Bad Request",
            };
            let extra = if e.status() == 426 {
                "sec-websocket-version: 13\r\nupgrade: websocket\r\n"
            } else {
                ""
            };
            answer(stream, status, extra, &format!("{e}\n")).await;
            return;
        }
    };
    let protocol = match endpoint {
        Endpoint::Herald => herald_ws::select_protocol(
            upgrade.protocols,
            &[Encoding::Json.subprotocol(), Encoding::Binary.subprotocol()],
        ),
        Endpoint::Shootout => None,
    };
    let accept = herald_ws::accept_key(upgrade.key);
    let mut answer = Vec::with_capacity(160);
    herald_ws::write_accept(&mut answer, &accept, protocol);
    if stream.write_all(&answer).await.is_err() {
        return;
    }
    let leftover = &buf[head_len..];
    let node = shared.node.clone();
    let max = shared.config.max_message_size;
    match endpoint {
        Endpoint::Herald => {
            let encoding = if protocol == Some(Encoding::Binary.subprotocol()) {
                Encoding::Binary
            } else {
                Encoding::Json
            };
            let client = node.new_client(encoding);
            let session = Session::new(node.clone(), client);
            let conn = Connection::new(stream, session, WsWire::new(max), leftover);
            shared.tracker.spawn(conn);
        }
        Endpoint::Shootout => {
            let client = node.new_client(Encoding::Json);
            let handler = ShootoutConn::new(shared.shootout.clone(), client, node.clone());
            let conn = Connection::new(stream, handler, WsWire::new(max), leftover);
            shared.tracker.spawn(conn);
        }
    }
}

/// Counts a connection as "handshaking" while it exists, so that the
/// connection cap also covers connections not yet registered as clients.
struct Handshaking(Arc<Shared>);

impl Handshaking {
    fn new(shared: Arc<Shared>) -> Handshaking {
        shared
            .handshaking
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Handshaking(shared)
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0
            .handshaking
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[derive(Clone, Copy)]
enum Endpoint {
    Herald,
    Shootout,
}
