//! A poker player over WebSocket JSON at table 1, shared by the cluster game
//! tests (`game_cluster.rs`, `game_routes.rs`, `game_cluster_http.rs`,
//! `game_lobby.rs`), how to find which node runs table 1 and count its
//! chips, and the arguments of a cluster node running Hold'em tables.
#![allow(dead_code)]

use crate::common::*;
use herald_server::config::TableConfig;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A cluster node's arguments: Redis at `url`, `role`, tokens signed with
/// `secret`, a 500 ms table lease, and `count` three-seat super-express
/// Hold'em tables with the game parameters `params` (ids 1..=count).
pub fn cluster_args(
    url: &str,
    role: &str,
    secret: &str,
    count: u32,
    params: Map<String, Value>,
) -> ServeArgs {
    ServeArgs {
        broker: Some(url.to_string()),
        role: Some(role.into()),
        token_hmac_secret: Some(secret.into()),
        table_lease: Some(500),
        tables: vec![TableConfig {
            game: "holdem".into(),
            count,
            seats: 3,
            timing: "super-express".into(),
            path: None,
            params,
        }],
        ..ServeArgs::default()
    }
}

/// Hold'em parameters for a dealt-in-order test hand: a seeded deck,
/// `action_ms` per turn, a 1 s pause between hands, 50 ms between streets.
pub fn seeded(action_ms: u64) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("seed".into(), json!(11));
    params.insert("action_ms".into(), json!(action_ms));
    params.insert("hand_ms".into(), json!(1_000));
    params.insert("street_ms".into(), json!(50));
    params
}

/// A player's WebSocket (JSON).
pub struct Player {
    pub ws: Ws,
}

impl Player {
    /// Connects to `addr` with `token` and checks the connect reply.
    pub async fn connect(addr: SocketAddr, token: &str) -> Player {
        let (ws, r) = connect_with_token(addr, Some(token)).await;
        assert!(r["connect"].is_object(), "{r}");
        Player { ws }
    }

    /// The next message matching `pred`.
    pub async fn wait(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "no {what}");
            let m = recv_json(&mut self.ws).await;
            if pred(&m) {
                return m;
            }
        }
    }

    /// The data of the next game event of type `t`.
    pub async fn game_event(&mut self, t: &str) -> Value {
        let m = self.wait(t, |m| m["game"]["data"]["t"] == t).await;
        m["game"]["data"].clone()
    }

    /// Sits at table 1 with command `id`; the reply, or the error.
    pub async fn sit(&mut self, id: u32) -> Value {
        send_json(&mut self.ws, json!({"id": id, "sit": {"table": 1}})).await;
        self.wait("sit reply", |m| m["id"] == id).await
    }

    /// Acts at table 1 with command `id`; the reply must be an `act`.
    pub async fn act(&mut self, id: u32, a: Value) {
        send_json(
            &mut self.ws,
            json!({"id": id, "act": {"table": 1, "data": a}}),
        )
        .await;
        let r = self.wait("act reply", |m| m["id"] == id).await;
        assert!(r["act"].is_object(), "{r}");
    }
}

/// `GET path` on `n`: 200 and its JSON.
pub async fn get(n: &NodeHandle, path: &str) -> Value {
    let (status, _, body) = http(n.addr, "GET", path, &[], "").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON")
}

/// Whether `n` runs table 1 (its `/api/tables` entry has an owner).
pub async fn runs(n: &NodeHandle) -> bool {
    get(n, "/api/tables").await["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["table"] == 1 && t["owner"].is_object())
}

/// Which of `nodes` runs table 1, waiting until one does.
pub async fn owner(nodes: &[&NodeHandle]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if runs(n).await {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "nobody claimed table 1");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn chips(state: &Value) -> u64 {
    state["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| s["stack"].as_u64().expect("stack"))
        .sum::<u64>()
        + state["pot"].as_u64().expect("pot")
}
