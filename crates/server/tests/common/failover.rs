//! The fan-out check through a Redis fail-over, shared by the Sentinel
//! (`cluster_sentinel.rs`) and Redis Cluster (`cluster_rediscluster.rs`)
//! tests: subscribers to `feed` that resubscribe after each 3004, a
//! publisher that disturbs Redis after 30 acknowledged publications, and
//! the check that every subscriber got every publication or was told to
//! resynchronise, with one message per (epoch, offset). And the two
//! files' other helpers: a node on a broker URL, `/api/tables` owners,
//! presence members.

#![allow(clippy::unwrap_used, dead_code)]

use crate::common::{http, json_client, request, subscribe_retrying, Ws};
use futures_util::StreamExt;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

/// One stretch of a subscriber's life: from a subscribe reply to a 3004
/// (or the end), in one epoch.
#[derive(Debug, Clone)]
pub struct Segment {
    pub epoch: String,
    /// The subscribe reply's `recovered`.
    pub recovered: bool,
    /// The position the stretch starts after.
    pub start: u64,
    /// What it received, in order: (offset, data).
    pub got: Vec<(u64, Value)>,
}

/// Subscribes to `feed` (recovering after the first time), retrying 114.
pub async fn subscribe_feed(addr: SocketAddr, recover: Option<(&str, u64)>) -> (Ws, Segment) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut ws = json_client(addr).await;
        let mut sub = json!({"channel": "feed"});
        if let Some((e, o)) = recover {
            sub["recover"] = json!({"epoch": e, "offset": o});
        }
        let r = request(&mut ws, json!({"id": 2, "subscribe": sub})).await;
        if let Some(s) = r["subscribe"].as_object() {
            let recovered = s.get("recovered").and_then(Value::as_bool) == Some(true);
            let mut seg = Segment {
                epoch: s["epoch"].as_str().unwrap().to_string(),
                recovered,
                start: recover.map_or(s["offset"].as_u64().unwrap(), |r| r.1),
                got: Vec::new(),
            };
            if !recovered {
                seg.start = s["offset"].as_u64().unwrap();
            }
            for p in s
                .get("publications")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if recovered {
                    seg.got
                        .push((p["offset"].as_u64().unwrap(), p["data"].clone()));
                }
            }
            return (ws, seg);
        }
        assert_eq!(r["error"]["code"], 114, "{r}");
        assert!(Instant::now() < deadline, "never subscribed: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A subscriber to `feed` that resubscribes after each 3004, until it has
/// `done`'s position.
pub async fn subscriber(
    addr: SocketAddr,
    mut done: watch::Receiver<Option<(String, u64)>>,
) -> Vec<Segment> {
    let (mut ws, seg) = subscribe_feed(addr, None).await;
    let mut segs = vec![seg];
    loop {
        let finished = |segs: &Vec<Segment>, target: &Option<(String, u64)>| {
            let (Some(seg), Some((e, o))) = (segs.last(), target) else {
                return false;
            };
            seg.epoch == *e && seg.got.last().map_or(seg.start, |p| p.0) >= *o
        };
        if finished(&segs, &done.borrow()) {
            return segs;
        }
        let msg = tokio::select! {
            m = ws.next() => m,
            _ = done.changed() => continue,
            _ = tokio::time::sleep(Duration::from_secs(40)) => panic!("subscriber stuck: {segs:?}"),
        };
        match msg {
            Some(Ok(Message::Text(t))) => {
                let m: Value = serde_json::from_str(t.as_str()).unwrap();
                if m["pub"]["channel"] == "feed" {
                    segs.last_mut().unwrap().got.push((
                        m["pub"]["offset"].as_u64().unwrap(),
                        m["pub"]["data"].clone(),
                    ));
                }
            }
            Some(Ok(Message::Close(frame))) => {
                let code: u16 = frame.map(|f| f.code.into()).unwrap_or(0);
                assert_eq!(code, 3004, "closed with {code}");
                let last = segs.last().unwrap();
                let pos = (
                    last.epoch.clone(),
                    last.got.last().map_or(last.start, |p| p.0),
                );
                let (w, seg) = subscribe_feed(addr, Some((&pos.0, pos.1))).await;
                ws = w;
                segs.push(seg);
            }
            Some(Ok(_)) => {}
            other => panic!("subscriber connection ended: {other:?}"),
        }
    }
}

/// Checks what the subscribers saw against the acknowledged publications:
/// no gap within a stretch, one message per (epoch, offset), a stretch
/// after a 3004 recovered in the same epoch or told it was not, and the
/// last stretch holding every acknowledged publication after its start.
/// Returns how many were told to resynchronise.
pub fn check(all: &[Vec<Segment>], acked: &[(String, u64, i64)]) -> usize {
    let mut seen: HashMap<(String, u64), Value> = HashMap::new();
    for (e, o, d) in acked {
        seen.insert((e.clone(), *o), json!(d));
    }
    let mut told = 0;
    for segs in all {
        for (i, seg) in segs.iter().enumerate() {
            let offsets: Vec<u64> = seg.got.iter().map(|p| p.0).collect();
            let want: Vec<u64> = (seg.start + 1..=seg.start + offsets.len() as u64).collect();
            assert_eq!(offsets, want, "a gap in {seg:?}");
            for (o, d) in &seg.got {
                let prev = seen.insert((seg.epoch.clone(), *o), d.clone());
                assert!(
                    prev.as_ref().is_none_or(|p| p == d),
                    "two messages at {}:{o}: {prev:?} and {d}",
                    seg.epoch
                );
            }
            if i > 0 {
                if seg.recovered {
                    assert_eq!(seg.epoch, segs[i - 1].epoch);
                } else {
                    told += 1;
                }
            }
        }
        let seg = segs.last().unwrap();
        for (e, o, d) in acked {
            if *e == seg.epoch && *o > seg.start {
                assert!(
                    seg.got.contains(&(*o, json!(d))),
                    "acknowledged {e}:{o} = {d} missing from {seg:?}"
                );
            }
        }
    }
    told
}

/// Publishes `feed` through `addr` until `after` more were acknowledged
/// after `disturb` ran (called once 30 were); returns the
/// acknowledgements and how many publishes were refused (114).
pub async fn publish_through(
    addr: SocketAddr,
    after: usize,
    mut disturb: impl FnMut(),
) -> (Vec<(String, u64, i64)>, u32) {
    let mut publisher = json_client(addr).await;
    let mut acked: Vec<(String, u64, i64)> = Vec::new();
    let (mut refused, mut disturbed_at) = (0u32, None);
    let started = Instant::now();
    let mut n: i64 = 0;
    while disturbed_at.is_none_or(|k| acked.len() < k + after) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "publishing never resumed"
        );
        n += 1;
        let r = request(
            &mut publisher,
            json!({"id": 3, "publish": {"channel": "feed", "data": n}}),
        )
        .await;
        match r["publish"].as_object() {
            Some(p) => acked.push((
                p["epoch"].as_str().unwrap().to_string(),
                p["offset"].as_u64().unwrap(),
                n,
            )),
            None => {
                assert_eq!(r["error"]["code"], 114, "{r}");
                refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if acked.len() == 30 && disturbed_at.is_none() {
            disturb();
            disturbed_at = Some(acked.len());
        }
    }
    (acked, refused)
}

/// A node on broker `url`, everything else default.
pub fn node(url: &str) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(url.to_string()),
        ..ServeArgs::default()
    })
}

/// A `GET` of `path`: its status and body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = http(addr, "GET", path, &[], "").await;
    (status, body)
}

/// The tables `addr` owns (`/api/tables` entries with an `owner`).
pub async fn owned(addr: SocketAddr) -> Vec<Value> {
    let (status, body) = get(addr, "/api/tables").await;
    if status != 200 {
        return Vec::new();
    }
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let all = v["tables"].as_array().cloned().unwrap_or_default();
    all.into_iter().filter(|t| t["owner"].is_object()).collect()
}

/// The client ids `presence` lists for `channel`, sorted (`None`: an
/// error).
pub async fn presence_of(ws: &mut Ws, id: u32, channel: &str) -> Option<Vec<String>> {
    let r = request(ws, json!({"id": id, "presence": {"channel": channel}})).await;
    let list = r["presence"]["clients"].as_array()?;
    let mut ids: Vec<String> = list
        .iter()
        .filter_map(|c| c["client"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    Some(ids)
}

/// A JSON client on `addr` subscribed to `channel`, and its client id.
pub async fn member_of(addr: SocketAddr, channel: &str) -> (Ws, String) {
    let mut ws = crate::common::connect(addr, "/ws", Some("herald.json")).await;
    let r = request(&mut ws, json!({"id": 1, "connect": {}})).await;
    let id = r["connect"]["client"].as_str().unwrap().to_string();
    subscribe_retrying(&mut ws, 2, json!({"channel": channel})).await;
    (ws, id)
}
