//! A client that stops reading is disconnected with 3001 once its bounded queue
//! fills; publishers and other subscribers do not wait for it.
mod common;

use common::*;
use herald_server::ServeArgs;
use herald_ws::OpCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_is_disconnected_and_nobody_else_suffers() {
    let srv = start(ServeArgs {
        client_queue_bytes: Some(64 * 1024),
        ..Default::default()
    })
    .await;

    // The slow client subscribes, then never reads again.
    let mut slow = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    slow.send_frame(OpCode::Text, br#"{"id":1,"connect":{}}"#)
        .await;
    slow.send_frame(
        OpCode::Text,
        br#"{"id":2,"subscribe":{"channel":"firehose"}}"#,
    )
    .await;
    assert_eq!(slow.next_json().await["id"], 1);
    assert_eq!(slow.next_json().await["id"], 2);

    let mut fast = json_client(srv.addr).await;
    subscribe_json(&mut fast, 2, "firehose").await;
    let mut publisher = json_client(srv.addr).await;

    // ~24 MB in total: far more than the kernel's socket buffers and the 64 KiB
    // queue can hold for a client that does not read.
    let blob = "x".repeat(4000);
    let count = 6000;
    // The publisher stays at most WINDOW publications (~16 KiB) ahead of what
    // the fast subscriber has read, so the fast one can never fall 64 KiB
    // behind, however the test's tasks are scheduled on a loaded machine;
    // the slow one, which reads nothing, falls 24 MB behind.
    const WINDOW: usize = 4;
    let credit = std::sync::Arc::new(tokio::sync::Semaphore::new(WINDOW));
    let reader_credit = credit.clone();
    let reader = tokio::spawn(async move {
        for i in 0..count {
            let m = recv_json(&mut fast).await;
            assert_eq!(
                m["pub"]["offset"],
                i + 1,
                "fast subscriber lost or reordered"
            );
            reader_credit.add_permits(1);
        }
    });
    for i in 0..count {
        tokio::time::timeout(WAIT, credit.acquire())
            .await
            .expect("fast subscriber stopped reading (see its panic)")
            .expect("the semaphore is never closed")
            .forget();
        send_json(
            &mut publisher,
            json!({"id": i + 1, "publish": {"channel": "firehose", "data": {"i": i, "blob": blob}}}),
        )
        .await;
        let r = recv_json(&mut publisher).await;
        assert_eq!(r["id"], i + 1, "publisher was slowed or failed: {r}");
    }
    tokio::time::timeout(WAIT * 3, reader)
        .await
        .expect("fast subscriber starved")
        .expect("fast subscriber failed");
    assert_eq!(slow.close_code().await, Some(3001));
    assert_serving(srv.addr).await;
}
