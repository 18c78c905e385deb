//! A poker player over WebSocket JSON at table 1, shared by the cluster game
//! tests (`game_cluster.rs`, `game_routes.rs`).
#![allow(dead_code)]

use crate::common::*;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

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
