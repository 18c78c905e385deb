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
//! player's encoding) is drained by one task per proxy and published back
//! on the edge's node topic in batches, each with the proxy's sequence
//! number; the edge copies the bytes into the real client's outbox.
//!
//! Why a proxy per remote client rather than one publication per table
//! event (what 0009 first sketched): the table code stays the one path for
//! local and remote players, and every order guarantee of a table towards
//! a client holds through the hop (one proxy, one Redis link, one
//! subscriber link). The cost is one publish per remote player per batch
//! instead of one per event; measured in bench/RESULTS.md.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Poll;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Message kinds on a node topic.
const CMD: u8 = 1;
const DELIVER: u8 = 2;
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
            DELIVER => self.on_deliver(&mut payload),
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
        tokio::spawn(drain(self.me.clone(), edge.clone(), client, proxy.clone()));
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

    /// Edge side: what an owner's table sent to one of this node's players.
    fn on_deliver(&self, p: &mut Bytes) -> Option<()> {
        let owner: Arc<str> = get_str(p)?.into();
        let client_id = get_u64(p)?;
        let seq = get_u64(p)?;
        let mut frames = Vec::new();
        while p.has_remaining() {
            let binary = get_u8(p)? == 1;
            let len = get_u32(p)? as usize;
            if p.remaining() < len {
                return None;
            }
            frames.push((binary, p.split_to(len)));
        }
        let mut remotes = lock(&self.remotes);
        let Some(r) = remotes.get_mut(&client_id) else {
            return Some(()); // gone meanwhile
        };
        let Some(client) = r.client.upgrade() else {
            return Some(());
        };
        let expected = r.seq.get(&owner).copied().unwrap_or(0);
        if seq != expected {
            // A lost batch: this player's view of the owner's tables may
            // be missing something. Take them off those tables here; the
            // seats stay theirs at the owner, `sit` brings a snapshot.
            let lost: Vec<u64> = r
                .tables
                .iter()
                .filter(|(_, o)| **o == owner)
                .map(|(t, _)| *t)
                .collect();
            r.tables.retain(|_, o| *o != owner);
            r.seq.remove(&owner);
            drop(remotes);
            tracing::warn!(%owner, seq, expected, "routed table messages lost");
            for t in lost {
                unseat(&client, t, "messages from the table were lost: sit again");
            }
            self.send_gone(&owner, client_id);
            return Some(());
        }
        r.seq.insert(owner, seq + 1);
        for (_, bytes) in frames {
            if !r.pending.is_empty() || !r.expired.is_empty() {
                if let Ok(ServerMsg::Reply { id, .. } | ServerMsg::Error { id, .. }) =
                    client.encoding.decode_server_bytes(&bytes)
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
            client.send(bytes);
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

/// Owner side: publishes what the tables queue for `proxy` to its edge,
/// everything queued at once in one message, until the proxy is closed.
async fn drain(routes: Weak<Routes>, edge: Arc<str>, client: u64, proxy: Arc<Client>) {
    let mut seq = 0u64;
    loop {
        let frames = std::future::poll_fn(|cx| {
            proxy.outbox.with_queue(|q| {
                if q.frames.is_empty() {
                    if q.closing().is_some() {
                        return Poll::Ready(None);
                    }
                    q.set_waker(cx.waker());
                    return Poll::Pending;
                }
                let frames: Vec<Frame> = q.frames.iter().cloned().collect();
                q.advance(frames.len(), 0);
                Poll::Ready(Some(frames))
            })
        })
        .await;
        let Some(routes) = routes.upgrade() else {
            return;
        };
        let Some(frames) = frames else {
            // Closed: by its edge's departure, or overflowed (a slow
            // player): its seats go away either way.
            let mut proxies = lock(&routes.proxies);
            let ours = proxies
                .get(&(edge.clone(), client))
                .is_some_and(|p| Arc::ptr_eq(&p.client, &proxy));
            if ours {
                proxies.remove(&(edge.clone(), client));
                drop(proxies);
                if let Some(engine) = routes.engine.upgrade() {
                    engine.gone(&proxy);
                }
            }
            return;
        };
        let mut payload = BytesMut::with_capacity(64);
        payload.put_u8(DELIVER);
        put_str(&mut payload, &routes.node);
        payload.put_u64(client);
        payload.put_u64(seq);
        for f in &frames {
            let binary = match f {
                Frame::Text(_) | Frame::Spliced(_) => 0,
                Frame::Binary(_) => 1,
                _ => continue,
            };
            payload.put_u8(binary);
            payload.put_u32(f.payload_len() as u32);
            for piece in f.pieces() {
                payload.put_slice(piece);
            }
        }
        seq += 1;
        if let Err(e) = routes.broker.send_to_node(&edge, &payload) {
            // The edge will see the gap in `seq` and recover its player.
            tracing::debug!(%edge, error = %e, "table messages for a remote player lost");
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

fn put_str(b: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    b.put_u16(s.len() as u16);
    b.put_slice(s);
}

fn get_str(p: &mut Bytes) -> Option<String> {
    if p.remaining() < 2 {
        return None;
    }
    let n = p.get_u16() as usize;
    if p.remaining() < n {
        return None;
    }
    String::from_utf8(p.split_to(n).to_vec()).ok()
}

fn get_u8(p: &mut Bytes) -> Option<u8> {
    p.has_remaining().then(|| p.get_u8())
}

fn get_u32(p: &mut Bytes) -> Option<u32> {
    (p.remaining() >= 4).then(|| p.get_u32())
}

fn get_u64(p: &mut Bytes) -> Option<u64> {
    (p.remaining() >= 8).then(|| p.get_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_input_is_refused_not_a_panic() {
        let mut b = BytesMut::new();
        put_str(&mut b, "node");
        b.put_u64(7);
        let full = b.freeze();
        for n in 0..full.len() {
            let mut p = full.slice(..n);
            let parsed = get_str(&mut p).and_then(|_| get_u64(&mut p));
            assert!(parsed.is_none(), "{n} bytes parsed");
        }
        let mut p = full.clone();
        assert_eq!(get_str(&mut p).as_deref(), Some("node"));
        assert_eq!(get_u64(&mut p), Some(7));
    }
}
