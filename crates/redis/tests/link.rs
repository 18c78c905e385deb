//! The command link against a real `redis-server`: pipelining keeps order,
//! a stalled Redis makes calls time out instead of hang, a dead one makes
//! them fail at once, and the link comes back by itself.

#![allow(clippy::unwrap_used, missing_docs)]

use herald_redis::conn::{Link, Target};
use herald_redis::testing::RedisServer;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn up(link: &Link) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !link.is_up() {
        assert!(Instant::now() < deadline, "the link never came up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn link(redis: &RedisServer, timeout: Duration) -> Arc<Link> {
    Link::start(Target::parse(&redis.url()).unwrap(), Vec::new(), timeout)
}

#[tokio::test]
async fn pipelined_calls_keep_their_order() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let link = link(&redis, Duration::from_secs(5));
    up(&link).await;
    // Queued all at once (one write, or a few), answered in order.
    let calls: Vec<_> = (0..2000)
        .map(|_| link.call_later(&["INCR", "n"]).unwrap())
        .collect();
    let mut got = Vec::new();
    for c in calls {
        got.push(c.await.unwrap().int().unwrap());
    }
    assert_eq!(got, (1..=2000).collect::<Vec<i64>>());
    // An error reply is an error, and the link goes on.
    assert!(link.call(&["INCR", "no such", "arity"]).await.is_err());
    assert_eq!(link.call(&["GET", "n"]).await.unwrap().int(), Some(2000));
}

#[tokio::test]
async fn a_stalled_redis_times_calls_out_and_a_dead_one_fails_them_at_once() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let link = link(&redis, Duration::from_millis(300));
    up(&link).await;
    redis.stall(1.5);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = link.call(&["PING"]).await.unwrap_err();
    assert!(err.to_string().contains("no reply within"), "{err}");
    // Once Redis answers again, so does the link.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(link.call(&["PING"]).await.is_ok());

    redis.kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while link.is_up() {
        assert!(Instant::now() < deadline, "the link did not notice");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = link.call(&["PING"]).await.unwrap_err();
    assert!(err.to_string().contains("not connected"), "{err}");
    redis.restart();
    up(&link).await;
    assert!(link.call(&["PING"]).await.is_ok());
}
