//! The hub: which clients are subscribed to which channels, and the fan-out.
//!
//! Channels are spread over shards (a mutex-protected map each) so that
//! subscribe/unsubscribe on unrelated channels do not contend; each channel's
//! subscriber set has its own mutex, so a large fan-out holds only that
//! channel. Subscribers are kept in an `IndexMap` for dense iteration and O(1)
//! removal.
//!
//! Fan-out encodes a publication at most once per encoding (JSON, binary) and
//! pushes the same reference-counted bytes to every subscriber's outbox; it
//! never blocks on a socket. A subscriber whose outbox overflows is closed as a
//! slow consumer by its outbox (see [`crate::outbox`]), not waited for.
//!
//! # Wildcard subscriptions
//! Pattern subscriptions (`news.*`, `news.>`; see [`crate::routing`]) live in
//! one [`Sublist`] token trie behind an `RwLock`, apart from the exact map:
//! exact channels keep their sharded fast path, and a node with no pattern
//! subscriptions pays one atomic load per publication for the feature (the
//! trie is consulted only when the pattern count is non-zero). Publications
//! take the read lock; only pattern subscribe/unsubscribe take the write lock.
//! One lock suffices because a match costs a few hash lookups, not a scan.
//!
//! A client receives each publication once, however many of its subscriptions
//! match it (an exact one and several patterns): pattern matches are skipped
//! when the client is an exact subscriber of the channel or has already been
//! served by another pattern. The push carries the concrete channel; the client
//! SDK routes it to its matching pattern subscriptions. Pattern subscribers get
//! the same lazily encoded frames as exact ones.
//!
//! Ordering: the broker calls [`Deliver::deliver`] one publication at a time
//! per channel, in offset order, and the whole delivery (exact and pattern
//! subscribers) happens within that call, so a pattern subscriber sees each
//! channel's publications in offset order. Publications of different channels
//! matched by one pattern are not ordered relative to each other.
//!
//! # Presence
//! Each channel's subscribers are listed with their [`Client`], which is what
//! `presence` answers (exact subscribers only: a pattern is not a member of the
//! channels it matches, and neither causes nor receives join/leave pushes).
//! Beside that list, a channel keeps the (usually empty) set of *listeners*,
//! the subscribers that asked for join/leave. When a client subscribes or
//! leaves (unsubscribe, disconnect), a `join`/`leave` push is encoded at most
//! once per encoding and queued for each listener other than that client; a
//! channel with no listener pays one emptiness check. Pushes are queued under
//! the channel's subscriber mutex, like publications, so a listener sees joins,
//! leaves and publications of one channel in the order they happened.
//!
//! # Observer
//! An optional observer ([`Hub::set_observer`]; the Pusher webhooks) hears
//! when an exact channel gains its first subscriber or loses its last, and
//! when a user's first connection joins a channel or its last one leaves. It
//! is called under the channel's locks, in the order things happened, so it
//! must only queue (a bounded, non-blocking send).
//!
//! In a cluster ([`Hub::set_cluster_events`], set by the Redis broker) one
//! node's view is not the truth: a channel vacated here may be occupied on
//! another node, and a user's last connection here may not be their last.
//! There the hub tells its observer nothing by itself and renders no user
//! edges from its own counts; the broker, which sees the cluster-wide
//! transitions in Redis, reports them through [`Hub::notify`] and
//! [`Hub::announce`] instead (docs/decisions/0012-pusher-cluster.md).
//!
//! Lock order: a shard, then a channel's subscriber mutex, then the pattern
//! read lock; the pattern write lock is never held while taking another hub
//! lock. Join/leave pushes are queued after the shard lock is released.

use crate::broker::{Deliver, Publication};
use crate::client::Client;
use crate::outbox::{Deflater, Frame, PushOutcome, Spliced};
use crate::render::{Render, Rendered};
use crate::routing::Sublist;
use herald_proto::{ClientInfo, Encoding, Push, ServerMsg};
use indexmap::IndexMap;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

const SHARDS: usize = 64;

/// One exact channel's members.
#[derive(Default)]
struct Members {
    /// Every subscriber: fan-out and presence.
    subs: IndexMap<u64, Arc<Client>>,
    /// The subscribers that asked for join/leave pushes (a subset of `subs`).
    listeners: IndexMap<u64, Arc<Client>>,
    /// How many of `subs` each non-empty user id has: `presence_stats` reads
    /// its length, so counting distinct users costs O(1) at any channel size.
    users: HashMap<Box<str>, u32>,
}

impl Members {
    fn add_user(&mut self, user: &str) {
        if !user.is_empty() {
            *self.users.entry(user.into()).or_insert(0) += 1;
        }
    }

    fn remove_user(&mut self, user: &str) {
        if let Some(n) = self.users.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                self.users.remove(user);
            }
        }
    }

    /// Queues a join or leave push about `who` for every listener but `who`
    /// (`edge`: the user's first connection joined or last one left).
    fn announce(&self, channel: &str, who: &Client, join: bool, edge: bool) {
        if self.listeners.is_empty() {
            return;
        }
        self.announce_info(channel, who.info(), Some(who.id), join, edge, false);
    }

    /// Queues a join or leave push about `info` for every listener but
    /// `except` (only for rendering listeners with `rendered_only`): encoded
    /// once per encoding, rendered once per renderer.
    fn announce_info(
        &self,
        channel: &str,
        info: ClientInfo,
        except: Option<u64>,
        join: bool,
        edge: bool,
        rendered_only: bool,
    ) {
        let mut rendered: Vec<(usize, Option<Frame>)> = Vec::new();
        let (mut json, mut binary) = (None, None);
        let mut msg = None;
        for (id, listener) in &self.listeners {
            if Some(*id) == except {
                continue;
            }
            if let Some(r) = &listener.render {
                let key = renderer_key(r);
                let i = match rendered.iter().position(|(k, _)| *k == key) {
                    Some(i) => i,
                    None => {
                        rendered.push((key, r.presence(channel, &info, join, edge)));
                        rendered.len() - 1
                    }
                };
                if let Some(frame) = &rendered[i].1 {
                    listener.outbox.push(frame.clone());
                }
                continue;
            }
            if rendered_only {
                continue;
            }
            let msg = msg.get_or_insert_with(|| {
                ServerMsg::Push(if join {
                    Push::Join {
                        channel: channel.to_string(),
                        info: info.clone(),
                    }
                } else {
                    Push::Leave {
                        channel: channel.to_string(),
                        info: info.clone(),
                    }
                })
            });
            let frame = match listener.encoding {
                Encoding::Json => {
                    json.get_or_insert_with(|| Frame::Text(Encoding::Json.encode_server_bytes(msg)))
                }
                Encoding::Binary => binary.get_or_insert_with(|| {
                    Frame::Binary(Encoding::Binary.encode_server_bytes(msg))
                }),
            };
            listener.outbox.push(frame.clone());
        }
    }
}

/// Identifies a renderer by the address of its shared value: clients holding
/// the same `Arc` share its frames.
fn renderer_key(r: &Arc<dyn Render>) -> usize {
    Arc::as_ptr(r) as *const () as usize
}

type Subscribers = Mutex<Members>;

/// One shard of the exact-channel index: channel name to its subscribers.
type Shard = Mutex<HashMap<Arc<str>, Arc<Subscribers>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// A client as a value of the pattern trie: equal and hashed by client id, so
/// that removal finds it in O(1).
struct PatternSub(Arc<Client>);

impl PartialEq for PatternSub {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for PatternSub {}

impl Hash for PatternSub {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}

/// Hashes client ids for the per-publication dedupe set. Ids are assigned by
/// the node (sequential, never chosen by clients), so a multiplicative mix is
/// enough and much cheaper than SipHash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// Dedupe sets larger than this are freed after use rather than kept per thread.
const SEEN_KEEP: usize = 4096;

thread_local! {
    /// Clients already served by a pattern for the publication being delivered
    /// on this thread: reused so that delivery does not allocate.
    static SEEN: RefCell<IdSet> = RefCell::new(IdSet::default());
}

/// Runs `f` with an empty dedupe set (the thread's, unless it is in use).
fn with_seen<R>(f: impl FnOnce(&mut IdSet) -> R) -> R {
    SEEN.with(|cell| match cell.try_borrow_mut() {
        Ok(mut seen) => {
            seen.clear();
            let r = f(&mut seen);
            if seen.capacity() > SEEN_KEEP {
                *seen = IdSet::default();
            }
            r
        }
        Err(_) => f(&mut IdSet::default()),
    })
}

/// What the hub tells its observer (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelEvent<'a> {
    /// The channel got its first subscriber on this node.
    Occupied,
    /// The channel lost its last subscriber on this node.
    Vacated,
    /// This user's first connection subscribed.
    UserAdded(&'a str),
    /// This user's last connection left.
    UserRemoved(&'a str),
}

/// Receives [`ChannelEvent`]s: the channel and what happened.
pub type Observer = Box<dyn Fn(&str, ChannelEvent<'_>) + Send + Sync>;

/// Hears that a channel's member count changed (see [`Hub::set_count_hook`]).
pub type CountHook = Box<dyn Fn(&str) + Send + Sync>;

/// The subscription index of one node.
pub struct Hub {
    hasher: RandomState,
    shards: Box<[Shard]>,
    /// Wildcard subscriptions, all in one trie (see the module docs).
    patterns: RwLock<Sublist<PatternSub>>,
    /// `patterns.len()`, readable without the lock: zero keeps the trie off the
    /// publish path entirely.
    pattern_count: AtomicUsize,
    /// Time to hand one publication to every local subscriber's outbox.
    pub fanout: crate::metrics::Histogram,
    /// Publications that overflowed a subscriber's queue (slow consumers).
    pub overflows: crate::metrics::Counter,
    /// Hears occupancy and user changes, if set.
    observer: std::sync::OnceLock<Observer>,
    /// Hears every change of a channel's member count, if set.
    count_hook: std::sync::OnceLock<CountHook>,
    /// Cluster mode: occupancy and user edges come from the broker, not from
    /// this node's counts (see the module docs).
    cluster: std::sync::atomic::AtomicBool,
    /// Compresses pushes for permessage-deflate clients, if set.
    deflater: std::sync::OnceLock<Deflater>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    /// An empty hub.
    pub fn new() -> Hub {
        Hub {
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            patterns: RwLock::new(Sublist::new()),
            pattern_count: AtomicUsize::new(0),
            fanout: Default::default(),
            overflows: Default::default(),
            observer: std::sync::OnceLock::new(),
            count_hook: std::sync::OnceLock::new(),
            cluster: std::sync::atomic::AtomicBool::new(false),
            deflater: std::sync::OnceLock::new(),
        }
    }

    /// Sets how pushes are compressed for clients with
    /// [`Client::deflate`] (once; a second call is ignored). Unset, they get
    /// plain pushes, which their writer may still compress.
    pub fn set_deflater(&self, deflater: Deflater) {
        let _ = self.deflater.set(deflater);
    }

    /// Sets the observer (once; a second call is ignored).
    pub fn set_observer(&self, observer: Observer) {
        let _ = self.observer.set(observer);
    }

    /// Sets the count hook (once; a second call is ignored): it is called
    /// with the channel whenever an exact subscriber joins or leaves it (on
    /// one node from [`Hub::subscribe_with`] and [`Hub::unsubscribe`], in a
    /// cluster from [`Hub::announce`], for every node's members). Called
    /// under the channel's lock: it must only take note (the Pusher
    /// `subscription_count` events, sent later and throttled).
    pub fn set_count_hook(&self, hook: CountHook) {
        let _ = self.count_hook.set(hook);
    }

    fn count_changed(&self, channel: &str) {
        if let Some(h) = self.count_hook.get() {
            h(channel);
        }
    }

    /// Cluster mode (see the module docs): from now on this node's own
    /// occupancy and user edges are not reported; the caller reports the
    /// cluster's through [`Hub::notify`] and [`Hub::announce`].
    pub fn set_cluster_events(&self) {
        self.cluster.store(true, Ordering::Relaxed);
    }

    fn clustered(&self) -> bool {
        self.cluster.load(Ordering::Relaxed)
    }

    /// Whether an observer is set (a cluster broker asks Redis for the
    /// transitions only then).
    pub fn observed(&self) -> bool {
        self.observer.get().is_some()
    }

    /// A local transition, for the observer unless in cluster mode.
    fn observe(&self, channel: &str, event: ChannelEvent<'_>) {
        if !self.clustered() {
            self.notify(channel, event);
        }
    }

    /// Tells the observer about `event` on `channel` (a cluster broker's
    /// report of a cluster-wide transition).
    pub fn notify(&self, channel: &str, event: ChannelEvent<'_>) {
        if let Some(o) = self.observer.get() {
            o(channel, event);
        }
    }

    fn shard(&self, channel: &str) -> &Shard {
        &self.shards[(self.hasher.hash_one(channel) as usize) % SHARDS]
    }

    fn subscribers(&self, channel: &str) -> Option<Arc<Subscribers>> {
        lock(self.shard(channel)).get(channel).cloned()
    }

    /// Adds `client` to `channel`. Returns false if it was already there.
    pub fn subscribe(&self, channel: &str, client: &Arc<Client>) -> bool {
        self.subscribe_with(channel, client, false)
    }

    /// Adds `client` to `channel`, announcing it to the channel's join/leave
    /// listeners; with `join_leave` it becomes one of them (it is not told
    /// about itself). Returns false if it was already there.
    pub fn subscribe_with(&self, channel: &str, client: &Arc<Client>, join_leave: bool) -> bool {
        let mut shard = lock(self.shard(channel));
        let subs = shard
            .entry(Arc::from(channel))
            .or_insert_with(|| Arc::new(Mutex::new(Members::default())))
            .clone();
        let mut members = lock(&subs);
        // Locked before the shard is released, so the channel cannot be
        // dropped as empty before `client` is in it.
        drop(shard);
        if members.subs.contains_key(&client.id) {
            return false;
        }
        let first = !members.users.contains_key(client.user());
        if members.subs.is_empty() {
            self.observe(channel, ChannelEvent::Occupied);
        }
        if first && !client.user().is_empty() {
            self.observe(channel, ChannelEvent::UserAdded(client.user()));
        }
        members.announce(channel, client, true, first && !self.clustered());
        members.subs.insert(client.id, client.clone());
        members.add_user(client.user());
        if join_leave {
            members.listeners.insert(client.id, client.clone());
        }
        if !self.clustered() {
            self.count_changed(channel);
        }
        true
    }

    /// Removes client `id` from `channel`, announcing its leave to the
    /// channel's listeners; drops the channel when it empties. Returns false
    /// if it was not subscribed.
    pub fn unsubscribe(&self, channel: &str, id: u64) -> bool {
        let mut shard = lock(self.shard(channel));
        let Some(subs) = shard.get(channel).cloned() else {
            return false;
        };
        let mut members = lock(&subs);
        let Some(gone) = members.subs.swap_remove(&id) else {
            return false;
        };
        members.remove_user(gone.user());
        members.listeners.swap_remove(&id);
        let last = !members.users.contains_key(gone.user());
        if last && !gone.user().is_empty() {
            self.observe(channel, ChannelEvent::UserRemoved(gone.user()));
        }
        if members.subs.is_empty() {
            // No one left to tell.
            shard.remove(channel);
            crate::shard::shrink_sparse(&mut shard);
            self.observe(channel, ChannelEvent::Vacated);
            return true;
        }
        drop(shard);
        members.announce(channel, &gone, false, last && !self.clustered());
        if !self.clustered() {
            self.count_changed(channel);
        }
        true
    }

    /// Adds `client` to the wildcard `pattern`, which the caller has checked
    /// with [`crate::channel::validate_pattern`]. Returns false if it was
    /// already there. Delivery through it starts when this returns.
    pub fn subscribe_pattern(&self, pattern: &str, client: &Arc<Client>) -> bool {
        self.subscribe_pattern_then(pattern, client, || {})
    }

    /// [`Hub::subscribe_pattern`], calling `announce` (which queues the
    /// subscribe reply on `client`) after the pattern is in place and before
    /// any publication can be delivered through it. So the reply comes
    /// before every delivery through the pattern, and a publication made
    /// after the client read the reply is delivered: the fan-out waits for
    /// this lock. `announce` may push to outboxes (the fan-out's lock order,
    /// hub then outbox) but must not touch the hub.
    pub fn subscribe_pattern_then(
        &self,
        pattern: &str,
        client: &Arc<Client>,
        announce: impl FnOnce(),
    ) -> bool {
        let mut patterns = write(&self.patterns);
        let added = patterns.insert(pattern, PatternSub(client.clone()));
        self.pattern_count.store(patterns.len(), Ordering::Release);
        announce();
        added
    }

    /// Removes `client` from the wildcard `pattern`. Returns false if it was not
    /// subscribed. No publication reaches it through `pattern` once this returns.
    pub fn unsubscribe_pattern(&self, pattern: &str, client: &Arc<Client>) -> bool {
        let mut patterns = write(&self.patterns);
        let removed = patterns.remove(pattern, &PatternSub(client.clone()));
        self.pattern_count.store(patterns.len(), Ordering::Release);
        removed
    }

    /// Whether `client` is subscribed to the wildcard `pattern`.
    pub fn has_pattern(&self, pattern: &str, client: &Arc<Client>) -> bool {
        read(&self.patterns).contains(pattern, &PatternSub(client.clone()))
    }

    /// Number of wildcard subscriptions (pattern, client) on this node.
    pub fn pattern_count(&self) -> usize {
        self.pattern_count.load(Ordering::Acquire)
    }

    /// How many clients are subscribed to `channel` exactly (pattern
    /// subscribers are not counted).
    pub fn subscriber_count(&self, channel: &str) -> usize {
        self.subscribers(channel).map_or(0, |s| lock(&s).subs.len())
    }

    /// Whether client `id` is subscribed to `channel` exactly: O(1) (the
    /// admin dashboard's view of one connection's subscriptions).
    pub fn is_subscribed(&self, channel: &str, id: u64) -> bool {
        self.subscribers(channel)
            .is_some_and(|s| lock(&s).subs.contains_key(&id))
    }

    /// Who is subscribed to `channel` exactly (pattern subscribers are not
    /// listed).
    pub fn presence(&self, channel: &str) -> Vec<ClientInfo> {
        let Some(s) = self.subscribers(channel) else {
            return Vec::new();
        };
        // Only the handles are taken under the channel's lock (its fan-out
        // waits meanwhile); the entries are built after it is released.
        let members: Vec<Arc<Client>> = lock(&s).subs.values().cloned().collect();
        members.iter().map(|c| c.info()).collect()
    }

    /// How many connections, and how many distinct non-empty user ids among
    /// them, are subscribed to `channel` exactly: O(1), whatever its size.
    pub fn presence_stats(&self, channel: &str) -> (u64, u64) {
        self.subscribers(channel).map_or((0, 0), |s| {
            let members = lock(&s);
            (members.subs.len() as u64, members.users.len() as u64)
        })
    }

    /// Counts `client`'s user among `channel`'s users, for a client that was
    /// subscribed before its identity was set (a Pusher client identifies
    /// itself with its first presence subscription). Call it once per such
    /// subscription, from the connection that owns the client, so no
    /// unsubscribe of it can run in between.
    pub fn count_user(&self, channel: &str, client: &Client) {
        if let Some(s) = self.subscribers(channel) {
            let mut members = lock(&s);
            if members.subs.contains_key(&client.id) {
                members.add_user(client.user());
            }
        }
    }

    /// How many subscribers of `channel` asked for join/leave pushes.
    pub fn listener_count(&self, channel: &str) -> usize {
        self.subscribers(channel)
            .map_or(0, |s| lock(&s).listeners.len())
    }

    /// Queues a join or leave push about a member, as the cluster reports
    /// it, for the listeners of `channel` here. `edge`: the user's first
    /// connection in the whole cluster joined, or their last one left.
    /// `own`: the member is this node's, whose Herald listeners were told
    /// already by [`Hub::subscribe_with`] and [`Hub::unsubscribe`], so only
    /// rendering listeners (which wait for the cluster's edges) hear it, and
    /// not the member itself.
    pub fn announce(&self, channel: &str, info: ClientInfo, join: bool, edge: bool, own: bool) {
        if let Some(s) = self.subscribers(channel) {
            let members = lock(&s);
            self.count_changed(channel);
            if !members.listeners.is_empty() {
                let except = if own {
                    u64::from_str_radix(&info.client, 16).ok()
                } else {
                    None
                };
                members.announce_info(channel, info, except, join, edge, own);
            }
        }
    }

    /// Queues `frame` for the exact subscribers of `channel` that render
    /// with `render` (compared by pointer, as for publications); returns how
    /// many got it. Queued under the channel's lock, so it keeps its place
    /// among the channel's publications.
    pub fn push_rendered(&self, channel: &str, render: &Arc<dyn Render>, frame: &Frame) -> usize {
        let Some(s) = self.subscribers(channel) else {
            return 0;
        };
        let key = renderer_key(render);
        let members = lock(&s);
        let mut n = 0;
        for c in members.subs.values() {
            if c.render.as_ref().is_some_and(|r| renderer_key(r) == key) {
                c.outbox.push(frame.clone());
                n += 1;
            }
        }
        n
    }

    /// Closes every exact subscriber of `channel` with `code` (after what is
    /// already queued for it): the node can no longer promise them an
    /// unbroken stream, and reconnecting with recovery tells them what was
    /// lost. Returns how many were closed.
    pub fn close_subscribers(&self, channel: &str, code: u16) -> usize {
        let Some(s) = self.subscribers(channel) else {
            return 0;
        };
        let members: Vec<Arc<Client>> = lock(&s).subs.values().cloned().collect();
        for c in &members {
            c.outbox.close(code, false);
        }
        members.len()
    }

    /// The channels with at least one exact subscriber on this node.
    pub fn channels(&self) -> Vec<Arc<str>> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(lock(shard).keys().cloned());
        }
        out
    }

    /// Number of channels with at least one subscriber.
    pub fn channel_count(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}

/// From this many bytes of JSON data on, a JSON push is spliced
/// ([`Frame::Spliced`]: head, the publication's data, `}}`) rather than
/// copied into one buffer. Below it the copy is cheap and one slice per
/// frame keeps the vectored write short (many tiny slices cost the kernel
/// more than the copy: bench/RESULTS.md, "Where the fan-out's time goes").
pub const SPLICE_MIN: usize = 2048;

/// Encodes a publication push for one encoding, as the frame type it travels in.
fn encode_push(p: &Publication, encoding: Encoding) -> Frame {
    match encoding {
        Encoding::Json if p.json && p.data.len() >= SPLICE_MIN => {
            // Large data a JSON publisher sent as JSON text: shared, not
            // copied (`Spliced`'s docs say why).
            let mut head = bytes::BytesMut::new();
            herald_proto::json::encode_json_publication_head(&p.channel, p.offset, &mut head);
            Frame::Spliced(Arc::new(Spliced::new(
                head.freeze(),
                p.data.clone(),
                herald_proto::json::JSON_PUBLICATION_TAIL,
            )))
        }
        Encoding::Json => {
            // No second look at data a JSON publisher sent as JSON text
            // (`Publication::json`; decision 0011).
            let mut out = bytes::BytesMut::new();
            let (channel, data) = (&p.channel, &p.data);
            herald_proto::json::encode_json_publication(channel, p.offset, data, p.json, &mut out);
            Frame::Text(out.freeze())
        }
        Encoding::Binary => Frame::Binary(encoding.encode_server_bytes(&ServerMsg::Push(
            Push::Publication {
                channel: p.channel.to_string(),
                offset: p.offset,
                data: p.data.clone(),
            },
        ))),
    }
}

/// One publication's frames, each encoded on first use and then shared.
struct Frames<'a> {
    publication: &'a Publication,
    json: Option<Frame>,
    binary: Option<Frame>,
    /// The hub's compressor, if any, and the compressed pushes it made, once
    /// per encoding, for clients with [`Client::deflate`]; `Some(None)`: the
    /// push is below the threshold, and goes plain.
    deflater: Option<Deflater>,
    json_deflated: Option<Option<Frame>>,
    binary_deflated: Option<Option<Frame>>,
    raw: Option<Frame>,
    /// Frames of other protocols, one per renderer (usually none or one: a
    /// channel belongs to one Pusher app).
    rendered: Vec<(usize, Option<Rendered>)>,
}

impl<'a> Frames<'a> {
    fn new(publication: &'a Publication, deflater: Option<Deflater>) -> Frames<'a> {
        Frames {
            publication,
            json: None,
            binary: None,
            deflater,
            json_deflated: None,
            binary_deflated: None,
            raw: None,
            rendered: Vec::new(),
        }
    }

    /// The frame `client` gets for this publication, encoded on first use;
    /// `None` when there is nothing to send it (as good as delivered).
    fn frame_for(&mut self, client: &Client) -> Option<Frame> {
        let p = self.publication;
        if let Some(r) = &client.render {
            let key = renderer_key(r);
            let i = match self.rendered.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    self.rendered.push((key, r.publication(p)));
                    self.rendered.len() - 1
                }
            };
            return match &self.rendered[i].1 {
                Some(f) if f.except != Some(client.id) => Some(f.frame.clone()),
                _ => None,
            };
        }
        if client.raw {
            let frame = self
                .raw
                .get_or_insert_with(|| Frame::Publication(Arc::new(p.clone())));
            return Some(frame.clone());
        }
        let frame = match client.encoding {
            Encoding::Json => self
                .json
                .get_or_insert_with(|| encode_push(p, Encoding::Json)),
            Encoding::Binary => self
                .binary
                .get_or_insert_with(|| encode_push(p, Encoding::Binary)),
        };
        if let (true, Some(d)) = (client.deflate, self.deflater) {
            let slot = match client.encoding {
                Encoding::Json => &mut self.json_deflated,
                Encoding::Binary => &mut self.binary_deflated,
            };
            if let Some(deflated) = slot.get_or_insert_with(|| d.deflate(frame)) {
                return Some(deflated.clone());
            }
        }
        Some(frame.clone())
    }

    fn push_to(&mut self, client: &Client) -> PushOutcome {
        match self.frame_for(client) {
            Some(f) => client.outbox.push(f),
            None => PushOutcome::Queued,
        }
    }
}

/// A batch of publications of one channel, each encoded on first use: what
/// [`Hub::deliver_batch`] hands each subscriber in one push.
struct BatchFrames<'a> {
    frames: Vec<Frames<'a>>,
    /// Reused for each subscriber's frames.
    buf: Vec<Frame>,
}

impl BatchFrames<'_> {
    /// Queues every frame of the batch for `client` under one lock of its
    /// outbox (one wake at most); the slow-consumer policy applies as if
    /// they were pushed one by one.
    fn push_to(&mut self, client: &Client) -> PushOutcome {
        self.buf
            .extend(self.frames.iter_mut().filter_map(|f| f.frame_for(client)));
        if self.buf.is_empty() {
            return PushOutcome::Queued;
        }
        client.outbox.push_many(self.buf.drain(..))
    }
}

impl Deliver for Hub {
    fn deliver(&self, p: &Publication) {
        let start = std::time::Instant::now();
        self.deliver_inner(p);
        self.fanout.observe(start.elapsed());
    }

    /// Fans out several publications of **one channel**, given in offset
    /// order, as one: each subscriber (exact or pattern) gets all of its
    /// frames in one push, under one lock of its outbox, so its writer is
    /// woken once for the lot and finds them queued together (fewer, larger
    /// writes). What each subscriber receives, and in which order, is what
    /// calling [`Deliver::deliver`] on each in turn would give; a subscriber
    /// that overflows inside the batch is closed as a slow consumer (3001)
    /// and nobody else waits. The Redis broker hands it what one read of its
    /// subscriber link brought for a channel (decision 0003). Publications
    /// of different channels fall back to one fan-out each.
    fn deliver_batch(&self, pubs: &[Publication]) {
        let Some(first) = pubs.first() else { return };
        let start = std::time::Instant::now();
        if pubs.len() == 1 || pubs.iter().any(|p| p.channel != first.channel) {
            for p in pubs {
                self.deliver_inner(p);
            }
        } else {
            self.deliver_batch_inner(pubs);
        }
        // The histogram counts publications: each gets its share.
        let each = start.elapsed() / pubs.len() as u32;
        for _ in pubs {
            self.fanout.observe(each);
        }
    }
}

impl Hub {
    fn deliver_batch_inner(&self, pubs: &[Publication]) {
        let Some(first) = pubs.first() else { return };
        let mut batch = BatchFrames {
            frames: pubs
                .iter()
                .map(|p| Frames::new(p, self.deflater.get().copied()))
                .collect(),
            buf: Vec::with_capacity(pubs.len()),
        };
        let exact = self.subscribers(&first.channel);
        let exact = exact.as_deref().map(lock);
        if let Some(subs) = &exact {
            for client in subs.subs.values() {
                if batch.push_to(client) == PushOutcome::Overflow {
                    self.overflows.inc();
                }
            }
        }
        if self.pattern_count.load(Ordering::Acquire) == 0 {
            return;
        }
        let patterns = read(&self.patterns);
        with_seen(|seen| {
            patterns.for_each_match(&first.channel, |PatternSub(client)| {
                let served = exact
                    .as_ref()
                    .is_some_and(|s| s.subs.contains_key(&client.id));
                if !served
                    && seen.insert(client.id)
                    && batch.push_to(client) == PushOutcome::Overflow
                {
                    self.overflows.inc();
                }
            });
        });
    }

    fn deliver_inner(&self, p: &Publication) {
        let mut frames = Frames::new(p, self.deflater.get().copied());
        let exact = self.subscribers(&p.channel);
        let exact = exact.as_deref().map(lock);
        if let Some(subs) = &exact {
            for client in subs.subs.values() {
                if frames.push_to(client) == PushOutcome::Overflow {
                    self.overflows.inc();
                }
            }
        }
        if self.pattern_count.load(Ordering::Acquire) == 0 {
            return;
        }
        // The exact set stays locked so that "already served" is checked
        // against the very set that was served.
        let patterns = read(&self.patterns);
        with_seen(|seen| {
            patterns.for_each_match(&p.channel, |PatternSub(client)| {
                let served = exact
                    .as_ref()
                    .is_some_and(|s| s.subs.contains_key(&client.id));
                if !served
                    && seen.insert(client.id)
                    && frames.push_to(client) == PushOutcome::Overflow
                {
                    self.overflows.inc();
                }
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn client(id: u64, enc: Encoding) -> Arc<Client> {
        Arc::new(Client::new(id, enc, 1 << 20, 0))
    }

    #[test]
    fn is_subscribed_is_exact_membership() {
        let hub = Hub::new();
        let (a, b) = (client(1, Encoding::Json), client(2, Encoding::Json));
        hub.subscribe("x", &a);
        hub.subscribe_pattern("x*", &b);
        assert!(hub.is_subscribed("x", 1));
        assert!(
            !hub.is_subscribed("x", 2),
            "a pattern is not an exact subscription"
        );
        assert!(!hub.is_subscribed("y", 1));
        hub.unsubscribe("x", 1);
        assert!(!hub.is_subscribed("x", 1));
    }

    #[test]
    fn fanout_shares_one_encoding_per_format() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Json);
        let c = client(3, Encoding::Binary);
        for x in [&a, &b, &c] {
            assert!(hub.subscribe("news", x));
        }
        assert!(!hub.subscribe("news", &a));
        hub.deliver(&Publication {
            channel: "news".into(),
            offset: 1,
            data: Bytes::from_static(b"{\"x\":1}"),
            json: false,
        });
        let ptr = |cl: &Arc<Client>| {
            cl.outbox
                .with_queue(|q| q.frames.front().map(|f| f.payload().as_ptr() as usize))
        };
        assert_eq!(ptr(&a), ptr(&b), "JSON subscribers share the same bytes");
        assert_ne!(ptr(&a), ptr(&c));
        assert!(matches!(
            c.outbox.with_queue(|q| q.frames.front().cloned()),
            Some(Frame::Binary(_))
        ));
    }

    /// A stand-in compressor (core has no DEFLATE): the pieces reversed.
    fn reverse(pieces: &[&[u8]], out: &mut Vec<u8>) {
        let start = out.len();
        for p in pieces {
            out.extend_from_slice(p);
        }
        out[start..].reverse();
    }

    /// permessage-deflate subscribers of one encoding share one compressed
    /// push; the others get the plain one; short pushes stay plain.
    #[test]
    fn fanout_compresses_once_per_encoding() {
        let hub = Hub::new();
        hub.set_deflater(Deflater {
            compress: reverse,
            threshold: 60,
        });
        let deflating = |id, enc| Arc::new(Client::new(id, enc, 1 << 20, 0).with_deflate(true));
        let (a, b) = (deflating(1, Encoding::Json), deflating(2, Encoding::Json));
        let c = deflating(3, Encoding::Binary);
        let plain = client(4, Encoding::Json);
        for x in [&a, &b, &c, &plain] {
            assert!(hub.subscribe("zip", x));
        }
        let publish = |offset, data: &'static [u8]| {
            hub.deliver(&Publication {
                channel: "zip".into(),
                offset,
                data: Bytes::from_static(data),
                json: true,
            })
        };
        publish(
            1,
            b"{\"long enough\":\"to be compressed in either encoding, JSON or binary\"}",
        );
        let take = |cl: &Arc<Client>| cl.outbox.with_queue(|q| q.frames.pop_front());
        let (Some(Frame::DeflatedText(fa)), Some(Frame::DeflatedText(fb))) = (take(&a), take(&b))
        else {
            panic!("JSON deflate subscribers get a compressed push");
        };
        assert_eq!(fa.as_ptr(), fb.as_ptr(), "compressed once, shared");
        assert!(matches!(take(&c), Some(Frame::DeflatedBinary(_))));
        let plain_push = take(&plain).expect("a push");
        assert!(matches!(plain_push, Frame::Text(_)));
        let mut unreversed = fa.to_vec();
        unreversed.reverse();
        assert_eq!(unreversed, plain_push.payload().to_vec());
        publish(2, b"1");
        assert!(
            matches!(take(&a), Some(Frame::Text(_))),
            "below the threshold"
        );
    }

    #[test]
    fn large_json_data_is_spliced_into_the_push_not_copied() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Json);
        let c = client(3, Encoding::Binary);
        for x in [&a, &b, &c] {
            assert!(hub.subscribe("big", x));
        }
        let rows = vec!["[1,\"x\",2.5]"; SPLICE_MIN / 11 + 1].join(",");
        let data = Bytes::from(format!("[{rows}]"));
        assert!(data.len() >= SPLICE_MIN);
        hub.deliver(&Publication {
            channel: "big".into(),
            offset: 7,
            data: data.clone(),
            json: true,
        });
        let front = |cl: &Arc<Client>| cl.outbox.with_queue(|q| q.frames.front().cloned());
        let Some(Frame::Spliced(sa)) = front(&a) else {
            panic!("a large JSON push is spliced");
        };
        let Some(Frame::Spliced(sb)) = front(&b) else {
            panic!("a large JSON push is spliced");
        };
        // The publication's own bytes, shared by every JSON subscriber.
        assert_eq!(sa.body().as_ptr(), data.as_ptr());
        assert!(Arc::ptr_eq(&sa, &sb));
        // The same text as the push in one buffer.
        let mut whole = bytes::BytesMut::new();
        herald_proto::json::encode_json_publication("big", 7, &data, true, &mut whole);
        assert_eq!(sa.to_bytes(), whole.freeze());
        assert_eq!(
            a.encoding.decode_server(&sa.to_bytes()).ok(),
            Some(ServerMsg::Push(Push::Publication {
                channel: "big".into(),
                offset: 7,
                data: data.clone(),
            }))
        );
        assert!(matches!(front(&c), Some(Frame::Binary(_))));
        // Below the threshold, or data not known to be JSON text: one buffer.
        for (small, json) in [(Bytes::from_static(b"[1,2]"), true), (data.clone(), false)] {
            let d = client(4, Encoding::Json);
            assert!(hub.subscribe("other", &d));
            hub.deliver(&Publication {
                channel: "other".into(),
                offset: 1,
                data: small,
                json,
            });
            assert!(matches!(front(&d), Some(Frame::Text(_))));
            hub.unsubscribe("other", 4);
        }
    }

    #[test]
    fn unsubscribe_drops_empty_channels() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        hub.subscribe("x", &a);
        assert_eq!(hub.channel_count(), 1);
        assert!(hub.unsubscribe("x", 1));
        assert!(!hub.unsubscribe("x", 1));
        assert_eq!(hub.channel_count(), 0);
        hub.deliver(&Publication {
            channel: "x".into(),
            offset: 2,
            data: Bytes::new(),
            json: false,
        });
        assert!(a.outbox.is_empty());
    }

    fn publish(hub: &Hub, channel: &str, offset: u64) {
        hub.deliver(&Publication {
            channel: channel.into(),
            offset,
            data: Bytes::from_static(b"1"),
            json: false,
        });
    }

    fn batch(channel: &str, offsets: std::ops::RangeInclusive<u64>) -> Vec<Publication> {
        offsets
            .map(|offset| Publication {
                channel: channel.into(),
                offset,
                data: Bytes::from(offset.to_string()),
                json: false,
            })
            .collect()
    }

    fn offsets(c: &Client) -> Vec<u64> {
        take(c)
            .into_iter()
            .map(|m| match m {
                ServerMsg::Push(Push::Publication { offset, .. }) => offset,
                other => panic!("not a publication: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_batch_reaches_every_subscriber_in_order_once() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Binary);
        let p = client(3, Encoding::Json);
        assert!(hub.subscribe("news.sport", &a));
        assert!(hub.subscribe("news.sport", &b));
        // An exact subscriber with a pattern too: still once.
        assert!(hub.subscribe_pattern("news.*", &a));
        assert!(hub.subscribe_pattern("news.*", &p));
        assert!(hub.subscribe_pattern("news.>", &p));
        hub.deliver_batch(&batch("news.sport", 1..=5));
        for c in [&a, &b, &p] {
            assert_eq!(offsets(c), [1, 2, 3, 4, 5], "client {}", c.id);
        }
        // JSON subscribers share each publication's bytes, as with deliver.
        hub.deliver_batch(&batch("news.sport", 6..=7));
        let first = |c: &Client| {
            c.outbox
                .with_queue(|q| q.frames.front().map(|f| f.payload().as_ptr() as usize))
        };
        assert_eq!(first(&a), first(&p));
    }

    #[test]
    fn a_slow_consumer_inside_a_batch_is_closed_and_nobody_else_waits() {
        let hub = Hub::new();
        let fast = client(1, Encoding::Json);
        // Room for about two publications.
        let slow = Arc::new(Client::new(2, Encoding::Json, 2 * (64 + 40), 0));
        let late = client(3, Encoding::Json);
        for c in [&fast, &slow, &late] {
            assert!(hub.subscribe("room", c));
        }
        hub.deliver_batch(&batch("room", 1..=10));
        assert_eq!(offsets(&fast), (1..=10).collect::<Vec<_>>());
        assert_eq!(offsets(&late), (1..=10).collect::<Vec<_>>());
        let closing = slow.outbox.with_queue(|q| q.closing());
        assert_eq!(closing.map(|c| c.code), Some(3001));
        assert_eq!(queued(&slow), 0, "its queue was discarded");
        assert_eq!(hub.overflows.get(), 1, "counted once");
    }

    #[test]
    fn a_mixed_batch_falls_back_to_one_fanout_each() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Json);
        assert!(hub.subscribe("x", &a));
        assert!(hub.subscribe("y", &b));
        let mut pubs = batch("x", 1..=2);
        pubs.extend(batch("y", 1..=1));
        hub.deliver_batch(&pubs);
        assert_eq!(offsets(&a), [1, 2]);
        assert_eq!(offsets(&b), [1]);
    }

    fn queued(c: &Client) -> usize {
        c.outbox.with_queue(|q| q.frames.len())
    }

    #[test]
    fn patterns_deliver_once_per_client() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Json);
        assert_eq!(hub.pattern_count(), 0);
        assert!(hub.subscribe("news.sport", &a));
        assert!(hub.subscribe_pattern("news.*", &a));
        assert!(hub.subscribe_pattern("news.>", &a));
        assert!(!hub.subscribe_pattern("news.>", &a));
        assert!(hub.subscribe_pattern("news.*", &b));
        assert!(hub.subscribe_pattern(">", &b));
        assert_eq!(hub.pattern_count(), 4);

        publish(&hub, "news.sport", 1);
        assert_eq!((queued(&a), queued(&b)), (1, 1), "exact + 2 patterns: once");
        publish(&hub, "news.tennis", 1);
        assert_eq!((queued(&a), queued(&b)), (2, 2), "two patterns: once");
        publish(&hub, "news.sport.uk", 1);
        assert_eq!((queued(&a), queued(&b)), (3, 3));
        publish(&hub, "other", 1);
        assert_eq!((queued(&a), queued(&b)), (3, 4));

        assert!(hub.unsubscribe_pattern("news.>", &a));
        assert!(!hub.unsubscribe_pattern("news.>", &a));
        publish(&hub, "news.sport.uk", 2);
        assert_eq!((queued(&a), queued(&b)), (3, 5));
        for (p, c) in [("news.*", &a), ("news.*", &b), (">", &b)] {
            assert!(hub.unsubscribe_pattern(p, c));
        }
        assert_eq!(hub.pattern_count(), 0);
        publish(&hub, "news.tennis", 2);
        assert_eq!((queued(&a), queued(&b)), (3, 5));
        assert_eq!(
            hub.channel_count(),
            1,
            "the exact subscription is untouched"
        );
    }

    /// The subscribe reply is queued with the pattern already in place, and
    /// a publication racing it (here: delivered by another thread while the
    /// reply is being queued) comes after the reply and is not lost.
    #[test]
    fn a_pattern_is_in_place_before_its_reply_and_no_delivery_overtakes_it() {
        let hub = Arc::new(Hub::new());
        let a = client(1, Encoding::Json);
        let mut racer = None;
        hub.subscribe_pattern_then("news.*", &a, || {
            assert_eq!(hub.pattern_count(), 1, "in place when announced");
            let h = hub.clone();
            racer = Some(std::thread::spawn(move || publish(&h, "news.sport", 1)));
            std::thread::sleep(std::time::Duration::from_millis(50));
            a.send(Bytes::from_static(b"{\"id\":1,\"reply\":{}}"));
        });
        racer.expect("spawned").join().expect("racer");
        let frames: Vec<Vec<u8>> = a
            .outbox
            .with_queue(|q| q.frames.iter().map(|f| f.payload().into_owned()).collect());
        assert_eq!(frames.len(), 2, "the racing publication is delivered");
        assert_eq!(frames[0], b"{\"id\":1,\"reply\":{}}", "the reply first");
    }

    /// Decodes everything queued for `c` (JSON or binary) and empties it.
    fn take(c: &Client) -> Vec<ServerMsg> {
        c.outbox.with_queue(|q| {
            let msgs = q
                .frames
                .iter()
                .map(|f| c.encoding.decode_server(&f.payload()).expect("decode"))
                .collect();
            let n = q.frames.len();
            q.advance(n, 0);
            msgs
        })
    }

    fn join(channel: &str, c: &Client) -> ServerMsg {
        ServerMsg::Push(Push::Join {
            channel: channel.into(),
            info: c.info(),
        })
    }

    fn leave(channel: &str, c: &Client) -> ServerMsg {
        ServerMsg::Push(Push::Leave {
            channel: channel.into(),
            info: c.info(),
        })
    }

    fn user_client(id: u64, user: &str) -> Arc<Client> {
        let c = client(id, Encoding::Json);
        c.set_identity(Arc::new(crate::auth::Identity {
            user: Arc::from(user),
            expires_at: None,
            grants: Vec::new(),
            info: Default::default(),
        }));
        c
    }

    #[test]
    fn presence_stats_count_connections_and_distinct_users() {
        let hub = Hub::new();
        assert_eq!(hub.presence_stats("room"), (0, 0), "no such channel");
        let alice1 = user_client(1, "alice");
        let alice2 = user_client(2, "alice");
        let bob = user_client(3, "bob");
        let anon = client(4, Encoding::Json);
        for c in [&alice1, &alice2, &bob, &anon] {
            assert!(hub.subscribe("room", c));
        }
        assert!(!hub.subscribe("room", &bob), "already there");
        assert!(hub.subscribe("other", &bob));
        assert_eq!(
            hub.presence_stats("room"),
            (4, 2),
            "anonymous is not a user"
        );
        assert!(hub.unsubscribe("room", alice1.id));
        assert_eq!(hub.presence_stats("room"), (3, 2), "alice is still there");
        assert!(hub.unsubscribe("room", alice2.id));
        assert_eq!(hub.presence_stats("room"), (2, 1));
        assert!(!hub.unsubscribe("room", alice2.id), "gone already");
        assert_eq!(hub.presence_stats("room"), (2, 1));
        assert!(hub.unsubscribe("room", bob.id));
        assert!(hub.unsubscribe("room", anon.id));
        assert_eq!(hub.presence_stats("room"), (0, 0));
        assert_eq!(hub.presence_stats("other"), (1, 1));
    }

    #[test]
    fn join_and_leave_reach_listeners_only() {
        let hub = Hub::new();
        let listener = client(1, Encoding::Json);
        let bin_listener = client(2, Encoding::Binary);
        let quiet = client(3, Encoding::Json);
        let newcomer = client(4, Encoding::Json);
        assert!(hub.subscribe_with("room", &listener, true));
        assert!(take(&listener).is_empty(), "not told about itself");
        assert!(hub.subscribe_with("room", &bin_listener, true));
        assert!(hub.subscribe("room", &quiet));
        assert!(!hub.subscribe_with("room", &quiet, true), "already there");
        assert!(hub.subscribe("room", &newcomer));
        assert_eq!(hub.listener_count("room"), 2);
        assert_eq!(
            take(&listener),
            vec![
                join("room", &bin_listener),
                join("room", &quiet),
                join("room", &newcomer)
            ]
        );
        assert_eq!(
            take(&bin_listener),
            vec![join("room", &quiet), join("room", &newcomer)]
        );
        assert!(hub.unsubscribe("room", newcomer.id));
        assert!(hub.unsubscribe("room", listener.id));
        assert_eq!(take(&listener), vec![leave("room", &newcomer)]);
        assert_eq!(
            take(&bin_listener),
            vec![leave("room", &newcomer), leave("room", &listener)]
        );
        assert!(take(&quiet).is_empty() && take(&newcomer).is_empty());
        assert_eq!(hub.listener_count("room"), 1);
        let mut who: Vec<String> = hub.presence("room").into_iter().map(|i| i.client).collect();
        who.sort();
        assert_eq!(who, vec![bin_listener.wire_id(), quiet.wire_id()]);
        // The last listener leaving leaves a channel nobody listens to.
        assert!(hub.unsubscribe("room", bin_listener.id));
        assert_eq!(hub.listener_count("room"), 0);
        assert!(hub.unsubscribe("room", quiet.id));
        assert!(take(&bin_listener).is_empty());
        assert_eq!(hub.channel_count(), 0);
    }

    #[test]
    fn pattern_subscribers_share_the_exact_frames() {
        let hub = Hub::new();
        let exact = client(1, Encoding::Json);
        let pattern = client(2, Encoding::Json);
        let pattern_bin = client(3, Encoding::Binary);
        let exact_bin = client(4, Encoding::Binary);
        hub.subscribe("a.b", &exact);
        hub.subscribe("a.b", &exact_bin);
        hub.subscribe_pattern("a.*", &pattern);
        hub.subscribe_pattern("a.>", &pattern_bin);
        publish(&hub, "a.b", 7);
        let ptr = |cl: &Arc<Client>| {
            cl.outbox
                .with_queue(|q| q.frames.front().map(|f| f.payload().as_ptr() as usize))
        };
        assert!(ptr(&exact).is_some());
        assert_eq!(ptr(&exact), ptr(&pattern));
        assert_eq!(ptr(&exact_bin), ptr(&pattern_bin));
        assert_ne!(ptr(&exact), ptr(&exact_bin));
    }

    /// Counts its calls; renders the publication's offset, excluding client 2.
    #[derive(Debug, Default)]
    struct CountingRender {
        publications: std::sync::atomic::AtomicUsize,
    }

    impl Render for CountingRender {
        fn publication(&self, p: &Publication) -> Option<Rendered> {
            self.publications.fetch_add(1, Ordering::Relaxed);
            Some(Rendered {
                frame: Frame::Text(Bytes::from(format!("pub {}", p.offset))),
                except: Some(2),
            })
        }

        fn presence(&self, _: &str, who: &ClientInfo, join: bool, edge: bool) -> Option<Frame> {
            (edge && !who.user.is_empty())
                .then(|| Frame::Text(Bytes::from(format!("{} {}", who.user, join))))
        }
    }

    fn texts(c: &Client) -> Vec<String> {
        c.outbox.with_queue(|q| {
            let t = q
                .frames
                .iter()
                .map(|f| String::from_utf8_lossy(&f.payload()).into_owned())
                .collect();
            let n = q.frames.len();
            q.advance(n, 0);
            t
        })
    }

    #[test]
    fn a_renderer_renders_once_per_publication_and_skips_its_except() {
        let hub = Hub::new();
        let render = Arc::new(CountingRender::default());
        let clients: Vec<Arc<Client>> = (1..=4)
            .map(|id| Arc::new(Client::new_rendered(id, render.clone(), 1 << 20, 0)))
            .collect();
        let herald = client(9, Encoding::Json);
        for c in clients.iter().chain([&herald]) {
            hub.subscribe("c", c);
        }
        publish(&hub, "c", 5);
        assert_eq!(render.publications.load(Ordering::Relaxed), 1);
        assert_eq!(texts(&clients[0]), vec!["pub 5"]);
        assert!(texts(&clients[1]).is_empty(), "the except client");
        assert_eq!(queued(&herald), 1, "Herald's own encoding as before");
        let ptr = |cl: &Arc<Client>| {
            cl.outbox
                .with_queue(|q| q.frames.front().map(|f| f.payload().as_ptr() as usize))
        };
        assert_eq!(ptr(&clients[2]), ptr(&clients[3]), "one frame shared");
    }

    #[test]
    fn rendered_presence_announces_users_at_their_edges() {
        let hub = Hub::new();
        let render = Arc::new(CountingRender::default());
        let listener = Arc::new(Client::new_rendered(1, render.clone(), 1 << 20, 0));
        let herald_listener = client(2, Encoding::Json);
        hub.subscribe_with("p", &listener, true);
        hub.subscribe_with("p", &herald_listener, true);
        let ann1 = user_client(3, "ann");
        let ann2 = user_client(4, "ann");
        hub.subscribe("p", &ann1);
        hub.subscribe("p", &ann2);
        assert_eq!(
            texts(&listener),
            vec!["ann true"],
            "ann's second connection is no news"
        );
        assert_eq!(
            take(&herald_listener).len(),
            2,
            "Herald listeners see every connection"
        );
        hub.unsubscribe("p", ann1.id);
        assert!(texts(&listener).is_empty());
        hub.unsubscribe("p", ann2.id);
        assert_eq!(texts(&listener), vec!["ann false"]);
    }

    #[test]
    fn count_user_counts_a_late_identity() {
        let hub = Hub::new();
        let c = client(1, Encoding::Json);
        hub.subscribe("x", &c);
        c.set_identity(Arc::new(crate::auth::Identity {
            user: Arc::from("bob"),
            expires_at: None,
            grants: Vec::new(),
            info: Default::default(),
        }));
        assert_eq!(hub.presence_stats("x"), (1, 0));
        hub.count_user("x", &c);
        assert_eq!(hub.presence_stats("x"), (1, 1));
        hub.unsubscribe("x", c.id);
        assert_eq!(hub.presence_stats("x"), (0, 0));
    }

    #[test]
    fn the_observer_hears_occupancy_and_user_edges() {
        let hub = Hub::new();
        let heard = Arc::new(Mutex::new(Vec::<String>::new()));
        let h = heard.clone();
        hub.set_observer(Box::new(move |channel, e| {
            lock(&h).push(format!("{channel} {e:?}"));
        }));
        let ann1 = user_client(1, "ann");
        let ann2 = user_client(2, "ann");
        let anon = client(3, Encoding::Json);
        hub.subscribe("c", &ann1);
        hub.subscribe("c", &ann2);
        hub.subscribe("c", &anon);
        hub.unsubscribe("c", ann1.id);
        hub.unsubscribe("c", ann2.id);
        hub.unsubscribe("c", anon.id);
        assert_eq!(
            *lock(&heard),
            vec![
                "c Occupied",
                "c UserAdded(\"ann\")",
                "c UserRemoved(\"ann\")",
                "c Vacated"
            ]
        );
    }

    #[test]
    fn the_count_hook_hears_joins_and_leaves_and_push_rendered_reaches_one_renderer() {
        let hub = Hub::new();
        let heard = Arc::new(Mutex::new(Vec::<String>::new()));
        let h = heard.clone();
        hub.set_count_hook(Box::new(move |c| {
            h.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c.to_string())
        }));
        let mine: Arc<dyn Render> = Arc::new(CountingRender::default());
        let other: Arc<dyn Render> = Arc::new(CountingRender::default());
        let a = Arc::new(Client::new_rendered(1, mine.clone(), 1 << 20, 0));
        let b = Arc::new(Client::new_rendered(2, other.clone(), 1 << 20, 0));
        let herald = client(3, Encoding::Json);
        for c in [&a, &b, &herald] {
            hub.subscribe("c", c);
        }
        assert!(hub.unsubscribe("c", 3));
        assert_eq!(heard.lock().unwrap_or_else(|p| p.into_inner()).len(), 4);
        let frame = Frame::Text(Bytes::from_static(b"count"));
        assert_eq!(hub.push_rendered("c", &mine, &frame), 1);
        assert_eq!(texts(&a), vec!["count"]);
        assert!(texts(&b).is_empty(), "another renderer's client");
        assert_eq!(hub.push_rendered("nowhere", &mine, &frame), 0);
        // In a cluster the hook hears the broker's announcements instead.
        let hub = Hub::new();
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        hub.set_count_hook(Box::new(move |_| {
            m.fetch_add(1, Ordering::Relaxed);
        }));
        hub.set_cluster_events();
        hub.subscribe("c", &a);
        assert_eq!(n.load(Ordering::Relaxed), 0);
        hub.announce("c", herald.info(), true, false, false);
        assert_eq!(n.load(Ordering::Relaxed), 1);
    }
}
