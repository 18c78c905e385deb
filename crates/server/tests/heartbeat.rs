//! Silent clients are pinged; clients that never answer are closed with 3000.
mod common;

use common::*;
use futures_util::{SinkExt, StreamExt};
use herald_server::ServeArgs;
use serde_json::json;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn missing_pong_closes_with_3000_while_live_clients_stay() {
    let srv = start(ServeArgs {
        ping_interval: Some(1),
        pong_timeout: Some(1),
        ..Default::default()
    })
    .await;
    // tungstenite answers pings by itself while it is being read.
    let mut live = json_client(srv.addr).await;
    let keeper = tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(5), next_msg(&mut live)).await;
        live
    });
    // Our raw client never answers anything.
    let mut mute = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    assert_eq!(mute.close_code().await, Some(3000));

    let mut live = keeper.await.expect("keeper");
    send_json(&mut live, json!({"id": 9, "ping": {}})).await;
    assert_eq!(recv_json(&mut live).await["id"], 9);
}

/// Clients that answer every ping stay connected however their silence lines
/// up with the server's sweeps. (With one sweep per ping interval, a client
/// that fell silent just after a sweep was found past interval + timeout by
/// the sweep after next and closed with 3000, never pinged.)
#[tokio::test]
async fn answering_clients_survive_whenever_they_fell_silent() {
    let srv = start(ServeArgs {
        ping_interval: Some(3),
        pong_timeout: Some(2),
        ..Default::default()
    })
    .await;
    // Eight clients falling silent at staggered moments over one interval,
    // each then only answering pings (tungstenite does, while read).
    let mut keepers = Vec::new();
    for i in 0..8u64 {
        let addr = srv.addr;
        keepers.push(tokio::spawn(async move {
            let mut ws = json_client(addr).await;
            tokio::time::sleep(Duration::from_millis(450 * i)).await;
            send_json(&mut ws, json!({"id": 1, "ping": {}})).await;
            assert_eq!(recv_json(&mut ws).await["id"], 1);
            // Silent now for three intervals and more, only reading and
            // flushing the pongs tungstenite queues for the server's pings.
            let until = tokio::time::Instant::now() + Duration::from_secs(11);
            while tokio::time::Instant::now() < until {
                match tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
                    Err(_) | Ok(Some(Ok(Message::Ping(_)))) => {}
                    Ok(m) => panic!("client {i} heard {m:?} (closed?)"),
                }
                ws.flush().await.expect("flush pongs");
            }
            send_json(&mut ws, json!({"id": 2, "ping": {}})).await;
            assert_eq!(
                recv_json(&mut ws).await["id"],
                2,
                "client {i} still connected"
            );
        }));
    }
    for k in keepers {
        k.await.expect("client");
    }
}
