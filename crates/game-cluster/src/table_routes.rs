//! Playing at a table that runs on another node (decision 0009, issue 17):
//! the edge → owner route.
//!
//! A client may connect to any node and play at any of the cluster's
//! tables. When a `sit`, `watch`, `stand` or `act` names a table that does
//! not run here, the engine hands it to [`Routes`], which publishes it on
//! the owner's node topic (`P:node:{ID}:cmd`, one Redis `PUBLISH`). The
//! owner runs it for a *proxy*: a [`Client`] of its own standing for the
//! remote one (same user, same encoding), so the table treats it exactly
//! like a local player, seats, grace periods and fencing included. What the
//! table queues for the proxy (replies, pushes, already encoded in the
//! player's encoding) goes back through the edge's *pump* on the owner: one
//! task per edge with proxies here, which each proxy's outbox wakes (a
//! [`Member`] waker marks the proxy dirty). The pump drains every dirty
//! proxy of the edge and publishes one [`DELIVER_MANY`] message on the
//! edge's node topic: a table of distinct frames (a broadcast the table
//! encoded once for several players is in it once), then per proxy its
//! sequence number and the indexes of its frames in order. The edge queues
//! slices of the message into the real clients' outboxes (no copy).
//!
//! Why a proxy per remote client rather than one publication per table
//! event (what 0009 first sketched): the table code stays the one path for
//! local and remote players, and every order guarantee of a table towards
//! a client holds through the hop (one proxy, one pump, one Redis link,
//! one subscriber link). Why a pump per edge rather than a publish per
//! proxy (as first built): a table event seen by 8 players of one edge was
//! 8 Redis messages to that edge, each read, parsed and queued on its own;
//! the edges, not the game nodes, bounded seed 003's split topology (an
//! edge cost about 1.27 singletons per player, 65 % of it in the kernel:
//! Redis reads, sends, wake-ups; bench/RESULTS.md). Now it is one message,
//! and its bytes once.
//!
//! Failure handling, all of it at most once (Redis pub/sub):
//! - A command that gets no answer within [`Routes::timeout`] is answered
//!   by the edge with 114 ("retry"); it may or may not have been applied
//!   (the next snapshot says). A late answer to it is dropped, so every
//!   command still gets exactly one answer.
//! - A gap in a proxy's sequence (a publication lost while the subscriber
//!   link was down) takes the player off the table on this edge with
//!   `unseat` 115 "sit again": the seat stays theirs (away) at the owner,
//!   and `sit` brings a fresh snapshot.
//! - The owner changes (take-over after a kill, a partition): the edge
//!   watches the leases of the tables its players are at and tells each
//!   player `unseat` 115 "sit again"; the player sits again on the same
//!   connection and the new owner gives the seat back (restored seats are
//!   away, decision 0009).
//! - The edge dies: its players' proxies on the owners are dropped once
//!   the cluster forgets the edge (their seats go away, the grace period
//!   runs); the players reconnect to any node and `sit` back into their
//!   seats.

use crate::cluster_tables::ClusterTables;
use crate::wire::{get_str, get_u64, get_u8, put_str, DeliverMany, DELIVER_MANY, DELIVER_MAX};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use herald_core::auth::Identity;
use herald_core::games::Games;
use herald_core::outbox::Frame;
use herald_core::Client;
use herald_game::play::PlaySeat;
use herald_game::{Engine, Router};
use herald_proto::{Command, Encoding, ErrorCode, Push, Request, ServerMsg};
use herald_redis::registry::DELETED_NODE;
use herald_redis::tables::TableStore;
use herald_redis::RedisBroker;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Wake, Waker};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Message kinds on a node topic.
const CMD: u8 = 1;
// 2 was `DELIVER`, one proxy's frames per message: replaced by
// [`DELIVER_MANY`] (a node of another version refuses it as malformed).
const GONE: u8 = 3;
/// A deleted table's owner is asked to close it (decision 0009).
const CLOSE: u8 = 4;
/// The owner's answer to [`CLOSE`]: the table's last state, or "not here".
const CLOSED: u8 = 5;
/// A `play`'s seat (a [`CMD`] whose `sit` carries the reservation's reply
/// fields: the owner answers it with the `play` reply).
const PLAY: u8 = 6;

/// What an edge passes to a table's owner.
enum Routed {
    /// A table command.
    Cmd(Command),
    /// A `play`'s reserved seat at the table, with the game's data.
    Play(Bytes, PlaySeat),
}

/// Ids of proxies on an owner: the top bit set, apart from the node's own
/// client ids (random high bits below it).
const PROXY_IDS: u64 = 1 << 63;

/// Late answers remembered per client (to drop them).
const EXPIRED_MAX: usize = 64;

/// A proxy younger than this is not dropped for its edge missing from the
/// node list (the edge's first heartbeat may not have been read yet).
const PROXY_SETTLE: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A player of this node at tables of other nodes.
struct Remote {
    client: Weak<Client>,
    /// Table → the node it was routed to (the tables it sits at or
    /// watches, as far as this node knows).
    tables: HashMap<u64, Arc<str>>,
    /// Every node it sent a command to: told when it leaves.
    nodes: HashSet<Arc<str>>,
    /// Commands sent and not yet answered, with their deadline.
    pending: Vec<(u32, Instant)>,
    /// Commands answered with 114 by this node: their late answers are
    /// dropped.
    expired: Vec<u32>,
    /// Next sequence number expected from each owner's proxy.
    seq: HashMap<Arc<str>, u64>,
}

/// A remote player's stand-in on this (owner) node.
struct Proxy {
    client: Arc<Client>,
    since: Instant,
}

/// The edge → owner routes of one node (both sides: a node may be an edge
/// for some tables and the owner of others).
pub(crate) struct Routes {
    me: Weak<Routes>,
    broker: Arc<RedisBroker>,
    store: TableStore,
    engine: Weak<Engine>,
    node: Arc<str>,
    /// Which tables the cluster has.
    known: Arc<ClusterTables>,
    /// `DELETE`s waiting for the owner's [`CLOSED`], by request number.
    closes: Mutex<HashMap<u64, oneshot::Sender<Option<Bytes>>>>,
    next_close: AtomicU64,
    /// How long an edge waits for the owner's answer to a command.
    timeout: Duration,
    /// A proxy's outbox bound (the node's client queue).
    queue_bytes: usize,
    /// Who owns a table, as last looked up: node, token.
    owners: Mutex<HashMap<u64, (Arc<str>, u64)>>,
    /// This node's players at other nodes' tables, by client id.
    remotes: Mutex<HashMap<u64, Remote>>,
    /// Other nodes' players at this node's tables, by (edge, client id).
    proxies: Mutex<HashMap<(Arc<str>, u64), Proxy>>,
    /// The pump of each edge with proxies here.
    pumps: Mutex<HashMap<Arc<str>, Arc<EdgePump>>>,
    next_proxy: AtomicU64,
    /// Commands this node passed to another (for the log and tests).
    pub(crate) routed: AtomicU64,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Routes {
    /// Starts routing for `engine` over `broker`'s node topics, for the
    /// cluster's tables (`known`); `lease` is the tables' lease (the
    /// owner watch runs every third of it).
    pub(crate) fn start(
        broker: &Arc<RedisBroker>,
        engine: &Arc<Engine>,
        known: Arc<ClusterTables>,
        lease: Duration,
        queue_bytes: usize,
    ) -> Arc<Routes> {
        let routes = Arc::new_cyclic(|me| Routes {
            me: me.clone(),
            broker: broker.clone(),
            store: broker.table_store(),
            engine: Arc::downgrade(engine),
            node: broker.node_id().into(),
            known,
            closes: Mutex::new(HashMap::new()),
            next_close: AtomicU64::new(1),
            timeout: (lease * 2).max(Duration::from_secs(2)),
            queue_bytes,
            owners: Mutex::new(HashMap::new()),
            remotes: Mutex::new(HashMap::new()),
            proxies: Mutex::new(HashMap::new()),
            pumps: Mutex::new(HashMap::new()),
            next_proxy: AtomicU64::new(1),
            routed: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&routes);
        broker.on_node_messages(Box::new(move |payload| {
            if let Some(r) = weak.upgrade() {
                r.received(payload);
            }
        }));
        engine.set_router(routes.clone());
        let every = (lease / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::spawn(watch_owners(Arc::downgrade(&routes), every));
        tokio::spawn(expire(Arc::downgrade(&routes)));
        tokio::spawn(watch_edges(Arc::downgrade(&routes)));
        routes
    }

    fn send_cmd(&self, client: &Arc<Client>, id: u32, table: u64, owner: Arc<str>, cmd: Routed) {
        let mut payload = BytesMut::with_capacity(64);
        payload.put_u8(match cmd {
            Routed::Cmd(_) => CMD,
            Routed::Play(..) => PLAY,
        });
        put_str(&mut payload, &self.node);
        payload.put_u64(client.id);
        payload.put_u8(match client.encoding {
            Encoding::Json => 0,
            Encoding::Binary => 1,
        });
        put_str(&mut payload, client.user());
        let stand = matches!(cmd, Routed::Cmd(Command::Stand { .. }));
        let cmd = match cmd {
            Routed::Cmd(cmd) => cmd,
            Routed::Play(data, play) => {
                payload.put_u8(u8::from(play.code.is_some()) | u8::from(play.created) << 1);
                if let Some(code) = &play.code {
                    put_str(&mut payload, code);
                }
                Command::Sit {
                    table,
                    seat: None,
                    data,
                }
            }
        };
        Encoding::Binary.encode_request(&Request { id, cmd }, &mut payload);
        // Registered before the command goes out, so that an answer can
        // never arrive before the edge expects it.
        {
            let mut remotes = lock(&self.remotes);
            let r = remotes.entry(client.id).or_insert_with(|| Remote {
                client: Arc::downgrade(client),
                tables: HashMap::new(),
                nodes: HashSet::new(),
                pending: Vec::new(),
                expired: Vec::new(),
                seq: HashMap::new(),
            });
            r.nodes.insert(owner.clone());
            if stand {
                r.tables.remove(&table);
            } else {
                r.tables.insert(table, owner.clone());
            }
            if id != 0 {
                // A client may use an id again once it has its answer (a
                // retry after 114 often does): the new command's answer
                // must not be taken for the old one's late answer and
                // dropped. (A late answer of the old command, if one still
                // comes, is then taken as the new one's.)
                r.expired.retain(|e| *e != id);
                r.pending.push((id, Instant::now() + self.timeout));
            }
        }
        if let Err(e) = self.broker.send_to_node(&owner, &payload) {
            if id != 0 {
                if let Some(r) = lock(&self.remotes).get_mut(&client.id) {
                    r.pending.retain(|(p, _)| *p != id);
                }
            }
            return error(
                client,
                id,
                ErrorCode::BrokerUnavailable,
                &format!("cannot reach the table's node: {e}; retry"),
            );
        }
        self.routed.fetch_add(1, Ordering::Relaxed);
    }

    /// A message on this node's topic.
    fn received(&self, mut payload: Bytes) {
        if payload.is_empty() {
            return;
        }
        let kind = payload.get_u8();
        let parsed = match kind {
            CMD => self.on_cmd(&mut payload, false),
            PLAY => self.on_cmd(&mut payload, true),
            DELIVER_MANY => self.on_deliver_many(std::mem::take(&mut payload)),
            GONE => self.on_gone(&mut payload),
            CLOSE => self.on_close(&mut payload),
            CLOSED => self.on_closed(&mut payload),
            _ => None,
        };
        if parsed.is_none() {
            tracing::debug!(kind, "malformed message on the node topic");
        }
    }

    /// Owner side: a command from an edge's player.
    fn on_cmd(&self, p: &mut Bytes, play: bool) -> Option<()> {
        let edge: Arc<str> = get_str(p)?.into();
        let client = get_u64(p)?;
        let encoding = match get_u8(p)? {
            0 => Encoding::Json,
            1 => Encoding::Binary,
            _ => return None,
        };
        let user = get_str(p)?;
        let play = if play {
            let flags = get_u8(p)?;
            let code = if flags & 1 != 0 {
                Some(get_str(p)?)
            } else {
                None
            };
            Some(PlaySeat {
                code,
                created: flags & 2 != 0,
            })
        } else {
            None
        };
        let req = Encoding::Binary.decode_request_bytes(p).ok()?;
        let engine = self.engine.upgrade()?;
        let proxy = self.proxy(&edge, client, encoding, &user);
        match (play, req.cmd) {
            (None, cmd) => engine.command_here(&proxy, req.id, cmd, ErrorCode::BrokerUnavailable),
            (Some(play), Command::Sit { table, data, .. }) => engine.play_here(
                &proxy,
                req.id,
                table,
                data,
                play,
                ErrorCode::BrokerUnavailable,
            ),
            (Some(_), _) => return None,
        }
        Some(())
    }

    fn proxy(&self, edge: &Arc<str>, client: u64, encoding: Encoding, user: &str) -> Arc<Client> {
        // An anonymous player's seats belong to its connection (protocol
        // §5e): the proxy stands for it with the user id the edge's own
        // table would give it (`~` and its client id), not one made from
        // the proxy's id, so that the new owner after a take-over, whose
        // proxy has another id, still sees the same user and gives the seat
        // back when the player sits again on the same connection.
        let user: std::borrow::Cow<'_, str> = if user.is_empty() {
            format!("~{client:x}").into()
        } else {
            user.into()
        };
        let mut proxies = lock(&self.proxies);
        if let Some(p) = proxies.get(&(edge.clone(), client)) {
            if p.client.encoding == encoding && p.client.user() == user {
                return p.client.clone();
            }
        }
        let id = PROXY_IDS | self.next_proxy.fetch_add(1, Ordering::Relaxed);
        let proxy = Arc::new(Client::new(id, encoding, self.queue_bytes, 0));
        proxy.set_identity(Arc::new(Identity {
            user: user.as_ref().into(),
            expires_at: None,
            grants: Vec::new(),
            info: Bytes::new(),
        }));
        let old = proxies.insert(
            (edge.clone(), client),
            Proxy {
                client: proxy.clone(),
                since: Instant::now(),
            },
        );
        drop(proxies);
        if let Some(old) = old {
            self.drop_proxy(&old.client);
        }
        self.attach(edge, client, &proxy);
        proxy
    }

    /// The remote player is gone: its seats go away at the tables here.
    fn drop_proxy(&self, proxy: &Arc<Client>) {
        if let Some(engine) = self.engine.upgrade() {
            engine.gone(proxy);
        }
        proxy
            .outbox
            .close(herald_proto::DisconnectCode::GoingAway.code(), false);
    }

    /// Owner side: an edge's player disconnected.
    fn on_gone(&self, p: &mut Bytes) -> Option<()> {
        let edge: Arc<str> = get_str(p)?.into();
        let client = get_u64(p)?;
        let proxy = lock(&self.proxies).remove(&(edge, client));
        if let Some(proxy) = proxy {
            self.drop_proxy(&proxy.client);
        }
        Some(())
    }

    /// Asks `owner` to close deleted `table` (`DELETE /api/tables/{id}` on
    /// this node) and waits for its answer: `Some(Some(state))`, the
    /// table's last state as JSON (what a single node's `DELETE` answers);
    /// `Some(None)`, the table does not run there; `None`, no answer in
    /// [`Routes::timeout`] (the owner died, or the message was lost: its
    /// keeper closes the table at its next scan if it is alive).
    pub(crate) async fn close_remote(&self, owner: &str, table: u64) -> Option<Option<Bytes>> {
        let req = self.next_close.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.closes).insert(req, tx);
        let mut payload = BytesMut::with_capacity(48);
        payload.put_u8(CLOSE);
        put_str(&mut payload, &self.node);
        payload.put_u64(req);
        payload.put_u64(table);
        let answer = match self.broker.send_to_node(owner, &payload) {
            Ok(()) => tokio::time::timeout(self.timeout, rx)
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        lock(&self.closes).remove(&req);
        answer
    }

    /// Owner side: another node deleted a table this node runs.
    fn on_close(&self, p: &mut Bytes) -> Option<()> {
        let from: Arc<str> = get_str(p)?.into();
        let req = get_u64(p)?;
        let table = get_u64(p)?;
        let me = self.me.clone();
        tokio::spawn(async move {
            let Some(routes) = me.upgrade() else { return };
            let info = routes.known.close_here(table).await;
            let mut payload = BytesMut::with_capacity(256);
            payload.put_u8(CLOSED);
            payload.put_u64(req);
            if let Some(info) = info {
                payload.put_u8(1);
                payload.put_slice(crate::json::info_json(&info).to_string().as_bytes());
            } else {
                payload.put_u8(0);
            }
            let _ = routes.broker.send_to_node(&from, &payload);
        });
        Some(())
    }

    /// Edge side: the owner's answer to a [`CLOSE`].
    fn on_closed(&self, p: &mut Bytes) -> Option<()> {
        let req = get_u64(p)?;
        let closed = get_u8(p)? == 1;
        if let Some(tx) = lock(&self.closes).remove(&req) {
            let _ = tx.send(closed.then(|| p.split_to(p.remaining())));
        }
        Some(())
    }

    /// Edge side: what an owner's tables sent to players of this node, one
    /// message for all of them ([`DELIVER_MANY`]). The message is parsed
    /// whole before anything is delivered: a malformed one is refused. Each
    /// player's frames are slices of the message (a frame shared by several
    /// players is not copied), queued under one lock of their outbox.
    fn on_deliver_many(&self, p: Bytes) -> Option<()> {
        let mut msg = DeliverMany::decode(p)?;
        let owner: Arc<str> = std::mem::take(&mut msg.owner).into();
        let mut lost = Vec::new();
        {
            let mut remotes = lock(&self.remotes);
            let mut out: Vec<Frame> = Vec::new();
            for d in &msg.proxies {
                let Some(r) = remotes.get_mut(&d.client) else {
                    continue; // gone meanwhile
                };
                let Some(client) = r.client.upgrade() else {
                    continue;
                };
                let expected = r.seq.get(&owner).copied().unwrap_or(0);
                if d.seq != expected {
                    // A lost batch: this player's view of the owner's
                    // tables may be missing something. Take them off those
                    // tables here; the seats stay theirs at the owner,
                    // `sit` brings a snapshot.
                    let tables: Vec<u64> = r
                        .tables
                        .iter()
                        .filter(|(_, o)| **o == owner)
                        .map(|(t, _)| *t)
                        .collect();
                    r.tables.retain(|_, o| *o != owner);
                    r.seq.remove(&owner);
                    lost.push((client, d.client, tables, d.seq, expected));
                    continue;
                }
                match r.seq.get_mut(&owner) {
                    Some(s) => *s = d.seq + 1,
                    None => {
                        r.seq.insert(owner.clone(), d.seq + 1);
                    }
                }
                for bytes in msg.frames_of(d) {
                    if !r.pending.is_empty() || !r.expired.is_empty() {
                        if let Ok(ServerMsg::Reply { id, .. } | ServerMsg::Error { id, .. }) =
                            client.encoding.decode_server_bytes(bytes)
                        {
                            if let Some(i) = r.expired.iter().position(|e| *e == id) {
                                r.expired.swap_remove(i);
                                continue; // answered with 114 already
                            }
                            if let Some(i) = r.pending.iter().position(|(p, _)| *p == id) {
                                r.pending.remove(i);
                            }
                        }
                    }
                    out.push(match client.encoding {
                        Encoding::Json => Frame::Text(bytes.clone()),
                        Encoding::Binary => Frame::Binary(bytes.clone()),
                    });
                }
                if !out.is_empty() {
                    client.outbox.push_many(out.drain(..));
                }
            }
        }
        for (client, client_id, tables, seq, expected) in lost {
            tracing::warn!(%owner, seq, expected, "routed table messages lost");
            for t in tables {
                unseat(&client, t, "messages from the table were lost: sit again");
            }
            self.send_gone(&owner, client_id);
        }
        Some(())
    }

    fn send_gone(&self, owner: &str, client: u64) {
        let mut payload = BytesMut::with_capacity(32);
        payload.put_u8(GONE);
        put_str(&mut payload, &self.node);
        payload.put_u64(client);
        let _ = self.broker.send_to_node(owner, &payload);
    }

    /// Edge side: the tables players here are routed to whose owner
    /// changed get their players told (`unseat` 115, "sit again").
    async fn check_owners(&self) {
        let tables: Vec<u64> = lock(&self.remotes)
            .values()
            .flat_map(|r| r.tables.keys().copied())
            .collect::<HashSet<u64>>()
            .into_iter()
            .collect();
        if tables.is_empty() {
            return;
        }
        // One read for every table, then one pass over the players: this
        // runs every lease/3 with thousands of players at hundreds of
        // tables (a round trip and a pass over all players per table was
        // an edge's largest cost in seed 003's four-node run).
        let Ok(found) = self.store.owners(&tables).await else {
            return; // Redis unreachable: nothing to learn now
        };
        let mut now: HashMap<u64, Arc<str>> = HashMap::with_capacity(tables.len());
        let mut deleted = HashSet::new();
        {
            let mut owners = lock(&self.owners);
            for (table, owner) in tables.into_iter().zip(found) {
                match owner {
                    // Being taken over: the next look tells.
                    None => {
                        owners.remove(&table);
                    }
                    // Deleted: its owner told its players (`unseat` 115,
                    // "the table was closed"); a player of a table deleted
                    // while between owners learns it from its next command
                    // (115).
                    Some((node, _)) if node == DELETED_NODE => {
                        owners.remove(&table);
                        deleted.insert(table);
                    }
                    Some((node, token)) => {
                        let node: Arc<str> = node.into();
                        owners.insert(table, (node.clone(), token));
                        now.insert(table, node);
                    }
                }
            }
        }
        let mut moved = Vec::new();
        for r in lock(&self.remotes).values_mut() {
            let client = &r.client;
            r.tables.retain(|table, routed| match now.get(table) {
                _ if deleted.contains(table) => false,
                Some(node) if node != routed => {
                    if let Some(c) = client.upgrade() {
                        moved.push((c, *table));
                    }
                    false
                }
                _ => true,
            });
        }
        for (c, table) in moved {
            unseat(
                &c,
                table,
                "the table moved to another node: sit again to get your seat back",
            );
        }
    }

    /// Edge side: unanswered commands past their deadline get 114.
    fn expire_now(&self) {
        let now = Instant::now();
        let mut late = Vec::new();
        for r in lock(&self.remotes).values_mut() {
            let Some(client) = r.client.upgrade() else {
                continue;
            };
            let before = r.pending.len();
            let expired = &mut r.expired;
            r.pending.retain(|(id, at)| {
                if *at <= now {
                    late.push((client.clone(), *id));
                    if expired.len() >= EXPIRED_MAX {
                        expired.remove(0);
                    }
                    expired.push(*id);
                    false
                } else {
                    true
                }
            });
            if r.pending.len() != before {
                // The owner may be gone: look it up again next time.
                for t in r.tables.keys() {
                    lock(&self.owners).remove(t);
                }
            }
        }
        for (client, id) in late {
            error(
                &client,
                id,
                ErrorCode::BrokerUnavailable,
                "the table's node did not answer in time: retry (the command may or may not have been applied)",
            );
        }
    }

    /// Owner side: proxies of edges the cluster no longer lists are
    /// dropped (their seats go away).
    fn check_edges(&self) {
        let nodes: HashSet<String> = self.broker.nodes().into_iter().map(|n| n.id).collect();
        if nodes.is_empty() {
            return; // no heartbeat read yet, or Redis away
        }
        let dead: Vec<Proxy> = {
            let mut proxies = lock(&self.proxies);
            let keys: Vec<(Arc<str>, u64)> = proxies
                .iter()
                .filter(|((edge, _), p)| {
                    !nodes.contains(&**edge) && p.since.elapsed() > PROXY_SETTLE
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| proxies.remove(k)).collect()
        };
        for p in dead {
            self.drop_proxy(&p.client);
        }
    }
}

impl Router for Routes {
    fn forward(&self, client: &Arc<Client>, id: u32, table: u64, cmd: Command) -> bool {
        self.route(client, id, table, Routed::Cmd(cmd))
    }

    fn forward_play(
        &self,
        client: &Arc<Client>,
        id: u32,
        table: u64,
        data: Bytes,
        play: PlaySeat,
    ) -> bool {
        self.route(client, id, table, Routed::Play(data, play))
    }

    fn gone(&self, client: &Arc<Client>) {
        let Some(r) = lock(&self.remotes).remove(&client.id) else {
            return;
        };
        for owner in r.nodes {
            self.send_gone(&owner, client.id);
        }
    }
}

impl Routes {
    /// Passes `cmd` for `table` to its owner (looked up in Redis when not
    /// known). False: `table` is not a table of the cluster.
    fn route(&self, client: &Arc<Client>, id: u32, table: u64, cmd: Routed) -> bool {
        if table == 0 || self.known.is_deleted(table) {
            return false;
        }
        let owner = lock(&self.owners).get(&table).cloned();
        match owner {
            Some((node, _)) if *node != *self.node => self.send_cmd(client, id, table, node, cmd),
            _ => {
                let Some(me) = self.me.upgrade() else {
                    return false;
                };
                let client = client.clone();
                tokio::spawn(async move {
                    match me.store.owner(table).await {
                        Ok(Some((node, _))) if node == DELETED_NODE => {
                            error(&client, id, ErrorCode::UnknownTable, "unknown table")
                        }
                        Ok(Some((node, token))) if *node != *me.node => {
                            let node: Arc<str> = node.into();
                            lock(&me.owners).insert(table, (node.clone(), token));
                            me.send_cmd(&client, id, table, node, cmd);
                        }
                        // Nobody runs it: a table of the cluster waiting for
                        // an owner (a take-over, or no game node yet), or
                        // no table at all.
                        Ok(_) => {
                            let exists = me.known.knows(table)
                                || me.known.is_listed(table).await.unwrap_or(true);
                            if exists {
                                error(
                                    &client,
                                    id,
                                    ErrorCode::BrokerUnavailable,
                                    "the table is between owners (a take-over): retry",
                                )
                            } else {
                                error(&client, id, ErrorCode::UnknownTable, "unknown table")
                            }
                        }
                        Err(e) => error(
                            &client,
                            id,
                            ErrorCode::BrokerUnavailable,
                            &format!("cannot find the table's node: {e}; retry"),
                        ),
                    }
                });
            }
        }
        true
    }
}

/// Owner side: what the tables queue for the proxies of one edge goes out
/// through this, one task per edge ([`pump_edge`]) while the edge has
/// proxies here. A proxy's outbox wakes its [`Member`], which marks itself
/// dirty here and wakes the task; the task drains every dirty proxy and
/// sends one [`DELIVER_MANY`] message (more past [`DELIVER_MAX`]).
struct EdgePump {
    edge: Arc<str>,
    state: Mutex<PumpState>,
}

struct PumpState {
    /// Proxies attached and not yet seen closed.
    members: usize,
    /// Proxies with frames (or a close) to take, each once.
    dirty: Vec<Arc<Member>>,
    /// The pump task, waiting for a dirty proxy.
    waker: Option<Waker>,
}

/// One proxy in its edge's pump: the waker set on the proxy's outbox.
/// Holds the proxy weakly (its outbox holds this).
struct Member {
    /// The edge's client id.
    client: u64,
    proxy: Weak<Client>,
    pump: Weak<EdgePump>,
    /// In the pump's dirty list (set by a wake, cleared by the pump just
    /// before it drains the proxy, under whose outbox lock it sets the
    /// waker again: a push after that wakes it again).
    dirty: AtomicBool,
    /// The proxy's next sequence number (only the pump task uses it).
    seq: AtomicU64,
}

impl Wake for Member {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// Called under the proxy's outbox lock (a push or a close): locks
    /// only the pump's state, which is never held while locking an outbox.
    fn wake_by_ref(self: &Arc<Self>) {
        if self.dirty.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(pump) = self.pump.upgrade() else {
            return;
        };
        let waker = {
            let mut s = lock(&pump.state);
            s.dirty.push(self.clone());
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Routes {
    /// Attaches a new proxy of `edge` to the edge's pump (started with the
    /// edge's first proxy): its outbox wakes the pump from now on.
    fn attach(&self, edge: &Arc<str>, client: u64, proxy: &Arc<Client>) {
        let (pump, started) = {
            let mut pumps = lock(&self.pumps);
            match pumps.get(edge) {
                Some(p) => {
                    lock(&p.state).members += 1;
                    (p.clone(), false)
                }
                None => {
                    let p = Arc::new(EdgePump {
                        edge: edge.clone(),
                        state: Mutex::new(PumpState {
                            members: 1,
                            dirty: Vec::new(),
                            waker: None,
                        }),
                    });
                    pumps.insert(edge.clone(), p.clone());
                    (p, true)
                }
            }
        };
        let member = Arc::new(Member {
            client,
            proxy: Arc::downgrade(proxy),
            pump: Arc::downgrade(&pump),
            dirty: AtomicBool::new(false),
            seq: AtomicU64::new(0),
        });
        let waker = Waker::from(member);
        let closed = proxy.outbox.with_queue(|q| {
            let closed = q.closing().is_some();
            if !closed {
                q.set_waker(&waker);
            }
            closed
        });
        if closed {
            // Closed before it was attached: the pump sees it closed.
            waker.wake();
        }
        if started {
            tokio::spawn(pump_edge(self.me.clone(), pump));
        }
    }

    /// A proxy of `edge` closed: by its edge's departure, or overflowed (a
    /// slow player): its seats go away either way.
    fn proxy_closed(&self, edge: &Arc<str>, client: u64, proxy: &Arc<Client>) {
        let mut proxies = lock(&self.proxies);
        let key = (edge.clone(), client);
        let ours = proxies
            .get(&key)
            .is_some_and(|p| Arc::ptr_eq(&p.client, proxy));
        if ours {
            proxies.remove(&key);
            drop(proxies);
            if let Some(engine) = self.engine.upgrade() {
                engine.gone(proxy);
            }
        }
    }
}

/// Owner side: sends what the tables queue for the proxies of `pump`'s
/// edge, every dirty proxy's frames at once in one message, until the edge
/// has no proxy left here.
async fn pump_edge(routes: Weak<Routes>, pump: Arc<EdgePump>) {
    let mut dirty: Vec<Arc<Member>> = Vec::new();
    let mut taken: Vec<Frame> = Vec::new();
    let mut msg = DeliverMany::encoder(DELIVER_MAX);
    loop {
        std::future::poll_fn(|cx| {
            let mut s = lock(&pump.state);
            if s.dirty.is_empty() {
                match &s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => s.waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
            std::mem::swap(&mut s.dirty, &mut dirty);
            Poll::Ready(())
        })
        .await;
        let Some(routes) = routes.upgrade() else {
            return;
        };
        msg.start(&routes.node);
        let mut send = |payload: &[u8]| {
            if let Err(e) = routes.broker.send_to_node(&pump.edge, payload) {
                // The edge will see the gaps and recover its players.
                tracing::debug!(edge = %pump.edge, error = %e, "table messages for remote players lost");
            }
        };
        let mut closed = Vec::new();
        let mut gone = 0;
        for m in dirty.drain(..) {
            m.dirty.store(false, Ordering::Release);
            let Some(proxy) = m.proxy.upgrade() else {
                gone += 1; // dropped without a close: nothing to send
                continue;
            };
            let waker = Waker::from(m.clone());
            let closing = proxy.outbox.with_queue(|q| {
                taken.extend(q.frames.iter().cloned());
                q.advance(taken.len(), 0);
                let closing = q.closing().is_some();
                if !closing {
                    q.set_waker(&waker);
                }
                closing
            });
            let mut seq = m.seq.load(Ordering::Relaxed);
            msg.add(m.client, &mut seq, &taken, &mut send);
            m.seq.store(seq, Ordering::Relaxed);
            taken.clear();
            if closing {
                closed.push((m.client, proxy));
            }
        }
        msg.flush(&mut send);
        if closed.is_empty() && gone == 0 {
            continue;
        }
        for (client, proxy) in &closed {
            routes.proxy_closed(&pump.edge, *client, proxy);
        }
        // The pump ends with its last proxy; under the pumps' lock, so
        // that no proxy attaches to it meanwhile.
        let mut pumps = lock(&routes.pumps);
        let mut s = lock(&pump.state);
        s.members = s.members.saturating_sub(closed.len() + gone);
        if s.members == 0 {
            if pumps.get(&pump.edge).is_some_and(|p| Arc::ptr_eq(p, &pump)) {
                pumps.remove(&pump.edge);
            }
            return;
        }
    }
}

async fn watch_owners(routes: Weak<Routes>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(r) = routes.upgrade() else { return };
        r.check_owners().await;
    }
}

async fn expire(routes: Weak<Routes>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(r) = routes.upgrade() else { return };
        r.expire_now();
    }
}

async fn watch_edges(routes: Weak<Routes>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(r) = routes.upgrade() else { return };
        r.check_edges();
    }
}

fn error(client: &Client, id: u32, code: ErrorCode, message: &str) {
    let msg = ServerMsg::Error {
        id,
        code: code.code(),
        message: message.to_string(),
    };
    client.send(client.encoding.encode_server_bytes(&msg));
}

fn unseat(client: &Client, table: u64, reason: &str) {
    let msg = ServerMsg::Push(Push::Unseat {
        table,
        code: ErrorCode::UnknownTable.code(),
        reason: reason.to_string(),
    });
    client.send(client.encoding.encode_server_bytes(&msg));
}
