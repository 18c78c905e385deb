//! The in-memory broker: one node, no persistence. The default.
//!
//! # Layout
//! Each channel has a small state (its epoch, an offset counter, a bounded
//! history ring and a count of attached subscribers) behind its own mutex, found
//! through a sharded map. A publication takes only its channel's lock, under
//! which it gets its offset, enters history and is handed to the hub for fan-out
//! — which gives the per-channel ordering and atomicity of the
//! [`Broker`](crate::Broker) contract.
//!
//! # Retention
//! A channel retains its last `history_size` publications, and of those only
//! the ones younger than `history_ttl` (zero: no time limit). Both come from
//! the channel's namespace (the part of its name before the first `:`) when
//! that namespace has its own [`Retention`], else from the default; a
//! channel's state keeps the limits it was created with. Expiry is lazy:
//! there is no timer per channel; expired publications are dropped whenever
//! their channel is touched (publish, subscribe, history, unsubscribe) and by
//! an incremental sweep: every [`SWEEP_EVERY`] publish/subscribe/unsubscribe
//! calls made on a thread, and at each [`Broker::housekeep`] (the server
//! calls it every [`crate::broker::HOUSEKEEPING`], traffic or not), one shard
//! of the map is swept (history trimmed and idle states removed; channels
//! whose lock is busy are skipped, their user cleans up). The timer is what
//! gives memory back once traffic stops: swept only by traffic, a node that
//! went quiet after churning thousands of one-off channels kept them all
//! (RSS 8 → 31 MB, still 31 MB seven minutes later). With 64 shards every
//! channel is looked at within 16 s of the time it becomes idle.
//!
//! Memory: a retained publication costs about 50 bytes plus its payload (the
//! payload's bytes are shared with the frames that carried it live); a channel
//! state about 150 bytes plus its name. With the server's defaults (100
//! publications, 300 s) a channel publishing steadily holds at most 100
//! payloads + ~6 KB.
//!
//! # Epochs, and when channel states are dropped
//! A channel state with no attached subscribers and nothing retained holds no
//! information anyone can use except its epoch and offset counter; keeping
//! such states for good would let memory grow with every channel name ever
//! used. So a state is dropped once it is *idle*: no subscriber attached,
//! nothing retained, and no publish or unsubscribe for `history_ttl` — the
//! same time limit as history, so it acts as a tombstone exactly as long as a
//! position could still be recovered. With history off (`history_size` 0) a
//! state is idle as soon as nobody is attached; with no time limit (`ttl` 0,
//! history on) states are never dropped, and memory grows with channel names.
//! A state is **never** dropped while a subscriber is attached (a live
//! subscriber sees one unbroken offset sequence). Pattern subscribers are not
//! attached to concrete channels: they do not keep a state alive, and may see
//! a channel's offsets start again at 1 (patterns have no positions).
//!
//! The epoch goes with the state: every state is created with a fresh epoch
//! (this process's random prefix and a counter), so a position taken from a
//! dropped state — or from before a restart — never matches, and recovering
//! from it reports `complete: false` instead of being compared with a
//! restarted offset counter. What this guarantees: a client that recovers
//! within `history_ttl` of the last publication it received, having missed at
//! most `history_size` publications, gets them all (the state cannot have
//! been dropped: it was attached until it left, and the tombstone outlives
//! that by the TTL). A client away longer may have to resynchronise even if
//! nothing was published — it cannot be told "nothing happened" once the
//! state is gone.
//!
//! A channel that does not exist (never used, or dropped) reports position
//! `("", 0)`: an empty epoch names no stream, and recovering from it is never
//! complete.
//!
//! Lock order: a map shard, then a channel state. Nobody takes a shard lock
//! while holding a state lock; removal takes the shard lock and then only
//! *tries* the state's lock, so a large fan-out never stalls a shard.

use crate::broker::{Attach, Broker, BrokerError, Completion, Deliver, History, Publication};
use crate::shard::lock;
use bytes::Bytes;
use herald_proto::{HistoryItem, Position};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// Publish/subscribe/unsubscribe calls made on one thread between two
/// incremental sweeps (each sweeps one of the 64 shards, so every shard is
/// swept at least once per `64 * SWEEP_EVERY` calls).
pub const SWEEP_EVERY: u32 = 64;

thread_local! {
    /// Operations made on this thread since its last sweep: a per-thread
    /// counter, so the sweep trigger costs no shared cache line.
    static UNTIL_SWEEP: Cell<u32> = const { Cell::new(0) };
}

/// One retained publication.
#[derive(Debug)]
struct Retained {
    offset: u64,
    data: Bytes,
    /// When it was published, in milliseconds of the broker's clock (0 when
    /// there is no time limit: the clock is then never read).
    at: u64,
}

/// How much history a channel keeps: its last `size` publications, of those
/// only the ones younger than `ttl` (zero: no time limit). `size` 0 turns
/// history, and so recovery, off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Publications retained.
    pub size: usize,
    /// How long each is retained (zero: no limit).
    pub ttl: Duration,
}

/// A [`Retention`] in the broker's units, copied into each channel state.
#[derive(Debug, Clone, Copy)]
struct Limits {
    size: usize,
    /// Milliseconds; 0 = no time limit.
    ttl_ms: u64,
}

impl From<Retention> for Limits {
    fn from(r: Retention) -> Limits {
        Limits {
            size: r.size,
            ttl_ms: u64::try_from(r.ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

#[derive(Debug)]
struct ChannelState {
    /// This channel's retention (its namespace's, or the default).
    limits: Limits,
    /// Names this state's unbroken stream; fresh for every state created.
    epoch: Arc<str>,
    /// Offset of the last publication (0: none yet).
    offset: u64,
    /// Retained publications, oldest first, with consecutive offsets.
    history: VecDeque<Retained>,
    /// Subscribers attached by `subscribe` and not yet detached.
    subscribers: usize,
    /// Broker-clock ms of its creation, last publication or last detach: an
    /// idle state is dropped `history_ttl` after this.
    active: u64,
    /// Set under both locks when the state leaves the map: whoever still holds
    /// its `Arc` must look the channel up again.
    removed: bool,
}

impl ChannelState {
    fn position(&self) -> Position {
        Position {
            epoch: self.epoch.to_string(),
            offset: self.offset,
        }
    }
}

type StateRef = Arc<Mutex<ChannelState>>;
type Shard = Mutex<HashMap<Arc<str>, StateRef>>;

/// The in-memory broker.
pub struct MemoryBroker {
    /// Random per process: epochs of different runs never collide.
    epoch_prefix: String,
    /// Numbers the states created by this process (the epoch's second half).
    generation: AtomicU64,
    /// Retention of channels whose namespace has none of its own.
    default: Limits,
    /// Retention by namespace.
    namespaces: HashMap<String, Limits>,
    /// Some retention has a time limit: the clock runs.
    timed: bool,
    /// Some retention has history and a time limit: the sweep runs.
    sweeps: bool,
    hasher: RandomState,
    shards: Box<[Shard]>,
    /// The next shard the incremental sweep visits.
    sweep_cursor: AtomicUsize,
    started: Instant,
    /// Added to the clock by tests that make time pass.
    #[cfg(test)]
    skew_ms: AtomicU64,
    deliver: Arc<dyn Deliver>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("epoch_prefix", &self.epoch_prefix)
            .field("default", &self.default)
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

impl MemoryBroker {
    /// A broker that keeps, per channel, the last `history_size` publications
    /// that are younger than `history_ttl` (zero: no time limit), and hands
    /// every publication to `deliver`.
    pub fn new(
        history_size: usize,
        history_ttl: Duration,
        deliver: Arc<dyn Deliver>,
    ) -> MemoryBroker {
        let default = Retention {
            size: history_size,
            ttl: history_ttl,
        };
        MemoryBroker::with_retention(default, HashMap::new(), deliver)
    }

    /// A broker whose channels retain per their namespace's entry in
    /// `by_namespace` (the part of the name before the first `:`; `""` for
    /// names without one), or per `default`.
    pub fn with_retention(
        default: Retention,
        by_namespace: HashMap<String, Retention>,
        deliver: Arc<dyn Deliver>,
    ) -> MemoryBroker {
        let epoch_prefix: String = (0..8).map(|_| fastrand::alphanumeric()).collect();
        let default = Limits::from(default);
        let namespaces: HashMap<String, Limits> = by_namespace
            .into_iter()
            .map(|(ns, r)| (ns, Limits::from(r)))
            .collect();
        let all = || std::iter::once(&default).chain(namespaces.values());
        let timed = all().any(|l| l.ttl_ms > 0);
        let sweeps = all().any(|l| l.ttl_ms > 0 && l.size > 0);
        MemoryBroker {
            epoch_prefix,
            generation: AtomicU64::new(0),
            default,
            timed,
            sweeps,
            namespaces,
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            sweep_cursor: AtomicUsize::new(0),
            started: Instant::now(),
            #[cfg(test)]
            skew_ms: AtomicU64::new(0),
            deliver,
        }
    }

    /// Number of channel states held (channels with attached subscribers or
    /// retained history, plus idle ones not yet swept).
    pub fn channel_count(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    fn shard(&self, channel: &str) -> &Shard {
        &self.shards[(self.hasher.hash_one(channel) as usize) % SHARDS]
    }

    /// The broker's clock in milliseconds; 0 when there is no time limit.
    fn now(&self) -> u64 {
        if !self.timed {
            return 0;
        }
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        #[cfg(test)]
        let ms = ms + self.skew_ms.load(Ordering::Relaxed);
        ms
    }

    /// The retention of `channel`'s namespace, or the default.
    fn limits(&self, channel: &str) -> Limits {
        if self.namespaces.is_empty() {
            return self.default;
        }
        *self
            .namespaces
            .get(crate::channel::namespace(channel))
            .unwrap_or(&self.default)
    }

    fn new_state(&self, channel: &str, now: u64) -> ChannelState {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        ChannelState {
            limits: self.limits(channel),
            epoch: format!("{}-{generation:x}", self.epoch_prefix).into(),
            offset: 0,
            history: VecDeque::new(),
            subscribers: 0,
            active: now,
            removed: false,
        }
    }

    /// Nothing anyone could still use (see the module docs): the state may be
    /// dropped.
    fn idle(&self, st: &ChannelState, now: u64) -> bool {
        st.subscribers == 0
            && st.history.is_empty()
            && match (st.limits.size, st.limits.ttl_ms) {
                (0, _) => true,
                (_, 0) => false,
                (_, ttl) => now.saturating_sub(st.active) >= ttl,
            }
    }

    /// Drops publications older than the time limit.
    fn trim(&self, st: &mut ChannelState, now: u64) {
        let ttl_ms = st.limits.ttl_ms;
        if ttl_ms == 0 {
            return;
        }
        while st
            .history
            .front()
            .is_some_and(|r| now.saturating_sub(r.at) >= ttl_ms)
        {
            st.history.pop_front();
        }
    }

    /// Runs `f` on `channel`'s state under its lock, creating the state if
    /// `create` (else `None` when there is none), after trimming expired
    /// history; then removes the state if `f` left it idle.
    fn with_state<R>(
        &self,
        channel: &str,
        create: bool,
        f: impl FnOnce(&Arc<str>, &mut ChannelState, u64) -> R,
    ) -> Option<R> {
        let now = self.now();
        loop {
            let (name, state) = {
                let mut shard = lock(self.shard(channel));
                match shard.get_key_value(channel) {
                    Some((k, v)) => (k.clone(), v.clone()),
                    None if !create => return None,
                    None => {
                        let key: Arc<str> = channel.into();
                        let state = Arc::new(Mutex::new(self.new_state(channel, now)));
                        shard.insert(key.clone(), state.clone());
                        (key, state)
                    }
                }
            };
            let mut st = lock(&state);
            if st.removed {
                continue; // lost a race with its removal: look again
            }
            self.trim(&mut st, now);
            let r = f(&name, &mut st, now);
            let idle = self.idle(&st, now);
            drop(st);
            if idle {
                self.remove_if_idle(&name, &state, now);
            }
            return Some(r);
        }
    }

    /// Removes `state` from the map if it is still there and idle. Gives up if
    /// someone holds its lock: they check again when they let go.
    fn remove_if_idle(&self, name: &str, state: &StateRef, now: u64) {
        let mut shard = lock(self.shard(name));
        if !shard.get(name).is_some_and(|s| Arc::ptr_eq(s, state)) {
            return;
        }
        let Some(mut st) = try_lock(state) else {
            return;
        };
        if self.idle(&st, now) {
            st.removed = true;
            drop(st);
            shard.remove(name);
        }
    }

    /// Counts an operation on this thread and, every [`SWEEP_EVERY`], sweeps
    /// the next shard. Only time makes states idle that were not idle when
    /// last touched, and only with history on and a time limit.
    fn maybe_sweep(&self) {
        if !self.sweeps {
            return;
        }
        let due = UNTIL_SWEEP.with(|c| {
            let n = c.get() + 1;
            c.set(if n >= SWEEP_EVERY { 0 } else { n });
            n >= SWEEP_EVERY
        });
        if due {
            self.sweep_next();
        }
    }

    /// Sweeps the next shard in turn.
    fn sweep_next(&self) {
        let i = self.sweep_cursor.fetch_add(1, Ordering::Relaxed) % SHARDS;
        self.sweep_shard(i, self.now());
    }

    /// Trims every channel of shard `i` whose lock is free and drops the idle
    /// ones.
    fn sweep_shard(&self, i: usize, now: u64) {
        let mut shard = lock(&self.shards[i]);
        shard.retain(|_, state| {
            let Some(mut st) = try_lock(state) else {
                return true;
            };
            self.trim(&mut st, now);
            if self.idle(&st, now) {
                st.removed = true;
                return false;
            }
            true
        });
        crate::shard::shrink_sparse(&mut shard);
    }

    /// Sweeps every shard now (tests, and callers that want memory back at
    /// once).
    pub fn sweep(&self) {
        let now = self.now();
        for i in 0..SHARDS {
            self.sweep_shard(i, now);
        }
    }

    #[cfg(test)]
    fn advance(&self, by: Duration) {
        self.skew_ms
            .fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

/// The publications after `since` (all retained ones without it), at most
/// `limit` (0 = no limit), and whether they are everything after `since`.
fn history_of(st: &ChannelState, since: Option<&Position>, limit: usize) -> History {
    let (after, complete) = match since {
        None => (0, true),
        // Offsets of another epoch say nothing about this one: everything in
        // it is after the client's position, but there is a gap before it.
        Some(p) if *p.epoch != *st.epoch => (0, false),
        Some(p) => {
            let oldest = st.history.front().map_or(st.offset + 1, |r| r.offset);
            (
                p.offset,
                p.offset <= st.offset && p.offset.saturating_add(1) >= oldest,
            )
        }
    };
    // Retained offsets are consecutive: skip by position, not by scanning.
    let first = st.history.front().map_or(0, |r| r.offset);
    let skip = usize::try_from(after.saturating_add(1).saturating_sub(first)).unwrap_or(usize::MAX);
    let take = if limit == 0 { usize::MAX } else { limit };
    History {
        top: st.position(),
        publications: st
            .history
            .iter()
            .skip(skip)
            .take(take)
            .map(|r| HistoryItem {
                offset: r.offset,
                data: r.data.clone(),
            })
            .collect(),
        complete,
    }
}

impl MemoryBroker {
    /// `publish` with the JSON hint of [`Publication::json`].
    fn publish_hinted(
        &self,
        channel: &str,
        data: Bytes,
        json: bool,
    ) -> Completion<Result<Position, BrokerError>> {
        let position = self.with_state(channel, true, |name, st, now| {
            st.offset += 1;
            st.active = now;
            let offset = st.offset;
            if st.limits.size > 0 {
                if st.history.len() >= st.limits.size {
                    st.history.pop_front();
                }
                st.history.push_back(Retained {
                    offset,
                    data: data.clone(),
                    at: now,
                });
            }
            // Delivery under the channel lock: the contract's ordering and
            // atomicity.
            self.deliver.deliver(&Publication {
                channel: name.clone(),
                offset,
                data,
                json,
            });
            st.position()
        });
        self.maybe_sweep();
        Completion::Ready(
            position.ok_or_else(|| BrokerError::Unavailable("no channel state".into())),
        )
    }
}

impl Broker for MemoryBroker {
    fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>> {
        self.publish_hinted(channel, data, false)
    }

    fn publish_json(
        &self,
        channel: &str,
        data: Bytes,
    ) -> Completion<Result<Position, BrokerError>> {
        self.publish_hinted(channel, data, true)
    }

    fn subscribe(&self, channel: &str, since: Option<&Position>, attach: Attach) {
        let attached = self.with_state(channel, true, |_, st, _| {
            let history = match since {
                Some(_) => history_of(st, since, 0),
                None => History {
                    top: st.position(),
                    publications: Vec::new(),
                    complete: true,
                },
            };
            st.subscribers += 1;
            // Under the channel lock: no publication can slip between the
            // history read and the hub registration that `attach` performs.
            attach(Ok(history));
        });
        debug_assert!(attached.is_some(), "with_state(create) always runs f");
        self.maybe_sweep();
    }

    fn housekeep(&self) {
        if self.sweeps {
            self.sweep_next();
        }
    }

    fn channel_states(&self) -> Option<usize> {
        Some(self.channel_count())
    }

    fn unsubscribe(&self, channel: &str) {
        self.with_state(channel, false, |_, st, now| {
            st.subscribers = st.subscribers.saturating_sub(1);
            st.active = now;
        });
        self.maybe_sweep();
    }

    fn position(&self, channel: &str) -> Completion<Result<Position, BrokerError>> {
        let position = self
            .with_state(channel, false, |_, st, _| st.position())
            .unwrap_or_default();
        Completion::Ready(Ok(position))
    }

    fn history(
        &self,
        channel: &str,
        since: Option<&Position>,
        limit: usize,
    ) -> Completion<Result<History, BrokerError>> {
        let history = self
            .with_state(channel, false, |_, st, _| history_of(st, since, limit))
            .unwrap_or_else(|| History {
                top: Position::default(),
                publications: Vec::new(),
                complete: since.is_none(),
            });
        Completion::Ready(Ok(history))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, u64)>>);
    impl Deliver for Recorder {
        fn deliver(&self, p: &Publication) {
            lock(&self.0).push((p.channel.to_string(), p.offset));
        }
    }

    fn ready<T>(c: Completion<T>) -> T {
        match c {
            Completion::Ready(t) => t,
            Completion::Pending(_) => panic!("memory broker must answer at once"),
        }
    }

    fn broker(size: usize, ttl_secs: u64) -> MemoryBroker {
        MemoryBroker::new(
            size,
            Duration::from_secs(ttl_secs),
            Arc::new(Recorder::default()),
        )
    }

    fn publish(b: &MemoryBroker, channel: &str) -> Position {
        ready(b.publish(channel, Bytes::from_static(b"1"))).expect("publish")
    }

    fn offsets(h: &History) -> Vec<u64> {
        h.publications.iter().map(|p| p.offset).collect()
    }

    /// Subscribes and returns what `attach` was given.
    fn subscribe(b: &MemoryBroker, channel: &str, since: Option<&Position>) -> History {
        let got = Arc::new(Mutex::new(None));
        let g = got.clone();
        b.subscribe(
            channel,
            since,
            Box::new(move |r| *lock(&g) = Some(r.expect("attach"))),
        );
        let h = lock(&got).take().expect("attach is called at once");
        h
    }

    #[test]
    fn offsets_are_per_channel_and_delivered_in_order() {
        let rec = Arc::new(Recorder::default());
        let b = MemoryBroker::new(10, Duration::ZERO, rec.clone());
        for _ in 0..3 {
            publish(&b, "a");
        }
        assert_eq!(publish(&b, "b").offset, 1);
        assert_eq!(ready(b.position("a")).unwrap().offset, 3);
        assert_eq!(ready(b.position("zzz")).unwrap(), Position::default());
        let got = lock(&rec.0).clone();
        assert_eq!(
            got,
            vec![
                ("a".into(), 1),
                ("a".into(), 2),
                ("a".into(), 3),
                ("b".into(), 1)
            ]
        );
    }

    #[test]
    fn history_is_bounded_and_reports_gaps() {
        let b = broker(2, 0);
        for _ in 0..5 {
            publish(&b, "h");
        }
        let all = ready(b.history("h", None, 0)).unwrap();
        assert_eq!(offsets(&all), vec![4, 5]);
        let pos = |offset| Position {
            epoch: all.top.epoch.clone(),
            offset,
        };
        let h = ready(b.history("h", Some(&pos(3)), 0)).unwrap();
        assert!(h.complete);
        assert_eq!(offsets(&h), vec![4, 5]);
        let h = ready(b.history("h", Some(&pos(4)), 1)).unwrap();
        assert_eq!(offsets(&h), vec![5]);
        assert!(ready(b.history("h", Some(&pos(5)), 0)).unwrap().complete);
        let gap = ready(b.history("h", Some(&pos(2)), 0)).unwrap();
        assert!(!gap.complete);
        assert_eq!(offsets(&gap), vec![4, 5], "what is left, after the gap");
        assert!(!ready(b.history("h", Some(&pos(6)), 0)).unwrap().complete);
        let other = Position {
            epoch: "other".into(),
            offset: 4,
        };
        assert!(!ready(b.history("h", Some(&other), 0)).unwrap().complete);
    }

    #[test]
    fn each_namespace_keeps_its_own_retention() {
        let rec = Arc::new(Recorder::default());
        let keep = |size, secs| Retention {
            size,
            ttl: Duration::from_secs(secs),
        };
        let by_namespace = HashMap::from([
            ("short".to_string(), keep(2, 0)),
            ("brief".to_string(), keep(100, 5)),
            ("off".to_string(), keep(0, 0)),
        ]);
        let b = MemoryBroker::with_retention(keep(4, 0), by_namespace, rec);
        for channel in ["plain", "other:x", "short:x", "brief:x", "off:x"] {
            for _ in 0..6 {
                publish(&b, channel);
            }
        }
        let kept = |channel| offsets(&ready(b.history(channel, None, 0)).unwrap());
        assert_eq!(kept("plain"), vec![3, 4, 5, 6], "the default");
        assert_eq!(
            kept("other:x"),
            vec![3, 4, 5, 6],
            "a namespace without rules"
        );
        assert_eq!(kept("short:x"), vec![5, 6]);
        assert_eq!(kept("brief:x"), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(kept("off:x"), Vec::<u64>::new());
        // Only `brief` has a time limit: after it, its history is gone and
        // the others are untouched.
        b.advance(Duration::from_secs(6));
        assert_eq!(kept("brief:x"), Vec::<u64>::new());
        assert_eq!(kept("plain"), vec![3, 4, 5, 6]);
        assert_eq!(kept("short:x"), vec![5, 6]);
    }

    #[test]
    fn history_expires_by_time_lazily() {
        let b = broker(100, 10);
        let first = publish(&b, "t");
        b.advance(Duration::from_secs(6));
        publish(&b, "t");
        let h = ready(b.history("t", Some(&first), 0)).unwrap();
        assert!(h.complete);
        assert_eq!(offsets(&h), vec![2]);
        b.advance(Duration::from_secs(5));
        // Offset 1 is now 11 s old: gone, so recovering from 0 is impossible.
        let from0 = Position {
            epoch: first.epoch.clone(),
            offset: 0,
        };
        let h = ready(b.history("t", Some(&from0), 0)).unwrap();
        assert!(!h.complete);
        assert_eq!(offsets(&h), vec![2]);
        assert!(ready(b.history("t", Some(&first), 0)).unwrap().complete);
    }

    #[test]
    fn idle_states_are_dropped_and_come_back_with_a_new_epoch() {
        let b = broker(100, 10);
        let before = publish(&b, "x");
        assert_eq!(b.channel_count(), 1, "retained history keeps the state");
        b.advance(Duration::from_secs(11));
        assert_eq!(b.channel_count(), 1, "lazy: nothing touched it yet");
        let h = ready(b.history("x", Some(&before), 0)).unwrap();
        assert!(
            h.complete,
            "same state: nothing was published after it, nothing lost"
        );
        assert_eq!(
            b.channel_count(),
            0,
            "the read found it idle and dropped it"
        );
        let after = publish(&b, "x");
        assert_eq!(after.offset, 1);
        assert_ne!(after.epoch, before.epoch);
        let h = subscribe(&b, "x", Some(&before));
        assert!(
            !h.complete,
            "positions of the dropped state are unrecoverable"
        );
        assert_eq!(offsets(&h), vec![1]);
    }

    #[test]
    fn subscribers_keep_their_channel_alive() {
        // History off: only subscribers keep a state.
        let b = broker(0, 0);
        publish(&b, "y");
        assert_eq!(b.channel_count(), 0, "nothing retained, nobody attached");
        let s = subscribe(&b, "y", None);
        let epoch = s.top.epoch.clone();
        publish(&b, "y");
        let p = publish(&b, "y");
        assert_eq!((p.epoch.as_str(), p.offset), (epoch.as_str(), 2));
        assert_eq!(b.channel_count(), 1);
        // Nothing missed since offset 2: complete even with history off.
        let again = subscribe(&b, "y", Some(&p));
        assert!(again.complete);
        b.unsubscribe("y");
        assert_eq!(b.channel_count(), 1, "one subscriber still attached");
        b.unsubscribe("y");
        assert_eq!(b.channel_count(), 0);
        b.unsubscribe("y"); // unmatched: harmless
        assert_eq!(publish(&b, "y").offset, 1);
    }

    #[test]
    fn a_left_channel_keeps_its_epoch_for_the_ttl() {
        let b = broker(100, 10);
        let at = subscribe(&b, "quiet", None).top;
        b.unsubscribe("quiet");
        assert_eq!(b.channel_count(), 1, "kept as a tombstone");
        b.advance(Duration::from_secs(9));
        let p = publish(&b, "quiet");
        assert_eq!(p.epoch, at.epoch, "same stream: the client can recover");
        let h = subscribe(&b, "quiet", Some(&at));
        assert!(h.complete);
        assert_eq!(offsets(&h), vec![1]);
        b.unsubscribe("quiet");
        b.advance(Duration::from_secs(10));
        b.sweep();
        assert_eq!(b.channel_count(), 0);
        let h = subscribe(&b, "quiet", Some(&p));
        assert!(!h.complete, "gone: a new epoch");
    }

    #[test]
    fn the_sweep_reclaims_quiet_channels() {
        let b = broker(100, 10);
        for i in 0..200 {
            publish(&b, &format!("quiet.{i}"));
        }
        assert_eq!(b.channel_count(), 200);
        b.advance(Duration::from_secs(10));
        // Publications elsewhere drive the incremental sweep, one shard per
        // SWEEP_EVERY publications on this thread.
        for _ in 0..(SHARDS as u32 + 1) * SWEEP_EVERY {
            publish(&b, "busy");
        }
        assert_eq!(b.channel_count(), 1, "only the busy channel is left");
        b.advance(Duration::from_secs(10));
        b.sweep();
        assert_eq!(b.channel_count(), 0);
    }

    #[test]
    fn housekeeping_alone_drops_expired_history_and_idle_channels() {
        let b = broker(10, 1);
        for i in 0..500 {
            publish(&b, &format!("once:{i}"));
        }
        assert_eq!(b.channel_states(), Some(500));
        // No traffic at all from here on: only time passes.
        b.advance(Duration::from_secs(2));
        for _ in 0..SHARDS - 1 {
            b.housekeep();
        }
        assert!(b.channel_count() > 0, "one shard is left to sweep");
        b.housekeep();
        assert_eq!(b.channel_states(), Some(0));
    }
}
