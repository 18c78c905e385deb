//! Plain HTTP endpoints, served by hyper over HTTP/1.1 and HTTP/2 (h2c with
//! prior knowledge): the health checks, the node list and the server-side
//! publish API.
//!
//! `POST /api/publish` with `{"channel": "...", "data": <any JSON>}` (or
//! `"b64": "<base64>"` for binary payloads) publishes exactly as a WebSocket
//! client would and answers `200 {"epoch": "...", "offset": N}`. Errors answer
//! with an HTTP status and the protocol's numbered code:
//! `{"error": {"code": C, "message": "..."}}`. With no configuration the API
//! accepts every request on the listener, which binds 127.0.0.1 by default;
//! once an `api_key` is configured, every `/api/*` request must carry
//! `Authorization: apikey KEY` (else 401, code 101).
//!
//! `GET /api/nodes` lists the cluster's nodes with their stats (clients,
//! by transport too, channels, publications, deliveries, uptime, memory,
//! the Redis link, fan-out buckets: [`crate::admin::stats`]) as of the
//! last heartbeat.
//!
//! `GET /healthz` answers 200 while the process runs; `GET /readyz` answers 200
//! when the node can serve (broker healthy, not shutting down) and 503
//! otherwise. In a cluster both `/readyz` (a second line) and `/api/nodes`
//! (`"redis"`) also say which Redis master the node uses and how many
//! Sentinel fail-overs it has seen (decision 0020).
//!
//! Routing, the API key and the Origin allowlist are the HTTP layer's
//! ([`crate::http::service`]); each handler here takes only [`Api`], and
//! reads its body with [`crate::respond::read_body`] (bounded in size and time).

use crate::respond::{error, json, read_body, text, Body, BodyError};
use bytes::Bytes;
use herald_core::{channel, Completion, Node};
use herald_proto::ErrorCode;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the plain endpoints take.
#[derive(Debug)]
pub struct Api {
    /// The node: broker, hub, metrics.
    pub node: Arc<Node>,
    /// The Redis broker in cluster mode (its node list).
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// Where this node listens (shown in `/api/nodes`).
    pub listen: SocketAddr,
    /// Largest publication accepted (`max_message_size`).
    pub max_message_size: usize,
    /// How long a request body may take (`request_body_timeout`).
    pub request_body_timeout: Duration,
    /// Cancelled when shutdown starts (`/readyz` answers 503 from then on).
    pub stopping: CancellationToken,
    /// This node's stats, as a cluster node's heartbeat reports them.
    pub stats: Arc<crate::admin::stats::StatsSource>,
}

/// `GET /healthz`: 200 while the process runs.
pub fn health() -> Response<Body> {
    text(StatusCode::OK, "ok\n")
}

/// `GET /readyz`: 200 when the node can serve, else 503.
pub fn ready(api: &Api) -> Response<Body> {
    let (status, first) = if api.stopping.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else if !api.node.broker.healthy() {
        (StatusCode::SERVICE_UNAVAILABLE, "broker unavailable")
    } else {
        (StatusCode::OK, "ready")
    };
    match &api.cluster {
        None => text(status, format!("{first}\n")),
        Some(c) => {
            let r = c.redis_status();
            let masters = c.cluster_masters();
            if r.mode == "cluster" {
                let mut body = format!(
                    "{first}\nredis cluster: {} masters ({} fail-overs seen)\n",
                    masters.len(),
                    r.failovers
                );
                for m in &masters {
                    body.push_str(&format!(
                        "redis master {} slots {} config epoch {}\n",
                        m.addr,
                        slot_ranges(&m.slots),
                        m.epoch
                    ));
                }
                return text(status, body);
            }
            let mut body = format!(
                "{first}\nredis {} master {} ({} fail-overs seen)\n",
                r.mode,
                r.master.as_deref().unwrap_or("unknown"),
                r.failovers
            );
            if let Some(p) = r.problem {
                body.push_str(&format!("redis {}: {p}\n", r.mode));
            }
            text(status, body)
        }
    }
}

/// `0-5460,7000` from inclusive slot ranges.
fn slot_ranges(ranges: &[(u16, u16)]) -> String {
    let parts: Vec<String> = ranges
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

/// `GET /api/nodes`: the nodes of the cluster as of this node's last
/// heartbeat, each with its stats; in memory mode, this node alone.
pub fn nodes(api: &Api) -> Response<Body> {
    let body = match &api.cluster {
        Some(c) => {
            let nodes: Vec<serde_json::Value> = c
                .nodes()
                .into_iter()
                .map(|n| {
                    serde_json::json!({
                        "id": n.id,
                        "self": n.id == c.node_id(),
                        "last_seen_ms": n.last_seen_ms,
                        "stats": n.stats,
                    })
                })
                .collect();
            let r = c.redis_status();
            let masters: Vec<serde_json::Value> = c
                .cluster_masters()
                .into_iter()
                .map(|m| {
                    serde_json::json!({
                        "addr": m.addr,
                        "slots": m.slots.iter().map(|(a, b)| [a, b]).collect::<Vec<_>>(),
                        "config_epoch": m.epoch,
                    })
                })
                .collect();
            serde_json::json!({
                "broker": "redis",
                "node": c.node_id(),
                "redis": {
                    "mode": r.mode,
                    "master": r.master,
                    "failovers": r.failovers,
                    "config_epoch": r.epoch,
                    "masters": masters,
                },
                "nodes": nodes,
            })
        }
        None => serde_json::json!({
            "broker": "memory",
            "node": "",
            "nodes": [{
                "id": "",
                "self": true,
                "last_seen_ms": 0,
                "stats": api.stats.stats(),
            }],
        }),
    };
    json(StatusCode::OK, body.to_string().into_bytes())
}

#[derive(Deserialize)]
struct PublishBody<'a> {
    channel: String,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    b64: Option<String>,
}

/// `POST /api/publish`: publishes as a WebSocket client would.
pub async fn publish(req: Request<Incoming>, api: &Api) -> Response<Body> {
    // The body holds the payload plus the envelope: allow some room for it.
    let limit = api.max_message_size + 1024;
    let body = match read_body(req.into_body(), limit, api.request_body_timeout).await {
        Ok(b) => b,
        Err(e) => {
            if matches!(e, BodyError::TooLarge(_)) {
                api.node
                    .metrics
                    .dropped(herald_core::metrics::Drop::TooLarge, 1);
            }
            return e.response();
        }
    };
    let parsed: PublishBody<'_> = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                &format!("expected {{\"channel\": ..., \"data\": ...}}: {e}"),
            )
        }
    };
    let data = match (parsed.data, parsed.b64) {
        (Some(raw), None) => body.slice_ref(raw.get().as_bytes()),
        (None, Some(b64)) => {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(d) => Bytes::from(d),
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::BadRequest,
                        "invalid b64",
                    )
                }
            }
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "give exactly one of data and b64",
            )
        }
    };
    if data.len() > api.max_message_size {
        api.node
            .metrics
            .dropped(herald_core::metrics::Drop::TooLarge, 1);
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::MessageTooLarge,
            "data larger than the maximum message size",
        );
    }
    if let Err(code) = channel::validate(&parsed.channel) {
        return error(StatusCode::BAD_REQUEST, code, "invalid channel name");
    }
    api.node.metrics.publications.inc();
    let result = match api.node.broker.publish(&parsed.channel, data) {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    };
    match result {
        Ok(pos) => json(
            StatusCode::OK,
            serde_json::json!({"epoch": pos.epoch, "offset": pos.offset})
                .to_string()
                .into_bytes(),
        ),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BrokerUnavailable,
            &e.to_string(),
        ),
    }
}
