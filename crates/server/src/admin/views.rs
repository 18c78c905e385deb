//! What the dashboard's pages read, as JSON: the nodes, channels,
//! connections, tables and Pusher apps. Nothing secret is ever in it: no
//! API key, token secret or app secret is read here at all (Pusher apps show
//! their public key; `tests/admin.rs` checks every view for the secrets it
//! configured).
//!
//! Every list is bounded ([`MAX_ROWS`]); channels and connections are this
//! node's (the hub knows its own subscribers), presence and history the
//! cluster's (they live in the broker).

use super::stats::StatsSource;
use herald_core::{Completion, Node};
use serde_json::{json, Value};
use std::sync::Arc;

/// Most rows a list answers with.
pub const MAX_ROWS: usize = 200;
/// Most channels scanned for one connection's subscriptions.
pub const MAX_SCAN: usize = 10_000;
/// Most connections of one search whose subscriptions are listed (each
/// costs a look at up to [`MAX_SCAN`] channels).
pub const MAX_DETAILED: usize = 20;
/// Most history items shown for a channel (the latest).
pub const HISTORY: usize = 20;
/// Most bytes of a publication shown.
const PREVIEW: usize = 1024;

/// The Nodes page's snapshot: every node of the cluster with its stats (as
/// of its last heartbeat; this node's fresh), or this node alone.
pub fn nodes(source: &StatsSource, cluster: Option<&herald_redis::RedisBroker>) -> Value {
    let mine = source.stats();
    let nodes: Vec<Value> = match cluster {
        Some(c) => {
            let me = c.node_id();
            let mut list: Vec<Value> = c
                .nodes()
                .into_iter()
                .filter(|n| n.id != me)
                .map(|n| json!({"id": n.id, "self": false, "last_seen_ms": n.last_seen_ms, "stats": n.stats}))
                .collect();
            list.push(json!({"id": me, "self": true, "last_seen_ms": 0, "stats": mine}));
            list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
            list
        }
        None => vec![json!({"id": "", "self": true, "last_seen_ms": 0, "stats": mine})],
    };
    json!({
        "broker": if cluster.is_some() { "redis" } else { "memory" },
        "at_ms": super::stats::unix_ms(),
        "fanout_le": super::stats::fanout_bounds(),
        "nodes": nodes,
    })
}

/// Whether `name` matches `pattern`: `*` matches any run of characters
/// (empty included); without a `*`, a substring match.
pub fn matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.len() >= part.len() && rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// This node's channels (with a local subscriber) matching `q`, with their
/// local subscriber counts, sorted, at most [`MAX_ROWS`].
pub fn channels(node: &Node, q: &str) -> Value {
    let mut names: Vec<Arc<str>> = node
        .hub
        .channels()
        .into_iter()
        .filter(|c| matches(q, c))
        .collect();
    names.sort();
    let total = names.len();
    let rows: Vec<Value> = names
        .iter()
        .take(MAX_ROWS)
        .map(|c| json!({"channel": &**c, "subscribers": node.hub.subscriber_count(c)}))
        .collect();
    json!({"channels": rows, "total": total, "truncated": total > MAX_ROWS})
}

/// Text for a publication's bytes: UTF-8 (lossy), at most [`PREVIEW`] bytes.
fn preview(data: &[u8]) -> String {
    let cut = &data[..data.len().min(PREVIEW)];
    String::from_utf8_lossy(cut).into_owned()
}

/// One channel: local subscribers, presence members (the cluster's) and
/// its latest history.
pub async fn channel(node: &Node, name: &str) -> Value {
    let presence = match node.presence.list(name) {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    };
    let members: Value = match presence {
        Ok(list) => list
            .iter()
            .take(MAX_ROWS)
            .map(|m| json!({"client": m.client, "user": m.user}))
            .collect(),
        Err(e) => json!({"error": e.to_string()}),
    };
    let history = match node.broker.history(name, None, 0) {
        Completion::Ready(r) => r,
        Completion::Pending(f) => f.await,
    };
    let history: Value = match history {
        Ok(h) => {
            let skip = h.publications.len().saturating_sub(HISTORY);
            let items: Vec<Value> = h.publications[skip..]
                .iter()
                .map(|p| json!({"offset": p.offset, "data": preview(&p.data), "bytes": p.data.len()}))
                .collect();
            json!({"epoch": h.top.epoch, "offset": h.top.offset, "items": items})
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    json!({
        "channel": name,
        "subscribers": node.hub.subscriber_count(name),
        "presence": members,
        "history": history,
    })
}

/// What kind of connection a client is, as far as the hub can tell.
fn kind(c: &herald_core::Client) -> &'static str {
    if c.raw {
        "sse"
    } else if c.render.is_some() {
        "rendered (pusher or bayeux)"
    } else {
        "herald (websocket, tcp or long-polling)"
    }
}

/// The channels `id` is subscribed to on this node (at most [`MAX_SCAN`]
/// channels looked at), and whether the scan was cut short.
fn subscriptions(node: &Node, channels: &[Arc<str>], id: u64) -> (Vec<String>, bool) {
    let cut = channels.len() > MAX_SCAN;
    let mut out: Vec<String> = channels
        .iter()
        .take(MAX_SCAN)
        .filter(|c| node.hub.is_subscribed(c, id))
        .map(|c| c.to_string())
        .collect();
    out.sort();
    out.truncate(MAX_ROWS);
    (out, cut)
}

/// This node's connections of user `user` or client `client` (hex id).
pub fn connections(node: &Node, user: Option<&str>, client: Option<u64>) -> Value {
    let mut found = Vec::new();
    node.for_each_client(|c| {
        if found.len() >= MAX_ROWS {
            return;
        }
        let hit = match (client, user) {
            (Some(id), _) => c.id == id,
            (None, Some(u)) => c.user() == u,
            (None, None) => false,
        };
        if hit {
            found.push(c.clone());
        }
    });
    let now = node.now();
    let channels = node.hub.channels();
    let rows: Vec<Value> = found
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (subs, cut) = if i < MAX_DETAILED {
                subscriptions(node, &channels, c.id)
            } else {
                (Vec::new(), true)
            };
            json!({
                "client": c.wire_id(),
                "user": c.user(),
                "connected": c.is_connected(),
                "kind": kind(c),
                "encoding": format!("{:?}", c.encoding).to_lowercase(),
                "idle_s": now.saturating_sub(c.last_seen()),
                "subscriptions": subs,
                "subscriptions_truncated": cut,
            })
        })
        .collect();
    json!({"connections": rows})
}

/// The client with wire id `id` on this node, if connected here.
pub fn find_client(node: &Node, id: u64) -> Option<Arc<herald_core::Client>> {
    let mut found = None;
    node.for_each_client(|c| {
        if c.id == id {
            found = Some(c.clone());
        }
    });
    found
}

/// Every Pusher app: its id, public key and namespace, this node's
/// connections and its channels with local subscribers. No secret.
pub fn pusher(node: &Node, apps: &crate::pusher::Apps) -> Value {
    let channels = node.hub.channels();
    let rows: Vec<Value> = apps
        .all()
        .iter()
        .map(|app| {
            let render = Arc::as_ptr(&app.render) as *const ();
            let mut connections = 0usize;
            node.for_each_client(|c| {
                if c.render
                    .as_ref()
                    .is_some_and(|r| Arc::as_ptr(r) as *const () == render)
                {
                    connections += 1;
                }
            });
            let mut mine: Vec<Value> = channels
                .iter()
                .filter_map(|c| {
                    let name = herald_pusher::channel::from_herald(&app.config.namespace, c)?;
                    Some(json!({"channel": name, "subscribers": node.hub.subscriber_count(c)}))
                })
                .take(MAX_ROWS)
                .collect();
            mine.sort_by(|a, b| a["channel"].as_str().cmp(&b["channel"].as_str()));
            json!({
                "id": app.config.id,
                "key": app.config.key,
                "namespace": app.config.namespace,
                "connections": connections,
                "channels": mine,
            })
        })
        .collect();
    json!({"apps": rows})
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_and_substrings() {
        assert!(matches("chat", "room.chat.1"));
        assert!(!matches("chat", "room"));
        assert!(matches("room.*", "room.1"));
        assert!(matches("room.*", "room."));
        assert!(!matches("room.*", "xroom.1"));
        assert!(matches("*.1", "room.1"));
        assert!(!matches("*.1", "room.12"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXcYYb"));
        assert!(matches("*", ""));
        assert!(matches("", "anything"));
        assert!(matches("ab*ab", "abab"));
        assert!(!matches("ab*ab", "aba"));
    }
}
