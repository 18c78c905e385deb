//! Bayeux sessions: several messages per WebSocket frame and deliveries as
//! they come; a held long-poll answered by a publication; one held
//! long-poll per session however many connects a client floods; the
//! `multiple-clients` advice for a second tab of one browser (with `ack`,
//! carrying that tab's deliveries), freed when a held poll's client goes
//! away; a handshake that never connects expires after `max_interval` (402
//! after).
mod common;

use common::*;
use futures_util::SinkExt;
use herald_server::bayeux::BayeuxArgs;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

async fn post_with(addr: SocketAddr, headers: &[(&str, &str)], body: Value) -> Value {
    let (status, _, text) = http(addr, "POST", "/cometd", headers, &body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("json")
}

async fn post(addr: SocketAddr, body: Value) -> Value {
    post_with(addr, &[], body).await
}

async fn handshake(addr: SocketAddr) -> String {
    let r = post(
        addr,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"]}]),
    )
    .await;
    r[0]["clientId"].as_str().expect("clientId").to_string()
}

fn connect_msg(id: &str) -> Value {
    json!([{"channel":"/meta/connect","clientId":id,"connectionType":"long-polling"}])
}

fn args(timeout_ms: u64, max_interval_ms: u64) -> ServeArgs {
    ServeArgs {
        bayeux: Some(BayeuxArgs {
            timeout_ms: Some(timeout_ms),
            max_interval_ms: Some(max_interval_ms),
            ..BayeuxArgs::default()
        }),
        ..ServeArgs::default()
    }
}

async fn api_publish(addr: SocketAddr, channel: &str, data: Value) {
    let body = json!({"channel": channel, "data": data}).to_string();
    let (status, _, text) = http(addr, "POST", "/api/publish", &[], &body).await;
    assert_eq!(status, 200, "{text}");
}

#[tokio::test]
async fn websocket_batches_and_deliveries() {
    let srv = start(args(60_000, 10_000)).await;
    let mut ws = connect(srv.addr, "/cometd", None).await;
    ws.send(Message::Text(
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"id":"1"}])
            .to_string()
            .into(),
    ))
    .await
    .expect("send");
    let r = recv_json(&mut ws).await;
    let id = r[0]["clientId"].as_str().expect("clientId").to_string();
    // Three messages in one frame; the connect (timeout 0) answers at once.
    ws.send(Message::Text(
        json!([
            {"channel":"/meta/subscribe","clientId":id,"subscription":"/room/*","id":"2"},
            {"channel":"/meta/subscribe","clientId":id,"subscription":"/other","id":"3"},
            {"channel":"/meta/connect","clientId":id,"connectionType":"websocket","advice":{"timeout":0},"id":"4"},
        ])
        .to_string()
        .into(),
    ))
    .await
    .expect("send");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let frame = recv_json(&mut ws).await;
        for m in frame.as_array().expect("array") {
            assert_eq!(m["successful"], true, "{m}");
            seen.push(m["id"].as_str().unwrap_or("").to_string());
        }
    }
    seen.sort();
    assert_eq!(seen, ["2", "3", "4"]);
    // A held connect (60 s) does not hold deliveries back on WebSocket.
    ws.send(Message::Text(
        json!([{"channel":"/meta/connect","clientId":id,"connectionType":"websocket","id":"5"}])
            .to_string()
            .into(),
    ))
    .await
    .expect("send");
    api_publish(srv.addr, "room.a", json!({"n": 1})).await;
    let r = recv_json(&mut ws).await;
    assert_eq!(r[0], json!({"channel":"/room/a","data":{"n":1}}));
}

#[tokio::test]
async fn a_held_long_poll_returns_with_a_publication() {
    let srv = start(args(20_000, 10_000)).await;
    let id = handshake(srv.addr).await;
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/news/**"}]),
    )
    .await;
    assert_eq!(r[0]["successful"], true, "{r}");
    let addr = srv.addr;
    let started = Instant::now();
    let held = tokio::spawn(async move { post(addr, connect_msg(&id)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    api_publish(srv.addr, "news.eu.fr", json!("bonjour")).await;
    let r = tokio::time::timeout(WAIT, held)
        .await
        .expect("answered")
        .expect("task");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r[0], json!({"channel":"/news/eu/fr","data":"bonjour"}));
    assert_eq!(r[1]["channel"], "/meta/connect");
    assert_eq!(r[1]["successful"], true);
    assert_eq!(r[1]["advice"]["reconnect"], "retry");
}

#[tokio::test]
async fn a_connect_flood_holds_one_request() {
    let srv = start(args(3_000, 10_000)).await;
    let id = handshake(srv.addr).await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (addr, id) = (srv.addr, id.clone());
        tasks.push(tokio::spawn(async move {
            let r = post(addr, connect_msg(&id)).await;
            (r, Instant::now())
        }));
    }
    let mut late = 0;
    for t in tasks {
        let (r, at) = tokio::time::timeout(WAIT, t)
            .await
            .expect("answered")
            .expect("task");
        assert_eq!(r[0]["successful"], true, "{r}");
        if at.duration_since(started) >= Duration::from_millis(2_500) {
            late += 1;
        }
    }
    assert!(late <= 1, "{late} connects were held to their timeout");
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn a_second_tab_of_a_browser_is_told_multiple_clients() {
    let srv = start(args(3_000, 10_000)).await;
    let (a, b) = (handshake(srv.addr).await, handshake(srv.addr).await);
    let cookie = [("cookie", "BAYEUX_BROWSER=tabs-test")];
    let addr = srv.addr;
    let first = tokio::spawn(async move { post_with(addr, &cookie, connect_msg(&a)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let r = post_with(srv.addr, &cookie, connect_msg(&b)).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(r[0]["successful"], true, "{r}");
    assert_eq!(r[0]["advice"]["multiple-clients"], true, "{r}");
    assert_eq!(r[0]["advice"]["interval"], 2000, "{r}");
    let r = tokio::time::timeout(WAIT, first)
        .await
        .expect("answered")
        .expect("task");
    assert!(r[0]["advice"].get("multiple-clients").is_none(), "{r}");
}

#[tokio::test]
async fn a_handshake_that_never_connects_expires() {
    let srv = start(args(1_000, 300)).await;
    let id = handshake(srv.addr).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = post(
            srv.addr,
            json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/x"}]),
        )
        .await;
        if r[0]["error"] == "402::Unknown client" {
            assert_eq!(r[0]["advice"]["reconnect"], "handshake");
            break;
        }
        assert!(Instant::now() < deadline, "never expired: {r}");
        // Messages other than connects keep it alive too: wait it out.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let (_, _, metrics) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains("herald_connections{transport=\"bayeux\"} 0"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("bayeux"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A second tab of an `ack` session is answered at once, and its answer
/// carries what waits for it as a numbered batch (it carried nothing, and
/// the deliveries waited for a connect that never came while the first
/// tab held its own).
#[tokio::test]
async fn a_second_tab_with_acks_gets_its_deliveries() {
    let srv = start(args(3_000, 10_000)).await;
    let a = handshake(srv.addr).await;
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"],"ext":{"ack":true}}]),
    )
    .await;
    let b = r[0]["clientId"].as_str().expect("clientId").to_string();
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/subscribe","clientId":b,"subscription":"/tabs"}]),
    )
    .await;
    assert_eq!(r[0]["successful"], true, "{r}");
    api_publish(srv.addr, "tabs", json!(1)).await;
    let cookie = [("cookie", "BAYEUX_BROWSER=ack-tabs")];
    let addr = srv.addr;
    let first = tokio::spawn(async move { post_with(addr, &cookie, connect_msg(&a)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ack = |n: u64| json!([{"channel":"/meta/connect","clientId":b,"connectionType":"long-polling","ext":{"ack":n}}]);
    let r = post_with(srv.addr, &cookie, ack(0)).await;
    assert_eq!(
        (&r[0]["channel"], &r[0]["data"]),
        (&json!("/tabs"), &json!(1)),
        "{r}"
    );
    assert_eq!(r[1]["advice"]["multiple-clients"], true, "{r}");
    assert_eq!(r[1]["ext"]["ack"], 1, "{r}");
    // Not acknowledged: sent again; acknowledged: gone.
    let r = post_with(srv.addr, &cookie, ack(0)).await;
    assert_eq!(
        (&r[0]["channel"], &r[0]["data"]),
        (&json!("/tabs"), &json!(1)),
        "{r}"
    );
    let r = post_with(srv.addr, &cookie, ack(2)).await;
    assert_eq!(r[0]["channel"], "/meta/connect", "{r}");
    tokio::time::timeout(WAIT, first)
        .await
        .expect("answered")
        .expect("task");
}

/// A held long-poll whose client went away mid-poll no longer counts as
/// its browser's: the browser's next connect is held, not told
/// `multiple-clients` (the count was undone only when the poll ended by
/// itself, so one dropped request turned every later one of the browser
/// into an immediate answer).
#[tokio::test]
async fn a_long_poll_dropped_by_its_client_frees_its_browser() {
    use tokio::io::AsyncWriteExt;
    let srv = start(args(2_000, 10_000)).await;
    let id = handshake(srv.addr).await;
    let body = connect_msg(&id).to_string();
    let mut raw = tokio::net::TcpStream::connect(srv.addr)
        .await
        .expect("connect");
    let req = format!(
        "POST /cometd HTTP/1.1\r\nhost: localhost\r\ncookie: BAYEUX_BROWSER=dropped\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    raw.write_all(req.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(raw);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let r = post_with(
        srv.addr,
        &[("cookie", "BAYEUX_BROWSER=dropped")],
        connect_msg(&id),
    )
    .await;
    assert!(r[0]["advice"].get("multiple-clients").is_none(), "{r}");
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "answered at once: {r}"
    );
}
