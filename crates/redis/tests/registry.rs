//! The cluster's table registry against a real `redis-server` (decision
//! 0009, "Which tables exist"): created ids are above the configured ones
//! and never handed out twice, concurrent creates included; a deleted
//! table's lease becomes a sentinel no claim wins, at once when nobody
//! held it, after the owner's retire when someone did; a deleted or
//! unknown id is refused; the lobby removal is numbered and kept like an
//! entry. With `--table-save-replicas`, a creation waits for the replica
//! (a stopped one: the timeout, counted).

#![allow(clippy::unwrap_used, missing_docs)]

use herald_redis::conn::{Link, Target};
use herald_redis::lua;
use herald_redis::registry::{Deletion, TableRegistry, DELETED};
use herald_redis::resp::Value;
use herald_redis::tables::{parse_lobby, Claim, TableStore};
use herald_redis::testing::RedisServer;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn link(redis: &RedisServer) -> Arc<Link> {
    let link = Link::start(
        Target::parse(&redis.url()).unwrap(),
        lua::setup(),
        Duration::from_secs(2),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !link.is_up() {
        assert!(Instant::now() < deadline, "the link never came up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    link
}

const LEASE: Duration = Duration::from_millis(300);

fn text(v: Option<Value>) -> Option<String> {
    v.and_then(|v| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned()))
}

#[tokio::test]
async fn created_ids_are_above_the_configured_ones_and_never_reused() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let l = link(&redis).await;
    let a = Arc::new(TableRegistry::new(l.clone(), "herald", "a"));
    assert_eq!(a.create(5, 2, b"{\"game\":\"holdem\"}").await.unwrap(), 6);
    // Twenty creates at once from two nodes: 40 distinct ids, 8..=47.
    let b = Arc::new(TableRegistry::new(link(&redis).await, "herald", "b"));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let r = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(
            async move { r.create(5, 2, b"{}").await.unwrap() },
        ));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        let first = t.await.unwrap();
        assert!(ids.insert(first) && ids.insert(first + 1), "{first} twice");
    }
    assert_eq!(ids, (8..=47).collect());
    let v0 = a.version().await.unwrap();
    let (listed, deleted) = a.list().await.unwrap();
    assert_eq!(listed.len(), 42);
    assert!(deleted.is_empty());
    // A deleted id is not handed out again either.
    assert!(matches!(
        a.delete(47, 5).await.unwrap(),
        Deletion::Deleted { holder: None }
    ));
    assert!(a.version().await.unwrap() > v0);
    assert_eq!(a.create(5, 1, b"{}").await.unwrap(), 48);
}

#[tokio::test]
async fn a_deleted_table_is_never_claimed_again() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let l = link(&redis).await;
    let reg = TableRegistry::new(l.clone(), "herald", "a");
    let owner = TableStore::new(l.clone(), "herald", "a");
    let other = TableStore::new(link(&redis).await, "herald", "b");
    // Unknown ids: 0, above the configured ones and never created.
    for id in [0, 3, 4] {
        assert_eq!(reg.delete(id, 2).await.unwrap(), Deletion::Unknown);
    }
    // Configured table 1, nobody holding it: the sentinel at once.
    assert_eq!(
        reg.delete(1, 2).await.unwrap(),
        Deletion::Deleted { holder: None }
    );
    assert_eq!(
        text(redis.command(&["GET", "herald:t:{1}:lease"])).as_deref(),
        Some(DELETED)
    );
    assert!(matches!(other.claim(1, 0, LEASE).await.unwrap(), Claim::Held(h) if h == DELETED));
    assert_eq!(reg.delete(1, 2).await.unwrap(), Deletion::Unknown);
    // The removal is in the lobby hash, numbered, with an empty entry.
    let entries = owner.lobby_entries().await.unwrap();
    let (seq, table, entry) = parse_lobby(&entries[0]).unwrap();
    assert!(seq > 0 && table == 1 && entry.is_empty());

    // Created table 3, held by node a: the lease stays a's until it
    // retires it; then nobody wins it, after any expiry.
    assert_eq!(reg.create(2, 1, b"{}").await.unwrap(), 3);
    let Claim::Won { lease, .. } = owner.claim(3, 0, LEASE).await.unwrap() else {
        panic!("not won");
    };
    let d = reg.delete(3, 2).await.unwrap();
    assert_eq!(
        d,
        Deletion::Deleted {
            holder: Some(("a".into(), lease.token))
        }
    );
    // The owner's close still saves under its lease.
    owner.save(&lease, b"closed").await.unwrap();
    assert!(reg.retire(3, lease.token).await.unwrap());
    tokio::time::sleep(LEASE * 2).await;
    assert!(matches!(other.claim(3, 0, LEASE).await.unwrap(), Claim::Held(h) if h == DELETED));
    assert!(owner.save(&lease, b"late").await.is_err());
    let (listed, deleted) = reg.list().await.unwrap();
    assert!(listed.is_empty());
    assert_eq!(
        deleted.into_iter().collect::<HashSet<_>>(),
        HashSet::from([1, 3])
    );

    // An owner whose lease another node took since refuses to retire it.
    assert_eq!(reg.create(2, 1, b"{}").await.unwrap(), 4);
    let Claim::Won { lease: old, .. } = owner.claim(4, 0, LEASE).await.unwrap() else {
        panic!("not won");
    };
    tokio::time::sleep(LEASE * 2).await;
    let Claim::Won { .. } = other.claim(4, 0, LEASE).await.unwrap() else {
        panic!("not won");
    };
    reg.delete(4, 2).await.unwrap();
    assert!(!reg.retire(4, old.token).await.unwrap());
}

#[tokio::test]
async fn redis_down_is_an_error_not_a_hang() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let reg = TableRegistry::new(link(&redis).await, "herald", "a");
    redis.kill();
    assert!(reg.create(0, 1, b"{}").await.is_err());
    assert!(reg.delete(1, 1).await.is_err());
    assert!(reg.list().await.is_err());
}

/// With a [`SaveWait`], a creation is answered once the replica has it:
/// on the replica at once; with the replica stopped, it waits out the
/// timeout, is made anyway and is counted short. Without one, it does not
/// wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_wait_for_the_replica_when_asked() {
    use herald_redis::tables::SaveWait;
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let Some(replica) = RedisServer::start_replica_of(redis.port) else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text(replica.command(&["INFO", "replication"]))
        .is_some_and(|i| i.contains("master_link_status:up"))
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wait = Arc::new(SaveWait::new(
        1,
        Duration::from_millis(500),
        link(&redis).await,
    ));
    let waiting = TableRegistry::new(link(&redis).await, "herald", "a").with_wait(wait.clone());
    let id = waiting.create(0, 1, b"{}").await.unwrap().to_string();
    let on_replica = replica.command(&["HEXISTS", "herald:tables", &id]);
    assert_eq!(on_replica.and_then(|v| v.int()), Some(1));
    assert_eq!(wait.short(), 0);

    replica.freeze(true);
    let sent = Instant::now();
    waiting.create(0, 1, b"{}").await.unwrap();
    let waited = sent.elapsed();
    let plain = TableRegistry::new(link(&redis).await, "herald", "b");
    let sent = Instant::now();
    plain.create(0, 1, b"{}").await.unwrap();
    let unwaited = sent.elapsed();
    replica.freeze(false);
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    assert_eq!(wait.short(), 1);
    assert!(unwaited < Duration::from_millis(450), "{unwaited:?}");
}
