//! A node's table leases are renewed together (decision 0009): one store
//! call per renewal period for all of the node's tables, not one per table,
//! and the leases hold (nobody else can claim them) however long the tables
//! run. Real `redis-server`; the store is wrapped to count its calls.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use herald_game::durable::{BoxFuture, Claimed, Durability, Lease, StoreError};
use herald_game::{Engine, EngineConfig, EngineError, TableSpec};
use herald_redis::conn::{Link, Target};
use herald_redis::lua;
use herald_redis::tables::TableStore;
use herald_redis::testing::RedisServer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Redis store, counting renewals.
struct Counting {
    inner: TableStore,
    single: AtomicU64,
    batches: AtomicU64,
}

impl herald_game::durable::TableStore for Counting {
    fn node(&self) -> &str {
        herald_game::durable::TableStore::node(&self.inner)
    }
    fn claim(
        &self,
        table: u64,
        floor: u64,
        lease: Duration,
    ) -> BoxFuture<'_, Result<Claimed, StoreError>> {
        herald_game::durable::TableStore::claim(&self.inner, table, floor, lease)
    }
    fn save(&self, lease: Lease, record: Bytes) -> BoxFuture<'_, Result<u64, StoreError>> {
        herald_game::durable::TableStore::save(&self.inner, lease, record)
    }
    fn save_all(
        &self,
        saves: Vec<(Lease, Bytes)>,
    ) -> BoxFuture<'_, Result<Vec<Result<u64, StoreError>>, StoreError>> {
        herald_game::durable::TableStore::save_all(&self.inner, saves)
    }
    fn renew(&self, lease: Lease, time: Duration) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.single.fetch_add(1, Ordering::Relaxed);
        herald_game::durable::TableStore::renew(&self.inner, lease, time)
    }
    fn renew_all(
        &self,
        leases: Vec<Lease>,
        time: Duration,
    ) -> BoxFuture<'_, Result<Vec<Lease>, StoreError>> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        herald_game::durable::TableStore::renew_all(&self.inner, leases, time)
    }
}

fn spec() -> TableSpec {
    TableSpec {
        game: "holdem".into(),
        seats: 3,
        timing: "super-express".into(),
        path: None,
        params: serde_json::Map::new(),
    }
}

async fn store(url: &str, node: &str) -> TableStore {
    let link = Link::start(
        Target::parse(url).unwrap(),
        lua::setup(),
        Duration::from_secs(2),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !link.is_up() {
        assert!(Instant::now() < deadline, "no redis");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    TableStore::new(link, "herald", node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_of_a_nodes_leases_are_renewed_in_one_call() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let lease = Duration::from_millis(300);
    let counting = Arc::new(Counting {
        inner: store(&redis.url(), "a").await,
        single: AtomicU64::new(0),
        batches: AtomicU64::new(0),
    });
    let engine = Engine::with_durability(
        EngineConfig::default(),
        vec![herald_holdem::factory()],
        Durability {
            store: counting.clone(),
            lease,
        },
    );
    for t in 1..=5 {
        engine.claim_table(t, &spec()).await.unwrap();
    }
    // Ten lease periods: without renewals every lease would have expired.
    tokio::time::sleep(lease * 10).await;
    let other = Engine::with_durability(
        EngineConfig::default(),
        vec![herald_holdem::factory()],
        Durability {
            store: Arc::new(store(&redis.url(), "b").await),
            lease,
        },
    );
    for t in 1..=5 {
        let r = other.claim_table(t, &spec()).await;
        assert!(matches!(r, Err(EngineError::Held(..))), "table {t}: {r:?}");
    }
    let batches = counting.batches.load(Ordering::Relaxed);
    let single = counting.single.load(Ordering::Relaxed);
    // One call per third of the lease for the five tables together (about
    // 30 in ten periods), never one per table.
    assert!(batches >= 10, "{batches} batched renewals");
    assert_eq!(single, 0, "per-table renewals");
    assert_eq!(engine.leases().len(), 5);
}
