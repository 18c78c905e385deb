//! The test-only `/echo` endpoint (`--test-echo-route`, hidden): absent by
//! default, and when asked for, every message comes back as it was sent.
//! Autobahn|Testsuite (tests/outside/autobahn.test.sh) relies on both.
mod common;

use common::*;
use futures_util::SinkExt;
use herald_server::ServeArgs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn echo_is_off_by_default() {
    let srv = start_default().await;
    let mut stream = tokio::net::TcpStream::connect(srv.addr)
        .await
        .expect("connect");
    let mut req = Vec::new();
    let key = herald_ws::generate_key();
    herald_ws::write_client_request(&mut req, &srv.addr.to_string(), "/echo", &key, &[]);
    stream.write_all(&req).await.expect("write");
    let mut head = [0u8; 64];
    let n = tokio::time::timeout(WAIT, stream.read(&mut head))
        .await
        .expect("answer timeout")
        .expect("read");
    let head = String::from_utf8_lossy(&head[..n]);
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
}

#[tokio::test]
async fn echo_sends_text_as_text_and_binary_as_binary() {
    let srv = start(ServeArgs {
        test_echo_route: Some(true),
        max_message_size: Some(1 << 20),
        ..Default::default()
    })
    .await;
    let mut ws = connect(srv.addr, "/echo", None).await;
    let big = vec![7u8; 300_000];
    for m in [
        Message::text("héllo"),
        Message::binary(vec![0u8, 255, 1]),
        Message::text(""),
        Message::binary(big),
    ] {
        ws.send(m.clone()).await.expect("send");
        assert_eq!(next_msg(&mut ws).await, m);
    }
    assert_serving(srv.addr).await;
}
