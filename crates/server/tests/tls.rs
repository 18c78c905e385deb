//! TLS: WebSocket over TLS (ALPN http/1.1) and HTTP/2 over TLS (ALPN h2), with a
//! self-signed certificate made for the test.
mod common;

use bytes::{Bytes, BytesMut};
use common::WAIT;
use herald_server::ServeArgs;
use herald_ws::{Decoder, Message, OpCode, Role};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

struct TlsServer {
    addr: SocketAddr,
    ca: CertificateDer<'static>,
    _shutdown: tokio_util::sync::DropGuard,
}

async fn start_tls() -> TlsServer {
    start_tls_with(ServeArgs::default()).await
}

/// A TLS server with `args` (its certificate and key added).
async fn start_tls_with(args: ServeArgs) -> TlsServer {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "herald-tls-{}-{}",
        std::process::id(),
        fastrand_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).expect("write cert");
    std::fs::write(&key, certified.key_pair.serialize_pem()).expect("write key");
    let config = herald_server::ServerConfig::resolve(ServeArgs {
        tls_cert: Some(cert),
        tls_key: Some(key),
        ..args
    })
    .expect("config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        herald_server::run(listener, config, herald_server::testing::games(), t)
            .await
            .expect("run")
    });
    TlsServer {
        addr,
        ca: certified.cert.der().clone(),
        _shutdown: token.drop_guard(),
    }
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

async fn tls_connect(srv: &TlsServer, alpn: &[u8]) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(srv.ca.clone()).expect("root");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let tcp = TcpStream::connect(srv.addr).await.expect("tcp");
    let name = ServerName::try_from("localhost").expect("name");
    connector.connect(name, tcp).await.expect("tls handshake")
}

#[tokio::test]
async fn websocket_over_tls() {
    let srv = start_tls().await;
    let mut s = tls_connect(&srv, b"http/1.1").await;
    let key = herald_ws::generate_key();
    let mut req = Vec::new();
    herald_ws::write_client_request(&mut req, "localhost", "/ws", &key, &["herald.json"]);
    s.write_all(&req).await.expect("write");
    let mut buf = Vec::new();
    let head = loop {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, s.read(&mut chunk))
            .await
            .expect("timeout")
            .expect("read");
        assert!(n > 0);
        buf.extend_from_slice(&chunk[..n]);
        if let Some((proto, head)) = herald_ws::parse_client_response(&buf, &key).expect("response")
        {
            assert_eq!(proto.as_deref(), Some("herald.json"));
            break head;
        }
    };
    buf.drain(..head);
    for cmd in [
        r#"{"id":1,"connect":{}}"#,
        r#"{"id":2,"subscribe":{"channel":"secure"}}"#,
        r#"{"id":3,"publish":{"channel":"secure","data":"s3cret"}}"#,
    ] {
        let mut out = BytesMut::new();
        herald_ws::encode_frame(
            &mut out,
            OpCode::Text,
            cmd.as_bytes(),
            Some(herald_ws::random_mask()),
        );
        s.write_all(&out).await.expect("write frame");
    }
    let mut dec = Decoder::new(Role::Client, 1 << 20);
    let mut texts = Vec::new();
    while texts.len() < 4 {
        let mut off = 0;
        while let Ok(Some((n, msg))) = dec.decode(&mut buf[off..]) {
            off += n;
            if let Some(Message::Text(t)) = msg {
                texts.push(String::from_utf8_lossy(t).into_owned());
            }
        }
        buf.drain(..off);
        if texts.len() >= 4 {
            break;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, s.read(&mut chunk))
            .await
            .expect("timeout")
            .expect("read");
        assert!(n > 0, "closed early; got {texts:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
    assert!(
        texts
            .iter()
            .any(|t| t.contains("\"s3cret\"") && t.contains("\"pub\"")),
        "{texts:?}"
    );
}

#[tokio::test]
async fn http2_over_tls_publish_and_long_poll() {
    let srv = start_tls().await;
    let s = tls_connect(&srv, b"h2").await;
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(s))
            .await
            .expect("h2");
    tokio::spawn(conn);
    let mut call = |method: &str, path: &str, body: &str| {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("https://localhost{path}"))
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        send.send_request(req)
    };
    let resp = call("POST", "/poll", "").await.expect("open");
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let opened: serde_json::Value =
        serde_json::from_slice(&resp.into_body().collect().await.expect("body").to_bytes())
            .expect("json");
    let sid = opened["session"].as_str().expect("sid").to_string();
    let r = call(
        "POST",
        &format!("/poll/{sid}"),
        r#"[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"t"}}]"#,
    )
    .await
    .expect("send");
    assert_eq!(r.status(), 202);
    let r = call(
        "POST",
        "/api/publish",
        r#"{"channel":"t","data":{"over":"h2+tls"}}"#,
    )
    .await
    .expect("publish");
    assert_eq!(r.status(), 200);
    let r = call("GET", &format!("/poll/{sid}"), "")
        .await
        .expect("poll");
    let got: serde_json::Value =
        serde_json::from_slice(&r.into_body().collect().await.expect("body").to_bytes())
            .expect("json");
    assert!(
        got.as_array()
            .expect("array")
            .iter()
            .any(|m| m["pub"]["data"]["over"] == "h2+tls"),
        "{got}"
    );
}

/// The admin dashboard under TLS, over HTTP/2: its session cookie is
/// `Secure`, and the Origin check expects `https://` and the request's
/// `:authority` (there is no Host header).
#[tokio::test]
async fn admin_cookie_is_secure_under_tls_and_origin_checked_over_h2() {
    use herald_server::admin::config::AdminArgs;
    use herald_server::admin::password::PasswordHash;
    let srv = start_tls_with(ServeArgs {
        admin: Some(AdminArgs {
            password_hash: Some(PasswordHash::new("pw", 1000).expect("hash").to_string()),
            ..AdminArgs::default()
        }),
        ..ServeArgs::default()
    })
    .await;
    let s = tls_connect(&srv, b"h2").await;
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(s))
            .await
            .expect("h2");
    tokio::spawn(conn);
    let mut login = |origin: &str| {
        let req = http::Request::builder()
            .method("POST")
            .uri("https://localhost/admin/login")
            .header("content-type", "application/json")
            .header("origin", origin)
            .body(Full::new(Bytes::from(
                r#"{"user":"admin","password":"pw"}"#,
            )))
            .expect("request");
        send.send_request(req)
    };
    let r = login("http://localhost").await.expect("login");
    assert_eq!(r.status(), 403, "an http:// origin under TLS is foreign");
    let r = login("https://localhost").await.expect("login");
    assert_eq!(r.status(), 200);
    let set = r.headers()["set-cookie"].to_str().expect("ascii");
    assert!(set.split("; ").any(|f| f == "Secure"), "{set}");
    assert!(set.split("; ").any(|f| f == "HttpOnly"), "{set}");
    assert!(set.split("; ").any(|f| f == "SameSite=Strict"), "{set}");
}
