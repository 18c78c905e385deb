//! Memory given back once traffic stops (issue 30, part 5): one-off
//! channels published to and then left alone leave the in-memory broker
//! (`herald_broker_channels` falls to 0) after `history_ttl`, with no more
//! traffic to sweep them: the server's housekeeping timer does it. Before
//! it, expired history was swept only on publish/subscribe/unsubscribe and
//! a quiet node kept every channel it had ever seen within the TTL.
mod common;

use common::*;
use herald_server::ServeArgs;
use std::time::{Duration, Instant};

async fn broker_channels(srv: &TestServer) -> u64 {
    let (status, _, body) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("herald_broker_channels "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no herald_broker_channels in {body}"))
}

#[tokio::test]
async fn one_off_channels_leave_memory_after_their_ttl_without_traffic() {
    let srv = start(ServeArgs {
        history_ttl: Some(1),
        ..ServeArgs::default()
    })
    .await;
    for i in 0..300 {
        let body = format!(r#"{{"channel":"once.{i}","data":{{"n":{i}}}}}"#);
        let (status, _, reply) = http(srv.addr, "POST", "/api/publish", &[], &body).await;
        assert_eq!(status, 200, "{reply}");
    }
    assert_eq!(broker_channels(&srv).await, 300);
    // Nothing more is published or subscribed: only time passes. One sweep
    // of the whole map takes 64 × 250 ms.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let n = broker_channels(&srv).await;
        if n == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} channels still kept");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
