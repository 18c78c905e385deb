//! Counters and a histogram for `/metrics`, cheap enough for the hot path.
//!
//! Why sharded: a counter bumped for every message by every worker thread would
//! bounce one cache line between cores. Each [`Counter`] is an array of
//! cache-line-padded atomics; a thread always adds to "its" shard (picked once
//! per thread), and reading sums the shards. Nothing allocates after start-up,
//! and a `Relaxed` add on an uncontended line costs a few nanoseconds. Gauges
//! that change once per connection (not per message) are plain atomics.
//!
//! The server renders these in the Prometheus text format (`herald-server`'s
//! `metrics` module); the names and labels are documented there.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

const SHARDS: usize = 16;

#[repr(align(64))]
#[derive(Debug, Default)]
struct Padded(AtomicU64);

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// A monotonically increasing counter, sharded by thread.
#[derive(Debug, Default)]
pub struct Counter {
    shards: [Padded; SHARDS],
}

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        let i = SLOT.try_with(|s| *s).unwrap_or(0);
        self.shards[i].0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// The current total.
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

/// Upper bounds (seconds) of the fan-out latency histogram's buckets: 1 µs to
/// 100 ms, where in-memory fan-out to a handful up to tens of thousands of
/// subscribers lands.
pub const FANOUT_BUCKETS: [f64; 12] = [
    0.000_001, 0.000_005, 0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
];

/// A fixed-bucket histogram of durations (cumulative buckets rendered at read).
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (non-cumulative), plus one for `+Inf`.
    buckets: [Counter; FANOUT_BUCKETS.len() + 1],
    sum_ns: Counter,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = FANOUT_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(FANOUT_BUCKETS.len());
        self.buckets[i].inc();
        self.sum_ns
            .add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Cumulative counts per bucket of [`FANOUT_BUCKETS`], then the total
    /// (`+Inf`); and the sum in seconds.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut acc = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                acc += b.get();
                acc
            })
            .collect();
        (cumulative, self.sum_ns.get() as f64 / 1e9)
    }
}

/// The transports a session can run over (label `transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// WebSocket (`/ws`).
    WebSocket = 0,
    /// Raw TCP.
    Tcp = 1,
    /// Server-Sent Events.
    Sse = 2,
    /// HTTP long-polling.
    Poll = 3,
    /// The websocket-shootout endpoint.
    Shootout = 4,
    /// The Pusher Channels endpoint (`/app/{key}`).
    Pusher = 5,
    /// The Bayeux (CometD) endpoint (`/cometd`), long-polling and WebSocket
    /// alike: one Bayeux session counts once, however it is carried.
    Bayeux = 6,
}

impl Transport {
    /// Every transport, in label order.
    pub const ALL: [Transport; 7] = [
        Transport::WebSocket,
        Transport::Tcp,
        Transport::Sse,
        Transport::Poll,
        Transport::Shootout,
        Transport::Pusher,
        Transport::Bayeux,
    ];

    /// The label value.
    pub const fn label(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::Tcp => "tcp",
            Transport::Sse => "sse",
            Transport::Poll => "poll",
            Transport::Shootout => "shootout",
            Transport::Pusher => "pusher",
            Transport::Bayeux => "bayeux",
        }
    }
}

/// Why a message was dropped instead of handled or delivered (label `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// The connection's rate limit (error 108).
    RateLimit = 0,
    /// Larger than the maximum message size (error 110 / close 1009).
    TooLarge = 1,
    /// Discarded with a slow consumer's queue (close 3001).
    SlowConsumer = 2,
    /// Refused by a permission check (error 104) or auth (101, 112).
    Denied = 3,
}

impl Drop {
    /// Every reason, in label order.
    pub const ALL: [Drop; 4] = [
        Drop::RateLimit,
        Drop::TooLarge,
        Drop::SlowConsumer,
        Drop::Denied,
    ];

    /// The label value.
    pub const fn label(self) -> &'static str {
        match self {
            Drop::RateLimit => "rate_limit",
            Drop::TooLarge => "too_large",
            Drop::SlowConsumer => "slow_consumer",
            Drop::Denied => "denied",
        }
    }
}

/// Disconnect codes counted individually; others count as `other`. `0` is a
/// connection the client ended (close frame or EOF) without a server code.
pub const DISCONNECT_CODES: [u16; 14] = [
    0, 1000, 1001, 1002, 1007, 1009, 3000, 3001, 3002, 3003, 3500, 3501, 3502, 3503,
];

/// Every counter of one node.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Messages received from clients (every transport).
    pub messages_in: Counter,
    /// Bytes of those messages.
    pub bytes_in: Counter,
    /// Frames written to clients.
    pub messages_out: Counter,
    /// Bytes written to clients (framing included).
    pub bytes_out: Counter,
    /// Publications accepted (every source, HTTP API included).
    pub publications: Counter,
    connections: [AtomicI64; Transport::ALL.len()],
    accepted: [Counter; Transport::ALL.len()],
    drops: [Counter; Drop::ALL.len()],
    /// One per [`DISCONNECT_CODES`] entry, then `other`.
    disconnects: [Counter; DISCONNECT_CODES.len() + 1],
    /// Connections refused before a session existed, by HTTP status or
    /// disconnect code (connection caps, Origin, handshake timeout).
    pub refused: Counter,
}

impl Metrics {
    /// A connection of `t` opened.
    pub fn opened(&self, t: Transport) {
        self.connections[t as usize].fetch_add(1, Ordering::Relaxed);
        self.accepted[t as usize].inc();
    }

    /// A connection of `t` closed.
    pub fn closed(&self, t: Transport) {
        self.connections[t as usize].fetch_sub(1, Ordering::Relaxed);
    }

    /// Open connections of `t`.
    pub fn connections(&self, t: Transport) -> i64 {
        self.connections[t as usize].load(Ordering::Relaxed)
    }

    /// Connections of `t` ever opened.
    pub fn accepted(&self, t: Transport) -> u64 {
        self.accepted[t as usize].get()
    }

    /// A message dropped for `why` (`n` of them).
    pub fn dropped(&self, why: Drop, n: u64) {
        self.drops[why as usize].add(n);
    }

    /// Messages dropped for `why`.
    pub fn drops(&self, why: Drop) -> u64 {
        self.drops[why as usize].get()
    }

    /// A connection ended with `code` (0: ended by the client).
    pub fn disconnected(&self, code: u16) {
        let i = DISCONNECT_CODES
            .iter()
            .position(|c| *c == code)
            .unwrap_or(DISCONNECT_CODES.len());
        self.disconnects[i].inc();
    }

    /// Counts per [`DISCONNECT_CODES`] entry, then `other`.
    pub fn disconnects(&self) -> Vec<u64> {
        self.disconnects.iter().map(Counter::get).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_across_threads() {
        let c = std::sync::Arc::new(Counter::default());
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| c.inc()))
            })
            .collect();
        for h in hs {
            h.join().expect("thread");
        }
        assert_eq!(c.get(), 4000);
    }

    #[test]
    fn histogram_is_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_nanos(500));
        h.observe(Duration::from_micros(20));
        h.observe(Duration::from_secs(2));
        let (b, sum) = h.snapshot();
        assert_eq!(b[0], 1);
        assert_eq!(b[3], 2);
        assert_eq!(*b.last().expect("inf"), 3);
        assert!(sum > 2.0);
    }
}
