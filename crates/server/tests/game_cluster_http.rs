//! `POST /api/tables` in a cluster (decision 0009, "Not built"): refused
//! with 409 and code 111, creating nothing, rather than a table in one
//! node's memory whose id may be a configured table's that another node
//! runs (the node's own id counter only skips the ids it claimed). Real
//! nodes, real `redis-server`.
mod common;

use common::*;
use herald_redis::testing::RedisServer;
use herald_server::config::TableConfig;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn node(redis: &RedisServer) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        allow_anonymous: Some(true),
        table_lease: Some(500),
        tables: vec![TableConfig {
            game: "holdem".into(),
            count: 2,
            seats: 3,
            timing: "super-express".into(),
            path: None,
            params: serde_json::Map::new(),
        }],
        ..ServeArgs::default()
    })
}

async fn table_ids(n: &NodeHandle) -> Vec<u64> {
    let (status, _, body) = http(n.addr, "GET", "/api/tables", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let mut ids: Vec<u64> = v["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["table"].as_u64())
        .collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_cannot_be_created_over_http_in_a_cluster() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let n = node(&redis);
    // The configured tables are claimed and listed.
    let deadline = Instant::now() + Duration::from_secs(15);
    while table_ids(&n).await != [1, 2] {
        assert!(
            Instant::now() < deadline,
            "tables: {:?}",
            table_ids(&n).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = json!({"game": "holdem", "seats": 6, "timing": "express"}).to_string();
    let (status, _, reply) = http(n.addr, "POST", "/api/tables", &[], &body).await;
    assert_eq!(status, 409, "{reply}");
    let v: Value = serde_json::from_str(&reply).expect("JSON");
    assert_eq!(v["error"]["code"], 111, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("[[tables]]")),
        "{v}"
    );
    // Nothing was created.
    assert_eq!(table_ids(&n).await, [1, 2]);
}
