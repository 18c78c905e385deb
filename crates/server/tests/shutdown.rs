//! Graceful shutdown: stop accepting, close every client with 1001, return.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn shutdown_closes_clients_with_going_away() {
    let srv = start_default().await;
    let mut herald = json_client(srv.addr).await;
    subscribe_json(&mut herald, 2, "news").await;
    let mut shoot = connect(srv.addr, "/shootout", None).await;
    send_json(&mut shoot, json!({"type": "echo", "payload": 1})).await;
    recv_json(&mut shoot).await;

    srv.shutdown.cancel();
    assert_eq!(close_code(&mut herald).await, 1001);
    assert_eq!(close_code(&mut shoot).await, 1001);
    drop(herald);
    drop(shoot);
    tokio::time::timeout(WAIT, srv.handle)
        .await
        .expect("server did not stop")
        .expect("server task");
    assert!(
        tokio::net::TcpStream::connect(srv.addr).await.is_err(),
        "listener must be closed after shutdown"
    );
}
