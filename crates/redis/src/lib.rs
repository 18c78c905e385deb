//! Herald's cluster broker: many nodes, one set of channels, through Redis.
//!
//! Decision 0003 (docs/decisions/0003-redis-cluster.md) says why it looks like
//! this; in short:
//!
//! - **Positions and history** live in Redis: per channel a meta hash (epoch,
//!   last offset) and a stream whose entry ids *are* the offsets, bounded by
//!   the channel's retention (`MAXLEN` by count, a time stamp per entry by
//!   age). One Lua script assigns the offset, appends to the stream and
//!   `PUBLISH`es the live message, atomically — so a publication is never live
//!   before it is in history, on any node ([`lua`]).
//! - **Live delivery**: each node holds *one* Redis subscription per channel
//!   that has subscribers on it, however many clients it has (`pubsub.rs`).
//!   The node tracks, per channel, the last offset it delivered: duplicates
//!   are skipped, and a gap (a lost link, a slow subscriber link) is filled
//!   from the stream before anything newer is delivered, so a live client sees
//!   one unbroken offset sequence. When the gap cannot be filled (the stream
//!   was trimmed or lost, the epoch changed), the channel's local subscribers
//!   are closed with 3004 and their recovery says what was lost.
//! - **Attaching a subscriber** (the
//!   [`Broker::subscribe`](herald_core::Broker::subscribe) contract): read the
//!   stream after the client's position, then, under the channel's lock,
//!   keep only what the node has already delivered and register the client,
//!   so live delivery continues exactly after the history: no gap, no
//!   duplicate. A read older than what the node delivered is read again.
//! - **Commands** go through one pipelined connection ([`conn`]): everything
//!   queued while a write is in progress goes out in the next write.
//! - **Wildcard subscriptions** (`news.*`, `news.>`) add one `PSUBSCRIBE` per
//!   distinct pattern per node; publications of channels the node does not
//!   follow for exact subscribers arrive through it (live only, as patterns
//!   have no positions), the others through their channel's link. A
//!   wildcard subscriber is answered once Redis confirmed its glob's
//!   `PSUBSCRIBE`, so what is published anywhere after its reply reaches
//!   it (in a Redis Cluster, after the node's announcement too: decision
//!   0021).
//! - **Presence** is cluster-wide: a hash of members and a hash of per-user
//!   counts per channel (so `presence_stats` is two `HLEN`s), joins and leaves
//!   published on the channel's topic for other nodes' listeners, and a set
//!   per node so that the members of a dead node are removed (and announced
//!   as leaves) by whichever node notices first. The scripts that change
//!   them also decide the cluster-wide transitions (channel occupied or
//!   vacated, a user's first connection or last) and keep a set of occupied
//!   channels per namespace; the node that ran the script reports them to
//!   the hub's observer, so each is reported once in the cluster (decision
//!   0012, the Pusher webhooks and member events).
//! - **Nodes** heartbeat every second into a sorted set; one silent for
//!   [`RedisConfig::dead_after`] is forgotten. The list, with each node's
//!   stats, is `GET /api/nodes` and `/metrics`.
//!
//! - **Game tables** (decision 0009): a lease per table with a fencing
//!   token, and its saved state, written only by the lease holder
//!   ([`tables`]).
//!
//! Redis slow or down: publishes, history and presence queries fail at once
//! with [`BrokerError::Unavailable`](herald_core::BrokerError::Unavailable)
//! (error 114 to clients); clients stay connected; when Redis returns, the
//! node resubscribes every channel, fills gaps from the streams,
//! re-registers its presence members, and closes with 3004 the subscribers
//! of channels whose stream did not survive. With Redis Sentinel
//! (`redis-sentinel://`, decision 0020) the links find the master through
//! the sentinels and follow a fail-over; since the new master may lack the
//! last writes, a fail-over epoch (key `herald:sentinel:epoch`, the
//! sentinels' config epoch) ends every channel's epoch and floors table
//! tokens and lobby numbers, so nothing is handed out twice.
//!
//! With Redis Cluster (`redis-cluster://`, decision 0021) the command link
//! learns the slot map and sends each command to the master owning its
//! key's slot, following `-MOVED` and `-ASK`; channel keys keep their
//! `{C}` hash tag, node-wide and game keys share the `{P}` tag (one slot),
//! so no script spans slots; channel topics become shard channels
//! (`P:c:{C}`, `SPUBLISH`/`SSUBSCRIBE`, one subscriber connection per
//! master); and each master's config epoch plays the part of Sentinel's
//! fail-over epoch for the channels and tables in its slots.
//!
//! Keys (prefix `P`, channel `C`): `P:{C}:m` meta, `P:{C}:s` stream, `P:{C}:p`
//! members, `P:{C}:u` user counts, `P:{C}:v` a pending vacate, topic
//! `P:c:C`; `P:nodes:seen` (zset), `P:nodes` (stats), `P:node:ID:members`
//! (set), topic `P:node:ID:cmd` (messages routed to a node: game commands
//! and table events, decision 0009), `P:occupied:NS` (set of the channels of
//! namespace `NS` with members), topic `P:ctl` (requests to every node:
//! [`RedisBroker::close_everywhere`]). The `{C}` hash tag keeps one
//! channel's keys in one slot. In a Redis Cluster the node-wide and game
//! keys are `{P}:…` instead of `P:…`, and the channel topic `P:c:{C}`
//! (the key table is in decision 0021).
//!
//! Where things are:
//!
//! - `broker.rs`: [`RedisBroker`], starting it, and the `Broker` contract
//!   (publish, attach after history, history, positions, patterns); under
//!   it, `broker/live.rs`: live delivery in offset order and gap fill;
//!   `broker/presence.rs`: cluster-wide presence and its transitions;
//!   `broker/nodes.rs`: heartbeats, the node list, dead nodes, and the
//!   control, node and lobby topics.
//! - `config.rs`: [`RedisConfig`] and its defaults.
//! - [`conn`]: the command link ([`conn::Link`]) every caller uses;
//!   [`target`]: where Redis is (the three URL forms); `pipe.rs`: one
//!   pipelined, reconnecting connection; [`sentinel`]: finding the master
//!   through Redis Sentinel and following its fail-overs (decision 0020);
//!   [`slot`]: Redis Cluster key slots (CRC16, hash tags); [`topology`]:
//!   the cluster's slot map; [`cluster`]: routing commands by slot,
//!   redirections (decision 0021); `pubsub.rs`: the subscriber link;
//!   `shards.rs`: sharded pub/sub, one connection per cluster master;
//!   [`resp`]: the wire format; [`lua`]: the scripts; `member.rs`:
//!   presence members and channel-topic messages as stored and published.
//! - [`tables`] and [`registry`]: game tables' leases and saves, and which
//!   tables exist (decision 0009).
//! - `testing` (feature `test-util`, off in release builds): a throwaway
//!   `redis-server` for tests, Sentinel deployments and Redis Clusters.

pub mod acked;
mod broker;
pub mod cluster;
mod config;
pub mod conn;
pub mod lua;
pub(crate) mod member;
pub(crate) mod pipe;
pub mod play;
pub(crate) mod pubsub;
pub mod registry;
pub mod resp;
pub mod sentinel;
pub(crate) mod shards;
pub mod slot;
pub mod tables;
pub mod target;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod topology;

pub use broker::{LobbyFn, NodeInfo, NodeMsgFn, RedisBroker, RedisStatus, StatsFn};
pub use config::RedisConfig;
pub use conn::UrlError;
