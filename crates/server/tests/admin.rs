//! The admin dashboard's HTTP side (`/admin`): off by default, login
//! refused and accepted, the cookie's flags, CSRF and Origin checks on every
//! action, the login limit (per address, and globally), the live stream's
//! detail view, actions reaching real clients (a publication, a
//! disconnect), and no secret in any answer. Real servers on 127.0.0.1:0,
//! real WebSocket clients.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/pusher.rs"]
mod pusher_common;

use common::*;
use herald_server::admin::config::AdminArgs;
use herald_server::admin::password::PasswordHash;
use herald_server::pusher::PusherArgs;
use herald_server::ServeArgs;
use pusher_common::app;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PASSWORD: &str = "correct horse battery";
const API_KEY: &str = "api-key-0123456789-SECRET";
const HMAC: &str = "hmac-secret-0123456789abcdef0123456789-SECRET";
const APP_SECRET: &str = "pusher-app-secret-SECRET";

/// `[admin]` with a password hash (few iterations: tests are debug builds).
fn admin(attempts: Option<u32>) -> AdminArgs {
    AdminArgs {
        password_hash: Some(PasswordHash::new(PASSWORD, 1000).unwrap().to_string()),
        login_attempts_per_minute: attempts,
        ..AdminArgs::default()
    }
}

async fn server(attempts: Option<u32>) -> TestServer {
    start(ServeArgs {
        admin: Some(admin(attempts)),
        ..ServeArgs::default()
    })
    .await
}

const JSON: (&str, &str) = ("content-type", "application/json");

async fn login(addr: SocketAddr, user: &str, password: &str) -> (u16, http::HeaderMap, String) {
    let body = json!({"user": user, "password": password}).to_string();
    http(addr, "POST", "/admin/login", &[JSON], &body).await
}

/// A logged-in session: the cookie header value and the CSRF token.
async fn session(addr: SocketAddr) -> (String, String) {
    let (status, headers, body) = login(addr, "admin", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let set = headers["set-cookie"].to_str().unwrap();
    let cookie = set.split(';').next().unwrap().to_string();
    let v: Value = serde_json::from_str(&body).unwrap();
    (cookie, v["csrf"].as_str().unwrap().to_string())
}

async fn get(addr: SocketAddr, path: &str, cookie: &str) -> (u16, Value) {
    let (status, _, body) = http(addr, "GET", path, &[("cookie", cookie)], "").await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

async fn post(addr: SocketAddr, path: &str, cookie: &str, csrf: &str, body: Value) -> (u16, Value) {
    let h = [JSON, ("cookie", cookie), ("x-csrf-token", csrf)];
    let (status, _, body) = http(addr, "POST", path, &h, &body.to_string()).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

fn metric(text: &str, action: &str) -> f64 {
    let key = format!("herald_admin_actions_total{{action=\"{action}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1.0)
}

#[tokio::test]
async fn off_without_a_credential() {
    let srv = start_default().await;
    for (method, path) in [
        ("GET", "/admin"),
        ("GET", "/admin/"),
        ("GET", "/admin/admin.js"),
        ("GET", "/admin/api/nodes"),
        ("POST", "/admin/login"),
    ] {
        let (status, _, _) = http(srv.addr, method, path, &[JSON], "{}").await;
        assert_eq!(status, 404, "{method} {path}");
    }
    // `api_key = true` without an api_key is a configuration error, and
    // `[admin]` with no credential leaves the dashboard off.
    let err = herald_server::ServerConfig::resolve(ServeArgs {
        admin: Some(AdminArgs {
            api_key: Some(true),
            ..AdminArgs::default()
        }),
        ..ServeArgs::default()
    });
    assert!(err.is_err());
    let off = herald_server::ServerConfig::resolve(ServeArgs {
        admin: Some(AdminArgs::default()),
        ..ServeArgs::default()
    })
    .unwrap();
    assert!(off.admin.is_none());
    let bad = herald_server::ServerConfig::resolve(ServeArgs {
        admin: Some(AdminArgs {
            password_hash: Some("plaintext".into()),
            ..AdminArgs::default()
        }),
        ..ServeArgs::default()
    });
    assert!(bad.unwrap_err().to_string().contains("password_hash"));
}

#[tokio::test]
async fn login_refused_then_accepted_with_a_strict_cookie() {
    let srv = server(None).await;
    let (status, headers, page) = http(srv.addr, "GET", "/admin", &[], "").await;
    assert_eq!(status, 200);
    assert!(page.contains("admin.js"), "{page}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));

    for (user, password) in [("admin", "wrong"), ("root", PASSWORD), ("admin", "")] {
        let (status, headers, _) = login(srv.addr, user, password).await;
        assert_eq!(status, 401, "{user}/{password}");
        assert!(headers.get("set-cookie").is_none());
    }
    let (status, headers, body) = login(srv.addr, "admin", PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let set = headers["set-cookie"].to_str().unwrap();
    let name = format!("herald_admin_{}=", srv.addr.port());
    assert!(set.starts_with(&name), "{set}");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/admin"] {
        assert!(set.split("; ").any(|f| f == flag), "{flag} missing: {set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: not Secure: {set}");
    let cookie = set.split(';').next().unwrap();

    let (status, v) = get(srv.addr, "/admin/api/session", cookie).await;
    assert_eq!((status, v["user"].as_str()), (200, Some("admin")));
    assert_eq!(v["csrf"].as_str().map(str::len), Some(64));
    let other_node = cookie.replace(&format!("_{}=", srv.addr.port()), "_1=");
    for bad in [
        "",
        "herald_admin=",
        "herald_admin=0000",
        "other=1",
        &other_node,
    ] {
        let (status, _) = get(srv.addr, "/admin/api/session", bad).await;
        assert_eq!(status, 401, "{bad:?}");
    }

    let csrf = v["csrf"].as_str().unwrap();
    let (status, _) = post(srv.addr, "/admin/logout", cookie, csrf, json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = get(srv.addr, "/admin/api/session", cookie).await;
    assert_eq!(status, 401, "logged out");

    let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(metric(&text, "login_refused"), 3.0);
    assert_eq!(metric(&text, "login"), 1.0);
    assert_eq!(metric(&text, "logout"), 1.0);
}

#[tokio::test]
async fn the_api_key_may_be_the_password() {
    let srv = start(ServeArgs {
        api_key: Some(API_KEY.into()),
        admin: Some(AdminArgs {
            api_key: Some(true),
            ..AdminArgs::default()
        }),
        ..ServeArgs::default()
    })
    .await;
    assert_eq!(login(srv.addr, "admin", "nope").await.0, 401);
    assert_eq!(login(srv.addr, "admin", API_KEY).await.0, 200);
}

/// A login sent from the local address `from` (any of 127.0.0.0/8 reaches
/// the server on loopback): its status.
async fn login_from(from: [u8; 4], addr: SocketAddr, password: &str) -> u16 {
    use http_body_util::BodyExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let body = json!({"user": "admin", "password": password}).to_string();
    let req = http::Request::builder()
        .method("POST")
        .uri("/admin/login")
        .header("host", "localhost")
        .header(JSON.0, JSON.1)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = tokio::time::timeout(WAIT, send.send_request(req))
        .await
        .unwrap()
        .unwrap();
    let status = resp.status().as_u16();
    let _ = tokio::time::timeout(WAIT, resp.into_body().collect()).await;
    status
}

#[tokio::test]
async fn login_attempts_are_limited_per_address() {
    let srv = server(Some(3)).await;
    for _ in 0..3 {
        assert_eq!(login(srv.addr, "admin", "guess").await.0, 401);
    }
    let (status, headers, _) = login(srv.addr, "admin", PASSWORD).await;
    assert_eq!(status, 429, "even the right password waits");
    assert_eq!(headers["retry-after"], "60");
    // The flood came from 127.0.0.1: the operator at another address
    // still logs in, and spends a budget of its own.
    assert_eq!(login_from([127, 0, 0, 2], srv.addr, PASSWORD).await, 200);
    assert_eq!(login_from([127, 0, 0, 1], srv.addr, PASSWORD).await, 429);
    for _ in 0..2 {
        assert_eq!(login_from([127, 0, 0, 2], srv.addr, "guess").await, 401);
    }
    assert_eq!(login_from([127, 0, 0, 2], srv.addr, PASSWORD).await, 429);
    assert_eq!(login_from([127, 0, 0, 3], srv.addr, PASSWORD).await, 200);
    let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(metric(&text, "login_limited"), 3.0);
}

#[tokio::test]
async fn login_attempts_have_a_global_ceiling() {
    // 1 per address, so 10 (GLOBAL_FACTOR) over all addresses.
    let srv = server(Some(1)).await;
    for n in 1..=10u8 {
        assert_eq!(login_from([127, 0, 1, n], srv.addr, "guess").await, 401);
    }
    assert_eq!(
        login_from([127, 0, 2, 1], srv.addr, PASSWORD).await,
        429,
        "a fresh address waits once the global ceiling is reached"
    );
}

#[tokio::test]
async fn every_action_needs_the_csrf_token_and_the_same_origin() {
    let srv = server(None).await;
    let (cookie, csrf) = session(srv.addr).await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "news").await;
    let body = json!({"channel": "news", "data": {"hello": 1}}).to_string();
    let refused: [Vec<(&str, &str)>; 6] = [
        vec![JSON, ("cookie", &cookie)],
        vec![JSON, ("cookie", &cookie), ("x-csrf-token", "0000")],
        vec![JSON, ("cookie", &cookie), ("x-csrf-token", &csrf[..63])],
        vec![
            ("content-type", "text/plain"),
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
        ],
        vec![
            JSON,
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("origin", "http://evil.example"),
        ],
        vec![
            JSON,
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("sec-fetch-site", "cross-site"),
        ],
    ];
    for h in &refused {
        let (status, _, _) = http(srv.addr, "POST", "/admin/api/publish", h, &body).await;
        assert_eq!(status, 403, "{h:?}");
    }
    // Without a session: 401, whatever the token.
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/admin/api/publish",
        &[JSON, ("x-csrf-token", &csrf)],
        &body,
    )
    .await;
    assert_eq!(status, 401);
    // A foreign origin cannot log in either.
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/admin/login",
        &[JSON, ("origin", "http://evil.example")],
        &json!({"user": "admin", "password": PASSWORD}).to_string(),
    )
    .await;
    assert_eq!(status, 403);

    let ok = [
        JSON,
        ("cookie", cookie.as_str()),
        ("x-csrf-token", csrf.as_str()),
        ("origin", "http://localhost"),
    ];
    let (status, _, r) = http(srv.addr, "POST", "/admin/api/publish", &ok, &body).await;
    assert_eq!(status, 200, "{r}");
    let push = recv_json(&mut ws).await;
    assert_eq!(push["pub"]["channel"], "news", "{push}");
    assert_eq!(push["pub"]["data"], json!({"hello": 1}), "{push}");

    let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(metric(&text, "csrf_refused"), 7.0);
    assert_eq!(metric(&text, "publish"), 1.0);
}

#[tokio::test]
async fn bad_input_is_refused() {
    let srv = server(None).await;
    let (cookie, csrf) = session(srv.addr).await;
    for path in [
        "/admin/api/channel",
        "/admin/api/channel?name=",
        "/admin/api/connections",
        "/admin/api/connections?client=xyz",
        "/admin/api/table?id=abc",
    ] {
        assert_eq!(get(srv.addr, path, &cookie).await.0, 400, "{path}");
    }
    assert_eq!(get(srv.addr, "/admin/api/nope", &cookie).await.0, 404);
    assert_eq!(
        get(srv.addr, "/admin/api/table?id=99", &cookie).await.0,
        404
    );
    for (path, body) in [
        ("/admin/api/publish", json!({"channel": "x"})),
        ("/admin/api/publish", json!({"channel": "", "data": 1})),
        (
            "/admin/api/disconnect",
            json!({"client": "zz", "code": 4000}),
        ),
        (
            "/admin/api/disconnect",
            json!({"client": "1", "code": 1006}),
        ),
        (
            "/admin/api/disconnect",
            json!({"client": "1", "code": 70000}),
        ),
        ("/admin/api/close-table", json!({"id": "x"})),
    ] {
        assert_eq!(
            post(srv.addr, path, &cookie, &csrf, body).await.0,
            400,
            "{path}"
        );
    }
    assert_eq!(
        post(
            srv.addr,
            "/admin/api/disconnect",
            &cookie,
            &csrf,
            json!({"client": "ffffff", "code": 4000})
        )
        .await
        .0,
        404
    );
    // Data over max_message_size: 413, nothing published.
    let big = json!({"channel": "x", "data": "a".repeat(70_000)});
    assert_eq!(
        post(srv.addr, "/admin/api/publish", &cookie, &csrf, big)
            .await
            .0,
        413
    );
    // Not JSON, or too large.
    let h = [JSON];
    assert_eq!(
        http(srv.addr, "POST", "/admin/login", &h, "user=admin")
            .await
            .0,
        400
    );
    let big = format!("{{\"user\": \"{}\"}}", "a".repeat(10_000));
    assert_eq!(
        http(srv.addr, "POST", "/admin/login", &h, &big).await.0,
        413
    );
    assert_eq!(
        http(
            srv.addr,
            "PUT",
            "/admin/api/nodes",
            &[("cookie", &cookie)],
            ""
        )
        .await
        .0,
        405
    );
}

#[tokio::test]
async fn a_connection_is_found_and_disconnected_with_a_code() {
    let srv = start(ServeArgs {
        token_hmac_secret: Some(HMAC.into()),
        admin: Some(admin(None)),
        ..ServeArgs::default()
    })
    .await;
    let (mut ws, r) = connect_with_token(srv.addr, Some(&user_token(HMAC, "alice"))).await;
    let client = r["connect"]["client"].as_str().unwrap().to_string();
    subscribe_json(&mut ws, 2, "room.1").await;
    let (cookie, csrf) = session(srv.addr).await;

    let (status, v) = get(srv.addr, "/admin/api/connections?user=alice", &cookie).await;
    assert_eq!(status, 200);
    let rows = v["connections"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["client"], client.as_str());
    assert_eq!(rows[0]["subscriptions"], json!(["room.1"]));
    let (_, by_id) = get(
        srv.addr,
        &format!("/admin/api/connections?client={client}"),
        &cookie,
    )
    .await;
    assert_eq!(by_id["connections"][0]["user"], "alice", "{by_id}");
    let (_, none) = get(srv.addr, "/admin/api/connections?user=bob", &cookie).await;
    assert_eq!(none["connections"], json!([]));

    let (_, chans) = get(srv.addr, "/admin/api/channels?q=room.*", &cookie).await;
    assert_eq!(
        chans["channels"],
        json!([{"channel": "room.1", "subscribers": 1}]),
        "{chans}"
    );
    let (_, chan) = get(srv.addr, "/admin/api/channel?name=room.1", &cookie).await;
    assert_eq!(chan["presence"][0]["user"], "alice", "{chan}");

    let (status, r) = post(
        srv.addr,
        "/admin/api/disconnect",
        &cookie,
        &csrf,
        json!({"client": client, "code": 4321}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(close_code(&mut ws).await, 4321);
    let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(metric(&text, "disconnect"), 1.0);
}

/// Reads the live stream until its first `nodes` event.
/// A raw socket that has asked for the live stream with `cookie`.
async fn request_live(addr: SocketAddr, cookie: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET /admin/api/live HTTP/1.1\r\nhost: localhost\r\ncookie: {cookie}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Opens the live stream with `cookie` on a raw socket; returns it once
/// its answer's head says 200, with a read buffer for what follows.
async fn open_live(addr: SocketAddr, cookie: &str) -> (tokio::net::TcpStream, Vec<u8>) {
    let mut s = request_live(addr, cookie).await;
    let mut buf = vec![0u8; 16 * 1024];
    let n = tokio::time::timeout(WAIT, s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200 OK"));
    (s, buf)
}

async fn first_live_event(addr: SocketAddr, cookie: &str) -> (String, Value) {
    let mut s = request_live(addr, cookie).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("live event")
            .unwrap();
        assert!(n > 0, "stream ended: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(at) = text.find("event: nodes\ndata: ") {
            let rest = &text[at + "event: nodes\ndata: ".len()..];
            if let Some(end) = rest.find('\n') {
                let v: Value = serde_json::from_str(&rest[..end]).unwrap();
                return (text, v);
            }
        }
    }
}

#[tokio::test]
async fn no_secret_in_any_answer_and_the_live_stream_moves() {
    let srv = start(ServeArgs {
        api_key: Some(API_KEY.into()),
        token_hmac_secret: Some(HMAC.into()),
        admin: Some(AdminArgs {
            api_key: Some(true),
            ..admin(None)
        }),
        pusher: Some(PusherArgs {
            apps: vec![app("7", "public-key", APP_SECRET)],
            ..Default::default()
        }),
        ..ServeArgs::default()
    })
    .await;
    let (cookie, _) = session(srv.addr).await;
    let mut answers = Vec::new();
    for path in [
        "/admin/api/session",
        "/admin/api/nodes",
        "/admin/api/channels?q=",
        "/admin/api/channel?name=news",
        "/admin/api/connections?user=x",
        "/admin/api/tables",
        "/admin/api/pusher",
    ] {
        let (status, _, body) = http(srv.addr, "GET", path, &[("cookie", &cookie)], "").await;
        assert_eq!(status, 200, "{path}: {body}");
        answers.push(body);
    }
    let (text, first) = first_live_event(srv.addr, &cookie).await;
    answers.push(text);
    for body in &answers {
        for secret in [API_KEY, HMAC, APP_SECRET, PASSWORD, "SECRET"] {
            assert!(!body.contains(secret), "{secret} in {body}");
        }
    }
    let pusher: Value = serde_json::from_str(&answers[6]).unwrap();
    assert_eq!(pusher["apps"][0]["key"], "public-key");
    let node = &first["nodes"][0];
    assert_eq!(node["self"], true, "{first}");
    for field in [
        "clients",
        "channels",
        "publications",
        "delivered",
        "memory_bytes",
        "fanout",
        "transports",
        "uptime_s",
        "version",
        "role",
    ] {
        assert!(!node["stats"][field].is_null(), "{field} in {first}");
    }
    // Publications counted between two events: the page's rates move.
    let before = node["stats"]["publications"].as_u64().unwrap();
    for i in 0..5 {
        let (status, _, _) = http(
            srv.addr,
            "POST",
            "/api/publish",
            &[JSON, ("authorization", &format!("apikey {API_KEY}"))],
            &json!({"channel": "load", "data": i}).to_string(),
        )
        .await;
        assert_eq!(status, 200);
    }
    let (_, second) = first_live_event(srv.addr, &cookie).await;
    let after = second["nodes"][0]["stats"]["publications"]
        .as_u64()
        .unwrap();
    assert_eq!(after, before + 5, "{second}");
    // A stream without a session is refused.
    let (status, _, _) = http(srv.addr, "GET", "/admin/api/live", &[], "").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn tables_are_listed_shown_and_closed() {
    use herald_server::config::TableConfig;
    let srv = start(ServeArgs {
        admin: Some(admin(None)),
        tables: vec![TableConfig {
            game: "holdem".into(),
            count: 2,
            seats: 2,
            timing: "normal".into(),
            path: None,
            params: Default::default(),
        }],
        ..ServeArgs::default()
    })
    .await;
    let (cookie, csrf) = session(srv.addr).await;
    let (status, v) = get(srv.addr, "/admin/api/tables", &cookie).await;
    assert_eq!(status, 200);
    let ids: Vec<u64> = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{v}");
    let (status, state) = get(
        srv.addr,
        &format!("/admin/api/table?id={}", ids[0]),
        &cookie,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(state["table"]["table"], ids[0], "{state}");
    assert_eq!(state["state"]["street"], "idle", "{state}");
    let (status, r) = post(
        srv.addr,
        "/admin/api/close-table",
        &cookie,
        &csrf,
        json!({"id": ids[0]}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let (status, _) = post(
        srv.addr,
        "/admin/api/close-table",
        &cookie,
        &csrf,
        json!({"id": ids[0]}),
    )
    .await;
    assert_eq!(status, 404, "closed already");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, v) = get(srv.addr, "/admin/api/tables", &cookie).await;
        if v["tables"].as_array().unwrap().len() == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed table stays in the lobby: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(
        metric(&text, "close_table"),
        1.0,
        "a refused close is not counted"
    );
}

#[tokio::test]
async fn pusher_apps_show_their_connections_and_channels() {
    let srv = start(ServeArgs {
        admin: Some(admin(None)),
        pusher: Some(PusherArgs {
            apps: vec![
                app("1", pusher_common::KEY, pusher_common::SECRET),
                app("2", "other-key", "other-secret"),
            ],
            ..Default::default()
        }),
        ..ServeArgs::default()
    })
    .await;
    let (mut a, _) = pusher_common::pusher_client(srv.addr, pusher_common::KEY).await;
    let (mut b, _) = pusher_common::pusher_client(srv.addr, pusher_common::KEY).await;
    let m = pusher_common::subscribe(&mut a, "orders", None, None).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
    let m = pusher_common::subscribe(&mut b, "orders", None, None).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
    let (cookie, _) = session(srv.addr).await;
    let (status, v) = get(srv.addr, "/admin/api/pusher", &cookie).await;
    assert_eq!(status, 200);
    assert_eq!(v["apps"][0]["id"], "1", "{v}");
    assert_eq!(v["apps"][0]["connections"], 2, "{v}");
    assert_eq!(
        v["apps"][0]["channels"],
        json!([{"channel": "orders", "subscribers": 2}])
    );
    assert_eq!(v["apps"][1]["connections"], 0, "{v}");
    assert_eq!(v["apps"][1]["channels"], json!([]));
    let body = v.to_string();
    assert!(!body.contains(pusher_common::SECRET) && !body.contains("other-secret"));
}

#[tokio::test]
async fn the_live_stream_ends_with_its_session() {
    let srv = server(None).await;
    let (cookie, csrf) = session(srv.addr).await;
    let (mut s, mut buf) = open_live(srv.addr, &cookie).await;
    assert_eq!(
        post(srv.addr, "/admin/logout", &cookie, &csrf, json!({}))
            .await
            .0,
        200
    );
    // The stream ends (its last chunk) within a tick or two.
    let mut tail = Vec::new();
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => {
                    tail.extend_from_slice(&buf[..n]);
                    if tail.ends_with(b"0\r\n\r\n") {
                        return true;
                    }
                }
            }
        }
    })
    .await;
    assert_eq!(ended, Ok(true), "the stream outlived its session");
}

/// An open live stream does not hold shutdown up: it ends within a tick
/// once shutdown starts (the drain would otherwise wait its full minute).
#[tokio::test]
async fn an_open_live_stream_ends_at_shutdown() {
    let srv = start(ServeArgs {
        admin: Some(admin(None)),
        shutdown_timeout: Some(60),
        ..ServeArgs::default()
    })
    .await;
    let (cookie, _) = session(srv.addr).await;
    let (_, _) = first_live_event(srv.addr, &cookie).await;
    let (_open, _) = open_live(srv.addr, &cookie).await;
    srv.shutdown.cancel();
    tokio::time::timeout(WAIT, srv.handle)
        .await
        .expect("shutdown waited on the live stream")
        .unwrap();
}

/// Reads the live stream at `path` until an `event` event whose data holds
/// `needle`: that event's data.
async fn live_until(
    addr: SocketAddr,
    path: &str,
    cookie: &str,
    event: &str,
    needle: &str,
) -> Value {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\ncookie: {cookie}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let tag = format!("event: {event}\ndata: ");
    loop {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("an event holding the needle")
            .unwrap();
        assert!(n > 0, "stream ended: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        for (at, _) in text.match_indices(&tag) {
            let rest = &text[at + tag.len()..];
            let Some(end) = rest.find('\n') else { continue };
            let v: Value = serde_json::from_str(&rest[..end]).unwrap();
            if v.to_string().contains(needle) {
                return v;
            }
        }
    }
}

#[tokio::test]
async fn the_live_stream_carries_the_open_view() {
    let srv = server(None).await;
    let (cookie, csrf) = session(srv.addr).await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "news").await;
    // Published after the stream opened: only a later tick can carry it.
    let addr = srv.addr;
    let c2 = cookie.clone();
    let watch = tokio::spawn(async move {
        let path = "/admin/api/live?channel=news";
        live_until(addr, path, &c2, "channel", "live-marker").await
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let (status, _) = post(
        srv.addr,
        "/admin/api/publish",
        &cookie,
        &csrf,
        json!({"channel": "news", "data": {"m": "live-marker"}}),
    )
    .await;
    assert_eq!(status, 200);
    let v = watch.await.unwrap();
    assert_eq!(v["channel"], "news");
    assert_eq!(v["subscribers"], 1);
    assert!(v["history"].to_string().contains("live-marker"), "{v}");
    // The other views.
    let path = "/admin/api/live?table=999";
    let t = live_until(srv.addr, path, &cookie, "table", "no such table").await;
    assert_eq!(t["table"], 999);
    let path = "/admin/api/live?user=nobody";
    let c = live_until(srv.addr, path, &cookie, "connections", "connections").await;
    assert_eq!(c["connections"], json!([]), "{c}");
    // A bad view is refused before the stream opens.
    for path in [
        "/admin/api/live?channel=bad%20name",
        "/admin/api/live?table=x",
        "/admin/api/live?client=zz",
    ] {
        let (status, _, _) = http(srv.addr, "GET", path, &[("cookie", &cookie)], "").await;
        assert_eq!(status, 400, "{path}");
    }
}
