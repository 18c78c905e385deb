//! `/metrics` (Prometheus text format, checked with `promtool check metrics`),
//! `/healthz` and `/readyz`.
mod common;

use common::*;
use herald_server::ServeArgs;
use serde_json::json;

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .expect("number")
}

#[tokio::test]
async fn metrics_count_traffic_and_pass_promtool() {
    let srv = start_with_tcp(ServeArgs {
        rate_limit: Some(1),
        rate_burst: Some(3),
        ..ServeArgs::default()
    })
    .await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "m").await;
    let mut publisher = json_client(srv.addr).await;
    send_json(
        &mut publisher,
        json!({"id": 0, "publish": {"channel": "m", "data": 1}}),
    )
    .await;
    recv_json(&mut sub).await;
    // The publisher's bucket (3) is now empty: these are dropped.
    for id in 10..15 {
        send_json(&mut publisher, json!({"id": id, "ping": {}})).await;
    }
    for _ in 10..15 {
        recv_json(&mut publisher).await;
    }
    let _tcp = tokio::net::TcpStream::connect(srv.tcp_addr.expect("tcp"))
        .await
        .expect("tcp");
    let (status, headers, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert!(headers["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/plain; version=0.0.4"));
    assert!(
        value(&text, "herald_connections{transport=\"websocket\"}") >= 2.0,
        "{text}"
    );
    assert!(
        value(&text, "herald_messages_received_total") >= 9.0,
        "{text}"
    );
    assert!(value(&text, "herald_messages_sent_total") >= 4.0, "{text}");
    assert!(value(&text, "herald_sent_bytes_total") > 0.0, "{text}");
    assert!(
        value(&text, "herald_drops_total{reason=\"rate_limit\"}") >= 3.0,
        "{text}"
    );
    assert_eq!(value(&text, "herald_publications_total"), 1.0, "{text}");
    assert!(
        value(&text, "herald_fanout_duration_seconds_count") >= 1.0,
        "{text}"
    );
    assert_eq!(value(&text, "herald_broker_up"), 1.0, "{text}");
    promtool_check(&text);

    // A disconnect is counted by its code.
    let mut idle = connect(srv.addr, "/ws", Some("herald.json")).await;
    send_json(&mut idle, json!({"id": 1, "connect": {}})).await;
    recv_json(&mut idle).await;
    idle.close(None).await.expect("close");
    drop(idle);
    let mut counted = false;
    for _ in 0..50 {
        let (_, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
        // A close without a code is echoed, and counted, as 1000.
        if value(&text, "herald_disconnects_total{code=\"1000\"}") >= 1.0 {
            counted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(counted, "the client's close was not counted");
}

/// The table of metrics in `src/metrics.rs`'s docs is what `/metrics`
/// registers (one node: no `herald_cluster_*`; `tests/cluster.rs` checks
/// those).
#[tokio::test]
async fn the_documented_metrics_are_the_registered_ones() {
    let srv = start(ServeArgs::default()).await;
    let (status, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert_metrics_documented(&text, false);
}

#[tokio::test]
async fn health_and_readiness() {
    let srv = start_default().await;
    let (status, _, body) = http(srv.addr, "GET", "/healthz", &[], "").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, _, body) = http(srv.addr, "GET", "/readyz", &[], "").await;
    assert_eq!((status, body.as_str()), (200, "ready\n"));
}
