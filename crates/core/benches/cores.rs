//! Does fan-out scale with cores? Publications go through the in-memory
//! broker's `publish` (the channel lock, offset, history) into the hub's
//! `deliver` (the channel's subscriber mutex, one encode per encoding, one
//! outbox push per subscriber) — the server's publish path without sockets —
//! from 1 thread and from 2 threads at once (issue 15, goal 6; decision 0008).
//!
//! Each publishing thread owns 16 channels of 100 subscribers each (half JSON,
//! half binary, as in `fanout.rs`) and its own payload. One iteration: every
//! thread publishes once to each of its 16 channels (1,600 deliveries per
//! thread), then drains the outboxes of the subscribers it published to, in the
//! same thread — so no queue ever holds more than two frames and none
//! overflows. (In the server a connection's driver drains its outbox, usually
//! on another worker; here the drain stays with the publisher so that the
//! figure measures the hub, not a hand-off.)
//!
//! - `deliveries/1_thread`: the baseline.
//! - `deliveries/2_threads_disjoint`: each thread its own channels and
//!   subscribers, one hub and broker. Ideally twice the baseline on two free
//!   cores: this ratio is the figure.
//! - `deliveries/2_threads_own_hubs`: the control — the second thread
//!   publishes through a hub and broker of its own, sharing nothing with the
//!   first but the machine (allocator, caches, memory). What the disjoint
//!   case loses beyond this, the shared hub costs.
//! - `deliveries/2_threads_same`: both threads publish to the same 16 channels,
//!   contending on each channel's broker lock, subscriber mutex and the
//!   subscribers' outbox mutexes: the contrast.
//! - `counter/*`: the metrics path — a sharded [`Counter`] bumped from 1 and 2
//!   threads, against one plain shared `AtomicU64` bumped from 2 threads.
//!
//! Each group runs twice: by wall time (`deliveries`, `counter`), and by the
//! busiest thread's CPU time (`deliveries_cpu`, `counter_cpu`; see
//! [`Clock::Cpu`]), which still means something when another job shares the
//! two cores. Throughput is in elements (deliveries, or counter adds) per
//! second. Run with `cargo bench -p herald-core --bench cores`; results and
//! their reading in `bench/RESULTS.md` and `docs/decisions/0008-scaling-with-cores.md`.
#![allow(missing_docs)]
// One `clock_gettime` call (`on_cpu`), with its safety argument beside it.
#![allow(unsafe_code)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_core::metrics::Counter;
use herald_core::{Broker, Client, Hub, MemoryBroker};
use herald_proto::Encoding;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const CHANNELS: usize = 16;
const SUBSCRIBERS: usize = 100;

/// One publishing thread's channels, their subscribers and its payload.
struct Set {
    channels: Vec<String>,
    clients: Vec<Arc<Client>>,
    payload: Bytes,
}

fn set(hub: &Hub, name: &str, first_id: u64) -> Set {
    let channels: Vec<String> = (0..CHANNELS).map(|i| format!("{name}.{i}")).collect();
    let mut clients = Vec::with_capacity(CHANNELS * SUBSCRIBERS);
    for (c, channel) in channels.iter().enumerate() {
        for s in 0..SUBSCRIBERS {
            let id = first_id + (c * SUBSCRIBERS + s) as u64;
            let enc = if id.is_multiple_of(2) {
                Encoding::Json
            } else {
                Encoding::Binary
            };
            let client = Arc::new(Client::new(id, enc, 1 << 30, 0));
            hub.subscribe(channel, &client);
            clients.push(client);
        }
    }
    // Each thread its own payload: a shared one would add a refcount line
    // bounced between the threads that the server does not have.
    let payload = Bytes::from(format!("{{\"padding\":\"{}\"}}", "x".repeat(200)));
    Set {
        channels,
        clients,
        payload,
    }
}

/// One iteration of one thread: a publication to each channel, then a drain.
fn round(broker: &MemoryBroker, s: &Set) {
    for channel in &s.channels {
        let _ = broker.publish(channel, s.payload.clone());
    }
    for c in &s.clients {
        c.outbox.with_queue(|q| {
            let n = q.frames.len();
            q.advance(n, 0);
        });
    }
}

/// From the first thread's start to the last one's end. Each thread reads its
/// own clock after the barrier: the spawning thread may be descheduled past
/// a short run, so its own reading would not bound it.
fn span(runs: impl Iterator<Item = Run>, clock: Clock) -> Duration {
    let runs: Vec<Run> = runs.collect();
    match clock {
        Clock::Wall => {
            let start = runs.iter().map(|r| r.start).min().expect("a thread");
            let end = runs.iter().map(|r| r.end).max().expect("a thread");
            end - start
        }
        Clock::Cpu => runs.iter().map(|r| r.cpu).max().expect("a thread"),
    }
}

/// One thread's run.
struct Run {
    start: Instant,
    end: Instant,
    /// Time it spent on a CPU (not waiting for one).
    cpu: Duration,
}

/// What a bench reports as its time.
#[derive(Clone, Copy)]
enum Clock {
    /// From the first thread's start to the last one's end: the real figure
    /// when the machine's cores are free.
    Wall,
    /// The busiest thread's on-CPU time: what the wall time would be if each
    /// thread had a core to itself. On a shared machine (another job
    /// compiling) the wall figure mostly measures the other job; this one
    /// still shows contention that costs CPU (cache-line transfers, spinning),
    /// though not time asleep on a contended lock.
    Cpu,
}

/// This thread's time on a CPU so far (`CLOCK_THREAD_CPUTIME_ID`: exact,
/// where `/proc/thread-self/schedstat` moves only at scheduler ticks).
fn on_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `iters` rounds on each of `sets` at once, one thread per set, and
/// returns the wall time from the first start to the last end.
fn run_threads(broker: &MemoryBroker, sets: &[&Set], iters: u64, clock: Clock) -> Duration {
    let brokers = vec![broker; sets.len()];
    run_on(&brokers, sets, iters, clock)
}

/// [`run_threads`] with each set published through its own broker.
fn run_on(brokers: &[&MemoryBroker], sets: &[&Set], iters: u64, clock: Clock) -> Duration {
    let start = Barrier::new(sets.len() + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = sets
            .iter()
            .zip(brokers)
            .map(|(s, broker)| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    let cpu0 = on_cpu();
                    for _ in 0..iters {
                        round(broker, s);
                    }
                    let cpu = on_cpu().saturating_sub(cpu0);
                    Run {
                        start: t0,
                        end: Instant::now(),
                        cpu,
                    }
                })
            })
            .collect();
        start.wait();
        span(
            handles
                .into_iter()
                .map(|h| h.join().expect("publisher thread")),
            clock,
        )
    })
}

fn deliveries(c: &mut Criterion) {
    let hub = Arc::new(Hub::new());
    // The server's defaults: 100 publications retained for 300 s.
    let broker = MemoryBroker::new(100, Duration::from_secs(300), hub.clone());
    let a = set(&hub, "a", 0);
    let b = set(&hub, "b", 1_000_000);
    let per_set = (CHANNELS * SUBSCRIBERS) as u64;
    // The control: a second node's hub and broker, sharing nothing with the
    // first but the machine (allocator, caches, memory bus).
    let hub2 = Arc::new(Hub::new());
    let broker2 = MemoryBroker::new(100, Duration::from_secs(300), hub2.clone());
    let b2 = set(&hub2, "b", 1_000_000);

    for (name, clock) in [("deliveries", Clock::Wall), ("deliveries_cpu", Clock::Cpu)] {
        let mut group = c.benchmark_group(name);
        group.measurement_time(Duration::from_secs(4));
        group.throughput(Throughput::Elements(per_set));
        group.bench_function("1_thread", |bch| {
            bch.iter_custom(|iters| run_threads(&broker, &[&a], iters, clock))
        });
        group.throughput(Throughput::Elements(2 * per_set));
        group.bench_function("2_threads_disjoint", |bch| {
            bch.iter_custom(|iters| run_threads(&broker, &[&a, &b], iters, clock))
        });
        group.bench_function("2_threads_own_hubs", |bch| {
            bch.iter_custom(|iters| run_on(&[&broker, &broker2], &[&a, &b2], iters, clock))
        });
        group.bench_function("2_threads_same", |bch| {
            bch.iter_custom(|iters| run_threads(&broker, &[&a, &a], iters, clock))
        });
        group.finish();
    }
}

/// Adds per iteration of a counter bench: enough that thread start-up is noise.
const ADDS: u64 = 10_000;

fn bump_threads(threads: usize, iters: u64, clock: Clock, add: &(impl Fn() + Sync)) -> Duration {
    let start = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    let cpu0 = on_cpu();
                    for _ in 0..iters * ADDS {
                        add();
                    }
                    let cpu = on_cpu().saturating_sub(cpu0);
                    Run {
                        start: t0,
                        end: Instant::now(),
                        cpu,
                    }
                })
            })
            .collect();
        start.wait();
        span(
            handles
                .into_iter()
                .map(|h| h.join().expect("counter thread")),
            clock,
        )
    })
}

fn counters(c: &mut Criterion) {
    let sharded = Counter::default();
    let shared = AtomicU64::new(0);
    for (name, clock) in [("counter", Clock::Wall), ("counter_cpu", Clock::Cpu)] {
        let mut group = c.benchmark_group(name);
        group.measurement_time(Duration::from_secs(2));
        group.throughput(Throughput::Elements(ADDS));
        group.bench_function("sharded_1_thread", |b| {
            b.iter_custom(|iters| bump_threads(1, iters, clock, &|| sharded.inc()))
        });
        group.throughput(Throughput::Elements(2 * ADDS));
        group.bench_function("sharded_2_threads", |b| {
            b.iter_custom(|iters| bump_threads(2, iters, clock, &|| sharded.inc()))
        });
        group.bench_function("one_atomic_2_threads", |b| {
            b.iter_custom(|iters| {
                bump_threads(2, iters, clock, &|| {
                    shared.fetch_add(1, Ordering::Relaxed);
                })
            })
        });
        group.finish();
    }
    assert!(sharded.get() > 0 && shared.load(Ordering::Relaxed) > 0);
}

criterion_group!(benches, deliveries, counters);
criterion_main!(benches);
