//! Game tables' leases and fenced saves against a real `redis-server`
//! (decision 0009): one winner when nodes claim a table at once, a stale
//! owner (paused past its lease, or cut off from Redis) cannot write over
//! its successor, an edge's batched owner lookup agrees with the single one, tokens keep growing after Redis lost its data, and an
//! unreachable Redis is an error, not a hang.

#![allow(clippy::unwrap_used, missing_docs)]

use herald_redis::conn::{Link, Target};
use herald_redis::lua;
use herald_redis::tables::{Claim, Lease, TableStore, TableStoreError};
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

/// A node's store on its own connection (as each node has its own).
async fn store(redis: &RedisServer, node: &str) -> TableStore {
    let link = Link::start(
        Target::parse(&redis.url()).unwrap(),
        lua::setup(),
        Duration::from_secs(2),
    );
    up(&link).await;
    TableStore::new(link, "herald", node)
}

fn won(c: Claim) -> Lease {
    match c {
        Claim::Won { lease, .. } => lease,
        Claim::Held(by) => panic!("held by {by}"),
    }
}

const LEASE: Duration = Duration::from_millis(300);

#[tokio::test]
async fn nodes_claiming_tables_at_once_get_one_owner_each() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let stores: Vec<Arc<TableStore>> = vec![
        Arc::new(store(&redis, "a").await),
        Arc::new(store(&redis, "b").await),
        Arc::new(store(&redis, "c").await),
    ];
    // 200 tables, each claimed by the three nodes concurrently.
    let mut tasks = Vec::new();
    for table in 0..200u64 {
        for s in &stores {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                (
                    table,
                    s.node().to_string(),
                    s.claim(table, 0, Duration::from_secs(30)).await,
                )
            }));
        }
    }
    let mut winners = vec![Vec::new(); 200];
    let mut held = vec![Vec::new(); 200];
    for t in tasks {
        let (table, node, claim) = t.await.unwrap();
        match claim.unwrap() {
            Claim::Won { lease, saved, .. } => {
                assert_eq!(lease.token, 1, "the first claim of a table");
                assert_eq!(saved, None);
                winners[table as usize].push(node);
            }
            Claim::Held(by) => held[table as usize].push(by),
        }
    }
    for table in 0..200 {
        assert_eq!(
            winners[table].len(),
            1,
            "table {table}: {:?}",
            winners[table]
        );
        let w = format!("{}:1", winners[table][0]);
        assert_eq!(held[table], vec![w.clone(), w], "table {table}");
        let owner = stores[0].owner(table as u64).await.unwrap();
        assert_eq!(owner, Some((winners[table][0].clone(), 1)));
    }
    // The batched lookup (an edge's) agrees, in order, across its 512-key
    // chunks, with a table nobody claimed in the middle.
    let ids: Vec<u64> = (0..200u64).chain([999]).chain(0..400u64).collect();
    let owners = stores[1].owners(&ids).await.unwrap();
    assert_eq!(owners.len(), ids.len());
    for (t, o) in ids.iter().zip(&owners) {
        let want = (*t < 200).then(|| (winners[*t as usize][0].clone(), 1));
        assert_eq!(o, &want, "table {t}");
    }
}

/// Node a owns table 7 and saves; it then stops renewing (paused, or cut off
/// from Redis) past its lease. Node b claims with the next token and gets
/// a's last state. When a comes back, every write it tries is refused and
/// its renewal reports the lease lost; b's writes go through.
#[tokio::test]
async fn a_stale_owner_cannot_write_over_its_successor() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (store(&redis, "a").await, store(&redis, "b").await);
    let la = won(a.claim(7, 0, LEASE).await.unwrap());
    let at = a.save(&la, b"hand 3, a's state").await.unwrap();
    assert!(at > 1_600_000_000_000, "Redis's clock in ms: {at}");
    // While a renews, b cannot claim, however long it takes.
    for _ in 0..4 {
        tokio::time::sleep(LEASE / 3).await;
        assert_eq!(
            a.renew(std::slice::from_ref(&la), LEASE).await.unwrap(),
            vec![]
        );
        assert_eq!(
            b.claim(7, 0, LEASE).await.unwrap(),
            Claim::Held("a:1".into())
        );
    }
    // a goes silent past its lease.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert_eq!(a.owner(7).await.unwrap(), None);
    let Claim::Won {
        lease: lb,
        now_ms,
        saved,
    } = b.claim(7, 0, LEASE).await.unwrap()
    else {
        panic!("b could not claim an expired lease");
    };
    assert_eq!(lb.token, 2);
    let saved = saved.expect("a's state");
    assert_eq!(
        (saved.token, &saved.data[..]),
        (1, &b"hand 3, a's state"[..])
    );
    assert!(now_ms >= saved.at_ms && now_ms - saved.at_ms < 5_000);
    // a is back: fenced on every write, its renewal says the lease is lost,
    // and it cannot release b's lease either.
    let err = a.save(&la, b"a's stale write").await.unwrap_err();
    assert!(
        matches!(&err, TableStoreError::Fenced { table: 7, holder: Some(h) } if h == "b:2"),
        "{err:?}"
    );
    assert_eq!(
        a.renew(std::slice::from_ref(&la), LEASE).await.unwrap(),
        vec![la.clone()]
    );
    assert!(!a.release(&la).await.unwrap());
    assert_eq!(b.owner(7).await.unwrap(), Some(("b".into(), 2)));
    // The state is b's, untouched by a.
    b.save(&lb, b"hand 3, b's state").await.unwrap();
    let state = redis.command(&["HGET", "herald:t:{7}:state", "v"]).unwrap();
    assert_eq!(
        state.bytes().map(|b| &b[..]),
        Some(&b"hand 3, b's state"[..])
    );
    // An owner whose lease expired is fenced even when nobody else has
    // claimed the table yet.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert!(matches!(
        b.save(&lb, b"late").await,
        Err(TableStoreError::Fenced { holder: None, .. })
    ));
    // A clean release lets the next claim in at once.
    let lc = won(a.claim(7, 0, LEASE).await.unwrap());
    assert_eq!(lc.token, 3);
    assert!(a.release(&lc).await.unwrap());
    assert_eq!(won(b.claim(7, 0, LEASE).await.unwrap()).token, 4);
}

/// Renewals are per node in one call: a lease taken meanwhile is reported
/// lost among others still held.
#[tokio::test]
async fn a_renewal_reports_exactly_the_leases_lost() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (store(&redis, "a").await, store(&redis, "b").await);
    let mut leases = Vec::new();
    for t in 0..5 {
        leases.push(won(a.claim(t, 0, LEASE).await.unwrap()));
    }
    // Table 3's lease vanishes (as after expiry) and b takes it.
    redis.command(&["DEL", "herald:t:{3}:lease"]).unwrap();
    won(b.claim(3, 0, LEASE).await.unwrap());
    let lost = a.renew(&leases, Duration::from_secs(10)).await.unwrap();
    assert_eq!(lost, vec![leases[3].clone()]);
    // The others were extended: still held after the short lease.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    for t in [0, 1, 2, 4] {
        assert_eq!(a.owner(t).await.unwrap(), Some(("a".into(), 1)));
    }
    assert_eq!(a.owner(3).await.unwrap(), None, "b's short lease expired");
}

/// Redis restarted without persistence: the table's state is gone (the
/// claim says so: nothing saved), and a claim with the highest token the
/// node has seen as floor keeps tokens growing, so an owner from before the
/// restart still cannot write.
#[tokio::test]
async fn tokens_keep_growing_after_redis_lost_its_data() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (store(&redis, "a").await, store(&redis, "b").await);
    let mut la = won(a.claim(9, 0, LEASE).await.unwrap());
    for _ in 0..4 {
        assert!(a.release(&la).await.unwrap());
        la = won(a.claim(9, 0, LEASE).await.unwrap());
    }
    assert_eq!(la.token, 5);
    a.save(&la, b"state").await.unwrap();
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let claim = loop {
        match b.claim(9, 5, LEASE).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "redis never came back: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let Claim::Won {
        lease: lb, saved, ..
    } = claim
    else {
        panic!("nobody holds the lease after the restart");
    };
    assert_eq!(saved, None, "the state did not survive");
    assert_eq!(lb.token, 6, "above the floor, not 1");
    assert!(matches!(
        a.save(&la, b"stale").await,
        Err(TableStoreError::Fenced { .. })
    ));
}

#[tokio::test]
async fn redis_down_is_an_error() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = store(&redis, "a").await;
    let la = won(a.claim(1, 0, LEASE).await.unwrap());
    redis.kill();
    tokio::time::sleep(Duration::from_millis(100)).await;
    for r in [
        a.save(&la, b"x").await.map(|_| ()),
        a.claim(2, 0, LEASE).await.map(|_| ()),
        a.renew(std::slice::from_ref(&la), LEASE).await.map(|_| ()),
    ] {
        assert!(matches!(r, Err(TableStoreError::Unavailable(_))), "{r:?}");
    }
}
