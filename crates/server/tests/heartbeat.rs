//! Silent clients are pinged; clients that never answer are closed with 3000.
mod common;

use common::*;
use herald_server::ServeArgs;
use serde_json::json;
use std::time::Duration;

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
