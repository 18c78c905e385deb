//! The step logic of hashrocket's `websocket-bench` (`benchmark.go`),
//! reproduced, plus what it leaves out.
//!
//! As in the reference: start with `--initial-clients` (or one step's worth);
//! each step sends `--concurrent` requests from random clients and sends a
//! new one whenever an answer comes back, until `--sample-size` answers have
//! been collected; the round-trip time of a request is the time from its
//! send time (carried in the message) to the answer (`broadcastResult` for a
//! broadcast, the echo itself for an echo). Percentiles are taken the way the
//! reference takes them (`sorted[p * n / 100]`). The run stops at the first
//! step whose `--limit-percentile` RTT exceeds `--limit-rtt` (that step is
//! not printed), or after `--total-steps` printed steps; then `--step-size`
//! clients are added and the next step begins.
//!
//! Added, because a broadcast's `broadcastResult` only proves the server
//! *accepted* the broadcast, and a queueing server can answer it long before
//! it has delivered to everyone:
//! - the **all-received latency** of every broadcast: from its send time to
//!   the moment the last client received it, reported next to the RTT;
//! - a **membership barrier** before each step: a probe broadcast (not part
//!   of the sample, not verified) is repeated until one reaches every
//!   client, so clients whose upgrade the server answered before it
//!   registered them (a race many servers have) do not count as losses;
//! - a **drain** after each step: the next clients connect only once every
//!   sampled broadcast has reached every client (or `--drain-timeout`),
//!   so deliveries of one step never leak into the next;
//! - **verification** at the end that every client received every broadcast
//!   sent while it was connected exactly once, and every request got
//!   exactly one answer; a failure is an error, not a footnote.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::pool::{PoolCmd, PoolEvent, VerifyReport};
use crate::BenchError;

/// The resolved parameters of a `broadcast` or `echo` run.
#[derive(Debug, Clone, Serialize)]
pub struct ShootoutParams {
    /// `broadcast` or `echo`.
    pub scenario: &'static str,
    /// The server's URL.
    pub url: String,
    /// `json` or `binary`.
    pub server_type: super::wire::ServerType,
    /// Clients before the first step.
    pub initial_clients: usize,
    /// Clients added per step.
    pub step_size: usize,
    /// Requests in flight at once.
    pub concurrent: usize,
    /// Answers per step.
    pub sample_size: usize,
    /// Padding bytes per request.
    pub payload_padding: usize,
    /// The percentile compared with `limit_rtt_ms`.
    pub limit_percentile: u32,
    /// The RTT limit at that percentile.
    pub limit_rtt_ms: f64,
    /// Printed steps before stopping (0: until the limit).
    pub total_steps: u32,
    /// Stop before exceeding this many clients (0: no cap).
    pub max_clients: usize,
    /// Source addresses.
    pub local_addrs: Vec<String>,
    /// Worker processes (1: everything in this process).
    pub workers: u32,
    /// Connects in flight per worker.
    pub connect_concurrency: usize,
    /// Longest wait for a step's broadcasts to reach everyone, in seconds.
    pub drain_timeout_s: f64,
    /// Longest wait for the membership barrier, in seconds.
    pub barrier_timeout_s: f64,
    /// Fail when nothing happens for this long, in seconds.
    pub stall_timeout_s: f64,
    /// Wait before verifying, for late duplicates, in seconds.
    pub verify_grace_s: f64,
    /// Overall time cap, in seconds (0: none).
    pub duration_s: f64,
}

/// Summary statistics of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: usize,
    /// Smallest.
    pub min_ms: f64,
    /// `sorted[n / 2]`, as the reference computes its median.
    pub median_ms: f64,
    /// `sorted[p * n / 100]` for the run's limit percentile `p`.
    pub pct_ms: f64,
    /// Which percentile `pct_ms` is.
    pub percentile: u32,
    /// Largest.
    pub max_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
}

impl Summary {
    /// Summarizes `values` (nanoseconds; sorted in place). `None` if empty.
    pub fn of(values: &mut [i64], percentile: u32) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let ms = |ns: i64| ns as f64 / 1e6;
        let sum: i128 = values.iter().map(|&v| i128::from(v)).sum();
        Some(Summary {
            count: values.len(),
            min_ms: ms(values[0]),
            median_ms: ms(go_percentile(values, 50)),
            pct_ms: ms(go_percentile(values, percentile)),
            percentile,
            max_ms: ms(values[values.len() - 1]),
            mean_ms: sum as f64 / values.len() as f64 / 1e6,
        })
    }
}

/// The reference's percentile: `sorted[p * len / 100]`.
pub fn go_percentile(sorted: &[i64], p: u32) -> i64 {
    let rank = (p as usize * sorted.len() / 100).min(sorted.len().saturating_sub(1));
    sorted[rank]
}

/// Rounds to whole milliseconds the way the reference prints them.
fn round_ms(ms: f64) -> i64 {
    let ns = (ms * 1e6).round() as i64;
    (ns + 500_000).div_euclid(1_000_000)
}

/// The results of one step.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// 1-based.
    pub step: u32,
    /// Clients connected during the step.
    pub clients: usize,
    /// Round-trip times (request to its answer).
    pub rtt: Summary,
    /// Send to last delivery, over the sampled broadcasts that reached
    /// everyone (broadcast only).
    pub all_received: Option<Summary>,
    /// Sampled broadcasts that had not reached every client when the step
    /// ended.
    pub incomplete_broadcasts: usize,
    /// The limit percentile exceeded the limit: this step ended the run and
    /// is not printed (as in the reference).
    pub over_limit: bool,
    /// Time to connect the clients added for this step.
    pub connect_s: f64,
    /// Time spent on the membership barrier.
    pub barrier_s: f64,
    /// Time to collect the sample.
    pub sample_s: f64,
    /// Time waiting for the sample's last deliveries.
    pub drain_s: f64,
    /// Seconds since the run started, at the step's start and end.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
}

impl StepResult {
    /// The reference's output line.
    pub fn line(&self) -> String {
        format!(
            "clients: {:5}    {}per-rtt: {:3}ms    min-rtt: {:3}ms    median-rtt: {:3}ms    max-rtt: {:3}ms",
            self.clients,
            self.rtt.percentile,
            round_ms(self.rtt.pct_ms),
            round_ms(self.rtt.min_ms),
            round_ms(self.rtt.median_ms),
            round_ms(self.rtt.max_ms),
        )
    }

    /// The companion line with the all-received latency (printed on stderr).
    pub fn all_received_line(&self) -> Option<String> {
        let a = self.all_received.as_ref()?;
        let mut line = format!(
            "  all-received {:5}    {}per: {:3}ms    min: {:3}ms    median: {:3}ms    max: {:3}ms",
            a.count,
            a.percentile,
            round_ms(a.pct_ms),
            round_ms(a.min_ms),
            round_ms(a.median_ms),
            round_ms(a.max_ms),
        );
        if self.incomplete_broadcasts > 0 {
            line.push_str(&format!("    INCOMPLETE: {}", self.incomplete_broadcasts));
        }
        Some(line)
    }
}

/// What we know of one request.
#[derive(Debug, Default)]
struct Rec {
    warmup: bool,
    answered: bool,
    /// Pools in which every client has it.
    completes: u32,
    last_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Connecting,
    Barrier,
    Sampling,
    Draining,
    Grace,
    Verifying,
    Done,
}

/// The driver. Feed it pool events, tick it, and forward its commands.
pub(crate) struct Driver {
    p: ShootoutParams,
    broadcast: bool,
    /// Clients per pool.
    pool_clients: Vec<usize>,
    phase: Phase,
    phase_since: Instant,
    last_event: Instant,
    run_start: Instant,
    step: u32,
    awaiting: u32,
    in_progress: usize,
    samples: Vec<i64>,
    step_bcasts: Vec<i64>,
    all_bcasts: Vec<(i64, u32)>,
    recs: HashMap<i64, Rec>,
    barrier_ok: bool,
    last_probe: Instant,
    step_started: Instant,
    connect_s: f64,
    barrier_s: f64,
    sample_s: f64,
    rng: fastrand::Rng,
    error: Option<BenchError>,
    /// Completed steps.
    pub results: Vec<StepResult>,
    /// The merged verification report, once all pools answered.
    pub verification: Option<VerifyReport>,
    /// Commands for pools: (pool index, command).
    pub outbox: Vec<(usize, PoolCmd)>,
    /// Steps finished since the caller last looked (to print).
    pub finished: Vec<StepResult>,
}

impl Driver {
    /// A driver over `pools` pools; call [`Driver::start`] next.
    pub fn new(p: ShootoutParams, pools: usize, now: Instant) -> Driver {
        Driver {
            broadcast: p.scenario == "broadcast",
            p,
            pool_clients: vec![0; pools.max(1)],
            phase: Phase::Connecting,
            phase_since: now,
            last_event: now,
            run_start: now,
            step: 1,
            awaiting: 0,
            in_progress: 0,
            samples: Vec::new(),
            step_bcasts: Vec::new(),
            all_bcasts: Vec::new(),
            recs: HashMap::new(),
            barrier_ok: false,
            last_probe: now,
            step_started: now,
            connect_s: 0.0,
            barrier_s: 0.0,
            sample_s: 0.0,
            rng: fastrand::Rng::new(),
            error: None,
            results: Vec::new(),
            verification: None,
            outbox: Vec::new(),
            finished: Vec::new(),
        }
    }

    /// Connects the initial clients.
    pub fn start(&mut self, now: Instant) {
        let n = if self.p.initial_clients == 0 {
            self.p.step_size
        } else {
            self.p.initial_clients
        };
        self.connect(n, now);
    }

    fn total_clients(&self) -> usize {
        self.pool_clients.iter().sum()
    }

    fn active_pools(&self) -> u32 {
        self.pool_clients.iter().filter(|&&c| c > 0).count() as u32
    }

    fn set_phase(&mut self, phase: Phase, now: Instant) {
        self.phase = phase;
        self.phase_since = now;
        self.last_event = now;
    }

    /// Spreads `n` new clients over the pools, round-robin.
    fn connect(&mut self, n: usize, now: Instant) {
        self.step_started = now;
        self.set_phase(Phase::Connecting, now);
        let pools = self.pool_clients.len();
        self.awaiting = 0;
        for w in 0..pools {
            let share = n / pools + usize::from(w < n % pools);
            if share > 0 {
                self.awaiting += 1;
                self.outbox.push((
                    w,
                    PoolCmd::Connect {
                        n: share,
                        step: self.step,
                    },
                ));
            }
        }
        if self.awaiting == 0 {
            self.error = Some(BenchError::Args("no clients to connect".into()));
        }
    }

    /// Sends one request from a client chosen uniformly at random.
    fn send_random(&mut self, warmup: bool) {
        let total = self.total_clients();
        if total == 0 {
            return;
        }
        let mut r = self.rng.usize(0..total);
        for (w, &c) in self.pool_clients.iter().enumerate() {
            if r < c {
                self.outbox.push((w, PoolCmd::Send { client: r, warmup }));
                return;
            }
            r -= c;
        }
    }

    /// Handles an event from a pool.
    pub fn on_event(&mut self, ev: PoolEvent, now: Instant) {
        self.last_event = now;
        match ev {
            PoolEvent::Failed { worker, message } => {
                if self.error.is_none() {
                    let at = if self.pool_clients.len() > 1 {
                        format!("worker {worker}: ")
                    } else {
                        String::new()
                    };
                    self.error = Some(BenchError::Client(format!("{at}{message}")));
                }
            }
            PoolEvent::Connected { worker, clients } => {
                if let Some(c) = self.pool_clients.get_mut(worker as usize) {
                    *c = clients;
                }
                self.awaiting = self.awaiting.saturating_sub(1);
            }
            PoolEvent::Rtt {
                send_ns,
                rtt_ns,
                warmup,
            } => {
                let rec = self.recs.entry(send_ns).or_default();
                rec.warmup = warmup;
                rec.answered = true;
                if !warmup && self.phase == Phase::Sampling {
                    self.samples.push(rtt_ns);
                    self.in_progress = self.in_progress.saturating_sub(1);
                    if self.broadcast {
                        self.step_bcasts.push(send_ns);
                        self.all_bcasts.push((send_ns, self.step));
                    }
                    if self.samples.len() + self.in_progress < self.p.sample_size {
                        self.send_random(false);
                        self.in_progress += 1;
                    }
                } else if !warmup && self.broadcast {
                    // An answer outside sampling (it cannot happen with a
                    // correct driver); still verify its deliveries.
                    self.all_bcasts.push((send_ns, self.step));
                }
            }
            PoolEvent::Complete { send_ns, last_ns } => {
                let active = self.active_pools();
                let rec = self.recs.entry(send_ns).or_default();
                rec.completes += 1;
                rec.last_ns = rec.last_ns.max(last_ns);
                if rec.completes >= active
                    && send_ns.rem_euclid(2 * self.pool_clients.len() as i64) & 1 == 1
                {
                    self.barrier_ok = true;
                }
            }
            PoolEvent::Verified { report, .. } => {
                self.verification
                    .get_or_insert_with(VerifyReport::default)
                    .merge(&report);
                self.awaiting = self.awaiting.saturating_sub(1);
            }
        }
    }

    /// Advances the state machine. Returns the next instant it wants to be
    /// called at, or `None` once the run is over.
    pub fn tick(&mut self, now: Instant) -> Result<Option<Instant>, BenchError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let stall = Duration::from_secs_f64(self.p.stall_timeout_s);
        loop {
            let before = self.phase;
            match self.phase {
                Phase::Connecting => {
                    if self.awaiting == 0 {
                        self.connect_s = (now - self.phase_since).as_secs_f64();
                        if self.broadcast {
                            self.barrier_ok = false;
                            self.set_phase(Phase::Barrier, now);
                            self.send_random(true);
                            self.last_probe = now;
                        } else {
                            self.barrier_s = 0.0;
                            self.start_sampling(now);
                        }
                    } else if now - self.last_event > stall {
                        return Err(BenchError::Stalled(format!(
                            "no client connected for {:.0}s while opening clients for step {} ({} open so far)",
                            stall.as_secs_f64(),
                            self.step,
                            self.total_clients()
                        )));
                    }
                }
                Phase::Barrier => {
                    let waited = now - self.phase_since;
                    if self.barrier_ok || waited > Duration::from_secs_f64(self.p.barrier_timeout_s)
                    {
                        if !self.barrier_ok {
                            eprintln!(
                                "warning: no probe broadcast reached all {} clients within {:.1}s; sampling anyway (verification will count what is missing)",
                                self.total_clients(),
                                self.p.barrier_timeout_s
                            );
                        }
                        self.barrier_s = waited.as_secs_f64();
                        self.start_sampling(now);
                    } else if now - self.last_probe >= Duration::from_millis(100) {
                        self.send_random(true);
                        self.last_probe = now;
                    }
                }
                Phase::Sampling => {
                    if self.samples.len() >= self.p.sample_size {
                        self.sample_s = (now - self.phase_since).as_secs_f64();
                        if self.broadcast {
                            self.set_phase(Phase::Draining, now);
                        } else {
                            self.finish_step(now, 0.0);
                        }
                    } else if now - self.last_event > stall {
                        return Err(BenchError::Stalled(format!(
                            "{} of {} answers missing after {:.0}s without progress in step {} ({} clients): the server dropped requests or answers",
                            self.in_progress,
                            self.p.sample_size,
                            stall.as_secs_f64(),
                            self.step,
                            self.total_clients()
                        )));
                    }
                }
                Phase::Draining => {
                    let active = self.active_pools();
                    let done = self
                        .step_bcasts
                        .iter()
                        .all(|s| self.recs.get(s).is_some_and(|r| r.completes >= active));
                    let waited = now - self.phase_since;
                    if done || waited > Duration::from_secs_f64(self.p.drain_timeout_s) {
                        self.finish_step(now, waited.as_secs_f64());
                    }
                }
                Phase::Grace => {
                    if now - self.phase_since >= Duration::from_secs_f64(self.p.verify_grace_s) {
                        let broadcasts = std::mem::take(&mut self.all_bcasts);
                        self.awaiting = 0;
                        for w in 0..self.pool_clients.len() {
                            self.awaiting += 1;
                            self.outbox.push((
                                w,
                                PoolCmd::Verify {
                                    broadcasts: broadcasts.clone(),
                                },
                            ));
                        }
                        self.all_bcasts = broadcasts;
                        self.set_phase(Phase::Verifying, now);
                    }
                }
                Phase::Verifying => {
                    if self.awaiting == 0 {
                        self.set_phase(Phase::Done, now);
                    } else if now - self.phase_since > stall {
                        return Err(BenchError::Stalled(
                            "a worker did not answer the verification request".into(),
                        ));
                    }
                }
                Phase::Done => return Ok(None),
            }
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if self.phase == before {
                break;
            }
        }
        let next = match self.phase {
            Phase::Barrier => self.last_probe + Duration::from_millis(100),
            Phase::Grace => self.phase_since + Duration::from_secs_f64(self.p.verify_grace_s),
            _ => now + Duration::from_millis(50),
        };
        Ok(Some(next))
    }

    fn start_sampling(&mut self, now: Instant) {
        self.set_phase(Phase::Sampling, now);
        self.samples.clear();
        self.step_bcasts.clear();
        self.in_progress = 0;
        for _ in 0..self.p.concurrent.min(self.p.sample_size).max(1) {
            self.send_random(false);
            self.in_progress += 1;
        }
    }

    fn finish_step(&mut self, now: Instant, drain_s: f64) {
        let pct = self.p.limit_percentile;
        let Some(rtt) = Summary::of(&mut self.samples, pct) else {
            self.error = Some(BenchError::Internal("a step ended without samples"));
            return;
        };
        let active = self.active_pools();
        let mut all: Vec<i64> = Vec::with_capacity(self.step_bcasts.len());
        let mut incomplete = 0;
        for s in &self.step_bcasts {
            match self.recs.get(s) {
                Some(r) if r.completes >= active => all.push(r.last_ns - s),
                _ => incomplete += 1,
            }
        }
        let all_received = if self.broadcast {
            Summary::of(&mut all, pct)
        } else {
            None
        };
        let over_limit = self.p.total_steps == 0 && rtt.pct_ms > self.p.limit_rtt_ms;
        let secs = |t: Instant| (t - self.run_start).as_secs_f64();
        let result = StepResult {
            step: self.step,
            clients: self.total_clients(),
            rtt,
            all_received,
            incomplete_broadcasts: incomplete,
            over_limit,
            connect_s: self.connect_s,
            barrier_s: self.barrier_s,
            sample_s: self.sample_s,
            drain_s,
            started_s: secs(self.step_started),
            ended_s: secs(now),
        };
        self.results.push(result.clone());
        self.finished.push(result);
        // Forget the tallies of finished probes and broadcasts.
        self.recs.retain(|_, r| !r.answered || r.completes < active);

        let next_total = self.total_clients() + self.p.step_size;
        let out_of_time =
            self.p.duration_s > 0.0 && (now - self.run_start).as_secs_f64() >= self.p.duration_s;
        let stop = over_limit
            || (self.p.total_steps > 0 && self.step >= self.p.total_steps)
            || (self.p.max_clients > 0 && next_total > self.p.max_clients)
            || out_of_time
            || self.p.step_size == 0;
        if stop {
            self.set_phase(Phase::Grace, now);
        } else {
            self.step += 1;
            self.connect(self.p.step_size, now);
        }
    }

    /// The progress line.
    pub fn progress(&self, now: Instant) -> String {
        let what = match self.phase {
            Phase::Connecting => "connecting",
            Phase::Barrier => "barrier",
            Phase::Sampling => "sampling",
            Phase::Draining => "draining",
            Phase::Grace | Phase::Verifying => "verifying",
            Phase::Done => "done",
        };
        format!(
            "[{:>4.0}s] step {} · {} clients · {} · {}/{} samples",
            (now - self.run_start).as_secs_f64(),
            self.step,
            self.total_clients(),
            what,
            self.samples.len(),
            self.p.sample_size
        )
    }
}
