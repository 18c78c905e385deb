//! permessage-deflate (RFC 7692) on the real server: a client that offers
//! it gets it on `/ws` and sends and receives compressed messages (small ones
//! plain), one that does not gets plain frames, `/shootout` does not offer it
//! by default, and bad compressed input closes the connection with the code
//! RFC 7692 and RFC 6455 call for.
mod common;

use common::*;
use herald_server::ServeArgs;
use herald_ws::{encode_fragment_rsv1, Decoder, Message, OpCode, Role};
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const OFFER: &str = "permessage-deflate; client_max_window_bits";

/// A raw client that may offer permessage-deflate; remembers whether each
/// message it read was compressed.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    dec: Decoder,
    /// The answer's `Sec-WebSocket-Extensions`, if any.
    extensions: Option<String>,
}

impl Client {
    async fn connect(addr: SocketAddr, path: &str, offer: Option<&str>) -> Client {
        let mut stream = TcpStream::connect(addr).await.expect("tcp connect");
        let key = String::from_utf8(herald_ws::generate_key().to_vec()).expect("ascii");
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        );
        if path == "/ws" {
            req.push_str("Sec-WebSocket-Protocol: herald.json\r\n");
        }
        if let Some(offer) = offer {
            req.push_str(&format!("Sec-WebSocket-Extensions: {offer}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        let head_len = loop {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, stream.read(&mut chunk))
                .await
                .expect("handshake timeout")
                .expect("read");
            assert!(n > 0, "closed during handshake");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_len]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let extensions = head.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("sec-websocket-extensions")
                .then(|| value.trim().to_string())
        });
        buf.drain(..head_len);
        let mut dec = Decoder::new(Role::Client, 1 << 24);
        dec.set_deflate(
            extensions
                .is_some()
                .then_some(herald_ws::deflate::Agreement::DEFAULT),
        );
        Client {
            stream,
            buf,
            dec,
            extensions,
        }
    }

    async fn send(&mut self, rsv1: bool, opcode: OpCode, payload: &[u8]) {
        let mut out = bytes::BytesMut::new();
        encode_fragment_rsv1(
            &mut out,
            true,
            rsv1,
            opcode,
            payload,
            Some(herald_ws::random_mask()),
        );
        self.stream.write_all(&out).await.expect("write");
    }

    /// Sends `v` as text, compressed when `compress`.
    async fn send_json(&mut self, v: Value, compress: bool) {
        let text = v.to_string();
        if compress {
            let mut c = Vec::new();
            herald_ws::deflate::compress(text.as_bytes(), &mut c);
            self.send(true, OpCode::Text, &c).await;
        } else {
            self.send(false, OpCode::Text, text.as_bytes()).await;
        }
    }

    /// The next data message: (was its frame compressed, its JSON), or the
    /// close code if a close frame comes first.
    async fn next(&mut self) -> Result<(bool, Value), Option<u16>> {
        loop {
            if let Some(header) = herald_ws::parse_header_with(&self.buf, true).expect("frame") {
                let rsv1 = header.rsv1;
                if let Some((n, msg)) = self.dec.decode(&mut self.buf).expect("valid frame") {
                    let out = match msg {
                        Some(Message::Text(t)) => {
                            Some(Ok((rsv1, serde_json::from_slice(t).expect("json"))))
                        }
                        Some(Message::Close(code, _)) => Some(Err(code)),
                        _ => None,
                    };
                    self.buf.drain(..n);
                    match out {
                        Some(r) => return r,
                        None => continue,
                    }
                }
            }
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
                .await
                .expect("timed out")
                .unwrap_or(0);
            if n == 0 {
                return Err(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn close_code(&mut self) -> Option<u16> {
        loop {
            match self.next().await {
                Ok(_) => continue,
                Err(code) => return code,
            }
        }
    }
}

#[tokio::test]
async fn offered_deflate_is_negotiated_and_used_both_ways() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/ws", Some(OFFER)).await;
    assert_eq!(
        c.extensions.as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
    // A compressed command; its small reply comes back plain.
    c.send_json(json!({"id": 1, "connect": {}}), true).await;
    let (compressed, r) = c.next().await.expect("reply");
    assert!(r["connect"]["client"].is_string(), "{r}");
    assert!(!compressed, "a short reply is below the threshold");
    c.send_json(json!({"id": 2, "subscribe": {"channel": "squeeze"}}), false)
        .await;
    let (_, r) = c.next().await.expect("reply");
    assert_eq!(r["id"], 2, "{r}");
    // A large publication, sent compressed, reaches us compressed.
    let rows: Vec<Value> = (0..40)
        .map(|i| json!({"row": i, "name": "player", "score": i * 10}))
        .collect();
    c.send_json(
        json!({"id": 3, "publish": {"channel": "squeeze", "data": {"rows": rows}}}),
        true,
    )
    .await;
    let mut got_push = false;
    let mut got_reply = false;
    while !(got_push && got_reply) {
        let (compressed, v) = c.next().await.expect("message");
        if v["id"] == 3 {
            got_reply = true;
        } else if let Some(p) = v.get("pub") {
            assert!(compressed, "a large push is compressed");
            assert_eq!(p["data"]["rows"], json!(rows));
            got_push = true;
        }
    }
    // A plain client on the same channel gets the same push uncompressed.
    let mut plain = Client::connect(srv.addr, "/ws", None).await;
    assert_eq!(plain.extensions, None);
    plain
        .send_json(json!({"id": 1, "connect": {}}), false)
        .await;
    plain.next().await.expect("reply");
    plain
        .send_json(json!({"id": 2, "subscribe": {"channel": "squeeze"}}), false)
        .await;
    plain.next().await.expect("reply");
    c.send_json(
        json!({"id": 4, "publish": {"channel": "squeeze", "data": {"rows": rows}}}),
        false,
    )
    .await;
    loop {
        let (compressed, v) = plain.next().await.expect("push");
        if v.get("pub").is_some() {
            assert!(!compressed);
            assert_eq!(v["pub"]["data"]["rows"], json!(rows));
            break;
        }
    }
    loop {
        let (compressed, v) = c.next().await.expect("push");
        if v.get("pub").is_some() {
            assert!(compressed);
            break;
        }
    }
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn settings_turn_it_off_and_shootout_does_not_offer_it() {
    let srv = start(ServeArgs {
        ws_deflate: Some(false),
        ..Default::default()
    })
    .await;
    let c = Client::connect(srv.addr, "/ws", Some(OFFER)).await;
    assert_eq!(c.extensions, None);
    let srv = start_default().await;
    let c = Client::connect(srv.addr, "/shootout", Some(OFFER)).await;
    assert_eq!(c.extensions, None, "off on /shootout by default");
    let srv = start(ServeArgs {
        ws_deflate_shootout: Some(true),
        ..Default::default()
    })
    .await;
    let c = Client::connect(srv.addr, "/shootout", Some(OFFER)).await;
    assert!(c.extensions.is_some(), "--ws-deflate-shootout");
    // An offer we cannot parse is declined, not refused.
    let srv = start_default().await;
    let c = Client::connect(srv.addr, "/ws", Some("permessage-deflate; nonsense=1")).await;
    assert_eq!(c.extensions, None);
}

/// RSV1 without negotiation: RFC 6455 §5.2 ("MUST be 0 unless an extension
/// is negotiated that defines meanings"), so 1002.
#[tokio::test]
async fn rsv1_without_negotiation_is_1002() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/ws", None).await;
    c.send(
        true,
        OpCode::Text,
        &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00],
    )
    .await;
    assert_eq!(c.close_code().await, Some(1002));
    assert_serving(srv.addr).await;
}

/// A compressed control frame: RFC 7692 §6.1, "MUST _Fail the WebSocket
/// Connection_", 1002.
#[tokio::test]
async fn compressed_control_frame_is_1002() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/ws", Some(OFFER)).await;
    let mut out = bytes::BytesMut::new();
    encode_fragment_rsv1(
        &mut out,
        true,
        false,
        OpCode::Ping,
        b"hi",
        Some([1, 2, 3, 4]),
    );
    out[0] |= herald_ws::RSV1;
    c.stream.write_all(&out).await.expect("write");
    assert_eq!(c.close_code().await, Some(1002));
}

/// A deflate bomb (a few kilobytes inflating past the message limit): 1009,
/// and the server serves others meanwhile.
#[tokio::test]
async fn deflate_bomb_is_1009() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/ws", Some(OFFER)).await;
    let mut bomb = Vec::new();
    herald_ws::deflate::compress(&vec![b'a'; 4 << 20], &mut bomb);
    assert!(bomb.len() < 16 << 10, "{}", bomb.len());
    c.send(true, OpCode::Text, &bomb).await;
    assert_eq!(c.close_code().await, Some(1009));
    assert_serving(srv.addr).await;
}

/// Data that is not DEFLATE: RFC 7692 names no code; 1007 (RFC 6455
/// §7.4.1, data inconsistent with the message's type), as `ws` and browsers.
#[tokio::test]
async fn garbage_compressed_data_is_1007() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/ws", Some(OFFER)).await;
    c.send(true, OpCode::Text, &[0xff, 0xff, 0xff, 0xff]).await;
    assert_eq!(c.close_code().await, Some(1007));
}

/// Pusher's `/app/{key}` negotiates it too.
#[tokio::test]
async fn pusher_endpoint_negotiates_it() {
    let srv = start_default().await;
    let c = Client::connect(srv.addr, "/app/some-key?protocol=7", Some(OFFER)).await;
    assert!(c.extensions.is_some());
}

/// Bayeux's `/cometd` negotiates it: CometD's batches come in compressed,
/// and a large delivery goes out compressed.
#[tokio::test]
async fn bayeux_websocket_negotiates_it() {
    let srv = start_default().await;
    let mut c = Client::connect(srv.addr, "/cometd", Some(OFFER)).await;
    assert!(c.extensions.is_some());
    c.send_json(
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"id":"1"}]),
        true,
    )
    .await;
    let (_, r) = c.next().await.expect("handshake reply");
    let id = r[0]["clientId"].as_str().expect("clientId").to_string();
    c.send_json(
        json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/big","id":"2"},
               {"channel":"/meta/connect","clientId":id,"connectionType":"websocket","id":"3"}]),
        true,
    )
    .await;
    let mut subscribed = false;
    while !subscribed {
        let (_, r) = c.next().await.expect("subscribe reply");
        subscribed = r
            .as_array()
            .expect("a batch")
            .iter()
            .any(|m| m["channel"] == "/meta/subscribe" && m["successful"] == true);
    }
    let big = "x".repeat(4000);
    let body = json!({"channel": "big", "data": {"big": big}}).to_string();
    let (status, _, text) = http(srv.addr, "POST", "/api/publish", &[], &body).await;
    assert_eq!(status, 200, "{text}");
    loop {
        let (compressed, r) = c.next().await.expect("the delivery");
        let Some(d) = r
            .as_array()
            .expect("a batch")
            .iter()
            .find(|m| m["channel"] == "/big")
        else {
            continue;
        };
        assert_eq!(d["data"]["big"], big.as_str());
        assert!(compressed, "a 4 kB delivery goes compressed");
        break;
    }
}

/// A client that limits the server's window to 2^9 bytes gets it echoed,
/// and only messages that short compressed: the rest go plain.
#[tokio::test]
async fn a_limited_server_window_compresses_only_short_messages() {
    let srv = start_default().await;
    let mut c = Client::connect(
        srv.addr,
        "/ws",
        Some("permessage-deflate; server_max_window_bits=9"),
    )
    .await;
    assert_eq!(
        c.extensions.as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=9")
    );
    c.send_json(json!({"id": 1, "connect": {}}), false).await;
    c.next().await.expect("reply");
    c.send_json(json!({"id": 2, "subscribe": {"channel": "w"}}), false)
        .await;
    c.next().await.expect("reply");
    for (id, len, compressed) in [(3, 300, true), (4, 2000, false)] {
        let data = "x".repeat(len);
        c.send_json(
            json!({"id": id, "publish": {"channel": "w", "data": data}}),
            true,
        )
        .await;
        loop {
            let (was, v) = c.next().await.expect("message");
            if let Some(p) = v.get("pub") {
                assert_eq!(p["data"], json!(data));
                assert_eq!(was, compressed, "{len} bytes");
                break;
            }
        }
    }
}
