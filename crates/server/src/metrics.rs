//! `GET /metrics`: the node's counters in the Prometheus text exposition format
//! (version 0.0.4), rendered on request from the atomics in
//! [`herald_core::metrics`] — nothing is kept per scrape or per message.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `herald_connections` | gauge | `transport` (websocket, tcp, sse, poll, shootout, pusher) |
//! | `herald_connections_accepted_total` | counter | `transport` |
//! | `herald_connections_refused_total` | counter | — (connection caps, Origin, handshake timeout) |
//! | `herald_hibernated_connections` | gauge | — (idle connections parked off tokio, [`crate::hibernate`]) |
//! | `herald_hibernations_total` | counter | — (times a connection parked) |
//! | `herald_hibernated_pings_total` | counter | — (heartbeat pings written to parked connections without resuming them) |
//! | `herald_hibernated_pongs_total` | counter | — (heartbeat answers read from parked connections without resuming them) |
//! | `herald_disconnects_total` | counter | `code` (the close code; 0 = closed by the client; `other`) |
//! | `herald_messages_received_total`, `herald_received_bytes_total` | counter | — |
//! | `herald_messages_sent_total`, `herald_sent_bytes_total` | counter | — (socket transports) |
//! | `herald_publications_total` | counter | — |
//! | `herald_drops_total` | counter | `reason` (rate_limit, too_large, slow_consumer, denied) |
//! | `herald_fanout_duration_seconds` | histogram | — (one publication to every local outbox) |
//! | `herald_channels`, `herald_subscriptions_patterns` | gauge | — |
//! | `herald_broker_channels` | gauge | — (in-memory broker only: channels with a kept position or history) |
//! | `herald_broker_up` | gauge | — |
//! | `herald_token_expiries_pending` | gauge | — |
//! | `herald_cluster_nodes` | gauge | — (cluster mode only, as are the next seven) |
//! | `herald_cluster_node_clients`, `herald_cluster_node_last_seen_seconds` | gauge | `node` |
//! | `herald_cluster_streams_lost_total`, `herald_cluster_gaps_filled_total` | counter | — |
//! | `herald_cluster_redis_master` | gauge | `mode` (direct, sentinel, cluster), `addr` (the master as last learned; empty before a sentinel answered; with Redis Cluster one line per master): always 1 |
//! | `herald_cluster_redis_slots` | gauge | `addr` (a master): the hash slots it serves (16384 for a single Redis; decision 0021) |
//! | `herald_cluster_redis_failovers_total` | counter | — (Sentinel fail-overs seen: rises of the master's config epoch; with Redis Cluster, replicas seen becoming masters; 0 with `redis://`) |
//! | `herald_cluster_table_saves_unreplicated_total` | counter | — (game-table saves whose `WAIT` for `--table-save-replicas` replicas timed out short or failed; 0 when saves do not wait) |
//! | `herald_game_tables`, `herald_game_players`, `herald_game_lobby_subscriptions` | gauge | — |
//! | `herald_game_hands_total`, `herald_game_actions_total`, `herald_game_events_total`, `herald_game_lobby_updates_total`, `herald_game_tables_failed_total` | counter | — |
//! | `herald_game_saves_total`, `herald_game_save_batches_total`, `herald_game_grouped_messages_total` | counter | — (durable tables in a cluster: saves, the store calls carrying them, messages saved with an earlier save) |
//! | `herald_game_action_duration_seconds` | histogram | — (an action reaching its table to its reply queued) |
//! | `herald_admin_actions_total` | counter | `action` (login, login_refused, login_limited, logout, publish, disconnect, close_table, csrf_refused): the admin dashboard's actions ([`crate::admin`]) |
//! | `herald_script_faults_total` | counter | `game`, `kind` (exception, timeout, memory, output): game module faults, each closing its table |

use crate::hibernate::Parker;
use crate::respond::{full, Body};
use herald_core::metrics::{Drop, Histogram, Transport, DISCONNECT_CODES, FANOUT_BUCKETS};
use herald_core::Node;
use http::Response;
use std::fmt::Write;
use std::sync::Arc;

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    head(out, name, "histogram", help);
    let (buckets, sum) = h.snapshot();
    for (le, n) in FANOUT_BUCKETS.iter().zip(&buckets) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}");
    }
    let count = buckets.last().copied().unwrap_or(0);
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_sum {sum}");
    let _ = writeln!(out, "{name}_count {count}");
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// What `/metrics` reads: the node, the parking place, the cluster and the
/// game engine.
#[derive(Debug)]
pub struct Scrape {
    /// The node: its counters, hub and broker.
    pub node: Arc<Node>,
    /// Where idle connections hibernate, if they do.
    pub parker: Option<Arc<Parker>>,
    /// The Redis broker in cluster mode (the node list, repairs).
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// The game engine.
    pub games: Arc<herald_game::Engine>,
    /// The game modules (their faults).
    pub scripts: Arc<crate::scripts::Scripts>,
    /// The admin dashboard's actions.
    pub admin: Arc<crate::admin::actions::Actions>,
}

/// `GET /metrics`: every metric, as Prometheus's text format.
pub fn response(scrape: &Scrape) -> Response<Body> {
    let mut r = Response::new(full(render(scrape)));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// Renders every metric, section by section (the table in this module's
/// docs lists them; `tests/metrics.rs` checks the two agree).
pub fn render(scrape: &Scrape) -> String {
    let mut out = String::with_capacity(4096);
    connections(&mut out, scrape);
    traffic(&mut out, &scrape.node);
    hub(&mut out, &scrape.node);
    if let Some(c) = &scrape.cluster {
        cluster(&mut out, c);
    }
    games(&mut out, scrape);
    scripts(&mut out, scrape);
    admin(&mut out, &scrape.admin);
    out
}

/// The admin dashboard's actions, by action.
fn admin(out: &mut String, actions: &crate::admin::actions::Actions) {
    let name = "herald_admin_actions_total";
    head(
        out,
        name,
        "counter",
        "Admin dashboard actions (logins, refusals, publications, disconnects, closed tables), by action.",
    );
    for a in crate::admin::actions::Action::ALL {
        let _ = writeln!(out, "{name}{{action=\"{}\"}} {}", a.label(), actions.get(a));
    }
}

/// Game modules' faults, by game and kind (each closed its table).
fn scripts(out: &mut String, scrape: &Scrape) {
    let name = "herald_script_faults_total";
    head(
        out,
        name,
        "counter",
        "Game module faults that closed a table, by game and kind.",
    );
    for (game, counts) in scrape.scripts.faults() {
        for (kind, n) in herald_script::FaultCounts::KINDS.iter().zip(counts.get()) {
            let _ = writeln!(out, "{name}{{game=\"{game}\",kind=\"{kind}\"}} {n}");
        }
    }
}

/// Connections: open, accepted, refused, hibernated, ended.
fn connections(out: &mut String, scrape: &Scrape) {
    let m = &scrape.node.metrics;
    head(
        out,
        "herald_connections",
        "gauge",
        "Open connections by transport.",
    );
    for t in Transport::ALL {
        let _ = writeln!(
            out,
            "herald_connections{{transport=\"{}\"}} {}",
            t.label(),
            m.connections(t)
        );
    }
    head(
        out,
        "herald_connections_accepted_total",
        "counter",
        "Connections opened, by transport.",
    );
    for t in Transport::ALL {
        let _ = writeln!(
            out,
            "herald_connections_accepted_total{{transport=\"{}\"}} {}",
            t.label(),
            m.accepted(t)
        );
    }
    head(
        out,
        "herald_connections_refused_total",
        "counter",
        "Connections turned away before a session existed (connection caps, Origin, handshake timeout).",
    );
    let _ = writeln!(out, "herald_connections_refused_total {}", m.refused.get());
    let (parked, parks, (pings, pongs)) = scrape
        .parker
        .as_ref()
        .map_or((0, 0, (0, 0)), |p| (p.parked(), p.parks(), p.heartbeats()));
    head(
        out,
        "herald_hibernated_connections",
        "gauge",
        "Idle connections parked off the runtime, waiting in the shared epoll set.",
    );
    let _ = writeln!(out, "herald_hibernated_connections {parked}");
    head(
        out,
        "herald_hibernations_total",
        "counter",
        "Times an idle connection parked.",
    );
    let _ = writeln!(out, "herald_hibernations_total {parks}");
    head(
        out,
        "herald_hibernated_pings_total",
        "counter",
        "Heartbeat pings written to parked connections without resuming them.",
    );
    let _ = writeln!(out, "herald_hibernated_pings_total {pings}");
    head(
        out,
        "herald_hibernated_pongs_total",
        "counter",
        "Heartbeat answers read from parked connections without resuming them.",
    );
    let _ = writeln!(out, "herald_hibernated_pongs_total {pongs}");

    head(
        out,
        "herald_disconnects_total",
        "counter",
        "Connections ended, by close code (0: ended by the client).",
    );
    for (code, n) in DISCONNECT_CODES
        .iter()
        .map(|c| c.to_string())
        .chain(std::iter::once("other".to_string()))
        .zip(m.disconnects())
    {
        let _ = writeln!(out, "herald_disconnects_total{{code=\"{code}\"}} {n}");
    }
}

/// Messages and bytes in and out, publications, drops.
fn traffic(out: &mut String, node: &Node) {
    let m = &node.metrics;

    for (name, help, v) in [
        (
            "herald_messages_received_total",
            "Protocol messages received from clients.",
            m.messages_in.get(),
        ),
        (
            "herald_received_bytes_total",
            "Bytes of protocol messages received from clients.",
            m.bytes_in.get(),
        ),
        (
            "herald_messages_sent_total",
            "Frames written to socket clients.",
            m.messages_out.get(),
        ),
        (
            "herald_sent_bytes_total",
            "Bytes written to socket clients, framing included.",
            m.bytes_out.get(),
        ),
        (
            "herald_publications_total",
            "Publications accepted from clients and the HTTP API.",
            m.publications.get(),
        ),
    ] {
        head(out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }

    head(
        out,
        "herald_drops_total",
        "counter",
        "Messages dropped instead of handled or delivered, by reason.",
    );
    for d in Drop::ALL {
        let n = match d {
            Drop::SlowConsumer => node.hub.overflows.get(),
            d => m.drops(d),
        };
        let _ = writeln!(out, "herald_drops_total{{reason=\"{}\"}} {n}", d.label());
    }

    histogram(
        out,
        "herald_fanout_duration_seconds",
        "Time to hand one publication to every local subscriber's queue.",
        &node.hub.fanout,
    );
}

/// The hub and the broker: channels, patterns, token expiries, broker health.
fn hub(out: &mut String, node: &Node) {
    head(
        out,
        "herald_channels",
        "gauge",
        "Channels with at least one local subscriber.",
    );
    let _ = writeln!(out, "herald_channels {}", node.hub.channel_count());
    if let Some(n) = node.broker.channel_states() {
        head(
            out,
            "herald_broker_channels",
            "gauge",
            "Channels whose position and history the in-memory broker keeps \
             (dropped once idle for history_ttl).",
        );
        let _ = writeln!(out, "herald_broker_channels {n}");
    }
    head(
        out,
        "herald_subscriptions_patterns",
        "gauge",
        "Wildcard subscriptions.",
    );
    let _ = writeln!(
        out,
        "herald_subscriptions_patterns {}",
        node.hub.pattern_count()
    );
    head(
        out,
        "herald_token_expiries_pending",
        "gauge",
        "Connections whose token expiry is being watched.",
    );
    let _ = writeln!(out, "herald_token_expiries_pending {}", node.expiries.len());
    head(
        out,
        "herald_broker_up",
        "gauge",
        "1 when the broker is reachable (the in-memory broker always is).",
    );
    let _ = writeln!(out, "herald_broker_up {}", u8::from(node.broker.healthy()));
}

/// `v` escaped for a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Cluster mode: the node list and the broker's stream repairs.
fn cluster(out: &mut String, c: &herald_redis::RedisBroker) {
    {
        let nodes = c.nodes();
        head(
            out,
            "herald_cluster_nodes",
            "gauge",
            "Nodes in the cluster as of the last heartbeat.",
        );
        let _ = writeln!(out, "herald_cluster_nodes {}", nodes.len());
        head(
            out,
            "herald_cluster_node_clients",
            "gauge",
            "Connected clients of each node, as it last reported.",
        );
        for n in &nodes {
            let clients = n.stats.get("clients").and_then(|v| v.as_u64()).unwrap_or(0);
            let _ = writeln!(
                out,
                "herald_cluster_node_clients{{node=\"{}\"}} {clients}",
                n.id
            );
        }
        head(
            out,
            "herald_cluster_node_last_seen_seconds",
            "gauge",
            "Seconds since each node's last heartbeat.",
        );
        for n in &nodes {
            let _ = writeln!(
                out,
                "herald_cluster_node_last_seen_seconds{{node=\"{}\"}} {}",
                n.id,
                n.last_seen_ms as f64 / 1000.0
            );
        }
        let (lost, filled) = c.repairs();
        head(
            out,
            "herald_cluster_streams_lost_total",
            "counter",
            "Times a channel's stream could not be replayed after a Redis outage (its local subscribers were closed with 3004).",
        );
        let _ = writeln!(out, "herald_cluster_streams_lost_total {lost}");
        head(
            out,
            "herald_cluster_gaps_filled_total",
            "counter",
            "Times missed publications were read back from a channel's stream.",
        );
        let _ = writeln!(out, "herald_cluster_gaps_filled_total {filled}");
        let redis = c.redis_status();
        head(
            out,
            "herald_cluster_redis_master",
            "gauge",
            "The Redis master this node uses (always 1; see the labels).",
        );
        let masters = c.cluster_masters();
        if masters.is_empty() {
            let _ = writeln!(
                out,
                "herald_cluster_redis_master{{mode=\"{}\",addr=\"{}\"}} 1",
                redis.mode,
                label(redis.master.as_deref().unwrap_or(""))
            );
        }
        for m in &masters {
            let _ = writeln!(
                out,
                "herald_cluster_redis_master{{mode=\"{}\",addr=\"{}\"}} 1",
                redis.mode,
                label(&m.addr)
            );
        }
        head(
            out,
            "herald_cluster_redis_slots",
            "gauge",
            "Hash slots each Redis master serves (Redis Cluster; 16384 for a single Redis).",
        );
        if masters.is_empty() && redis.mode != "cluster" {
            let _ = writeln!(
                out,
                "herald_cluster_redis_slots{{addr=\"{}\"}} 16384",
                label(redis.master.as_deref().unwrap_or(""))
            );
        }
        for m in &masters {
            let n: u32 = m
                .slots
                .iter()
                .map(|(a, b)| u32::from(*b) - u32::from(*a) + 1)
                .sum();
            let _ = writeln!(
                out,
                "herald_cluster_redis_slots{{addr=\"{}\"}} {n}",
                label(&m.addr)
            );
        }
        head(
            out,
            "herald_cluster_redis_failovers_total",
            "counter",
            "Redis fail-overs this node has seen (Sentinel, or Redis Cluster replicas promoted).",
        );
        let _ = writeln!(
            out,
            "herald_cluster_redis_failovers_total {}",
            redis.failovers
        );
        head(
            out,
            "herald_cluster_table_saves_unreplicated_total",
            "counter",
            "Game-table saves whose wait for replicas (--table-save-replicas) ended short.",
        );
        let _ = writeln!(
            out,
            "herald_cluster_table_saves_unreplicated_total {}",
            c.saves_unreplicated()
        );
    }
}

fn games(out: &mut String, scrape: &Scrape) {
    let g = &scrape.games;
    let m = g.metrics();
    let gauges: [(&str, &str, i64); 3] = [
        (
            "herald_game_tables",
            "Game tables running.",
            g.table_count() as i64,
        ),
        (
            "herald_game_players",
            "Players seated at game tables (away players included).",
            m.players.get(),
        ),
        (
            "herald_game_lobby_subscriptions",
            "Lobby subscriptions (a client may hold several branches).",
            g.lobby_subscriptions() as i64,
        ),
    ];
    for (name, help, v) in gauges {
        head(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
    let counters = [
        (
            "herald_game_hands_total",
            "Hands (rounds) finished.",
            m.hands.get(),
        ),
        (
            "herald_game_actions_total",
            "Game actions that reached a table.",
            m.actions.get(),
        ),
        (
            "herald_game_events_total",
            "Game messages queued to clients, one per recipient.",
            m.events.get(),
        ),
        (
            "herald_game_tables_failed_total",
            "Tables closed because their game failed (panic, or a scripted game's fault).",
            m.failed.get(),
        ),
        (
            "herald_game_saves_total",
            "Durable tables' saves sent to the store (a cluster node).",
            m.saves.get(),
        ),
        (
            "herald_game_save_batches_total",
            "Store calls carrying those saves (group commit across tables).",
            m.save_batches.get(),
        ),
        (
            "herald_game_grouped_messages_total",
            "Messages a durable table saved with an earlier one's save (group commit).",
            m.grouped.get(),
        ),
        (
            "herald_game_lobby_updates_total",
            "Lobby deltas queued to clients, one per recipient.",
            m.lobby_updates.get(),
        ),
    ];
    for (name, help, v) in counters {
        head(out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
    histogram(
        out,
        "herald_game_action_duration_seconds",
        "From a game action reaching its table to its reply being queued.",
        &m.action_latency,
    );
}
