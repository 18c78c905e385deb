//! Memory given back once traffic stops (issue 30, part 5): one-off
//! channels published to and then left alone leave the in-memory broker
//! (`herald_broker_channels` falls to 0) after `history_ttl`, with no more
//! traffic to sweep them: the server's housekeeping timer does it. Before
//! it, expired history was swept only on publish/subscribe/unsubscribe and
//! a quiet node kept every channel it had ever seen within the TTL. And
//! the binary's hook that gives the allocator's caches back runs once the
//! node is quiet, never while it is busy.
mod common;

use common::*;
use herald_server::reclaim::{Reclaim, QUIET_AFTER};
use herald_server::{ServeArgs, ServerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
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

#[tokio::test]
async fn the_reclaim_hook_runs_when_the_node_is_quiet_and_not_while_it_is_busy() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut config = ServerConfig::resolve(ServeArgs::default()).expect("config");
    let counted = calls.clone();
    config.reclaim = Some(Reclaim(Arc::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    })));
    let srv = start_config(config, false).await;
    // Busy for longer than QUIET_AFTER: a publication every 100 ms.
    let busy_until = Instant::now() + QUIET_AFTER + Duration::from_secs(2);
    let mut i = 0;
    while Instant::now() < busy_until {
        let body = format!(r#"{{"channel":"busy","data":{i}}}"#);
        let (status, _, reply) = http(srv.addr, "POST", "/api/publish", &[], &body).await;
        assert_eq!(status, 200, "{reply}");
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "called while busy");
    // Quiet: the hook runs (after QUIET_AFTER; bounded wait).
    let deadline = Instant::now() + Duration::from_secs(30);
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "never called once quiet");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
