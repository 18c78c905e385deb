//! The steps of a game bots run (`bots --game holdem`, `bots --game NAME`):
//! the client set, the ramp of bots and each step's measured window with
//! the server's CPU ([`crate::sysmon`]) and the bytes on the bench's
//! sockets. Shared so that both game scenarios step, settle and measure
//! alike; only what they count differs.
//!
//! A step adds `--step-size` bots and waits until every bot is connected
//! and seated or waiting for a table (`settled`, the scenario's to say;
//! past [`SETTLE_LIMIT`] the run fails); then [`SETTLE`] passes, so that
//! the lobby deltas of the seating burst have drained, before the step's
//! window of `--step-duration` is measured. `--duration` caps the run.

use std::time::{Duration, Instant};

use crate::bots::BotsArgs;
use crate::common::Transport;
use crate::engine::{Io, IoStats};
use crate::hclients::{ClientKind, HeraldClients};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::sysmon::{mean_between, Monitor};
use crate::target::{Scheme, Target};
use crate::BenchError;

/// Pause between the last bot of a step being seated and the step's
/// measured window: the window measures play, not the tail of the seating
/// burst.
pub(crate) const SETTLE: Duration = Duration::from_secs(3);
/// A step whose bots are not all connected and seated (or waiting) after
/// this long fails the run.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(120);

/// The game bots' clients (`ws-json`, `ws-binary` or `tcp`; bot i connects
/// to URL i % n), lenient: a message they cannot read is the scenario's to
/// count, not fatal. `players` names the bots in the error for other
/// transports. Also returns the servers.
pub(crate) fn game_clients(
    args: &BotsArgs,
    players: &str,
) -> Result<(HeraldClients, Vec<Target>), BenchError> {
    let (kind, scheme) = match args.transport {
        Transport::WsJson | Transport::WsBinary => (ClientKind::Ws, Scheme::Ws),
        Transport::Tcp => (ClientKind::Tcp, Scheme::Tcp),
        Transport::Sse | Transport::Poll => {
            return Err(BenchError::Args(format!(
                "{players} play: use ws-json, ws-binary or tcp, not {}",
                args.transport.as_str()
            )))
        }
    };
    let targets = crate::fanout::parse_urls(std::slice::from_ref(&args.url), scheme)?;
    let mut clients = HeraldClients::with_kind(
        kind,
        &targets,
        args.transport.encoding(),
        args.local_addr.clone(),
        args.connect_concurrency,
        0,
    );
    clients.lenient = true;
    Ok((clients, targets))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Connecting,
    /// Every bot is seated; the lobby deltas of the last sits (one flush per
    /// lobby interval, to every subscriber) are still draining.
    Settling,
    Running,
    Done,
}

/// What [`Ramp::advance`] asks of the scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Next {
    /// Nothing; wake up by then at the latest.
    Wait(Instant),
    /// The measured window starts now: reset the counters.
    Window,
    /// The step's window is over: report it ([`Ramp::window`]), then, if
    /// `more`, add the next step's bots ([`Ramp::new_bots`]).
    StepEnd {
        /// Another step follows.
        more: bool,
    },
    /// The run is over.
    Done,
    /// The step's bots did not settle within [`SETTLE_LIMIT`].
    Stalled,
}

/// One step's measured window: its time, the server's CPU and the bytes
/// on the bench's sockets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// Seconds since the start.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
    /// Its length, seconds (never 0).
    pub secs: f64,
    /// Server CPU, % of one core.
    pub server_cpu_pct: Option<f64>,
    /// 100 − server CPU %, floored at 0.
    pub server_idle_pct: Option<f64>,
    /// Idle share of the whole machine, %.
    pub system_idle_pct: Option<f64>,
    /// Bytes per second into the server (sent by the bots).
    pub bandwidth_in_bps: f64,
    /// Bytes per second out of the server (received by the bots).
    pub bandwidth_out_bps: f64,
}

/// The steps of a run.
pub(crate) struct Ramp {
    /// When the run started.
    pub start: Instant,
    /// The same, Unix seconds.
    started_at: f64,
    /// Time to connect and seat the last step's new bots, seconds.
    pub connect_s: f64,
    /// The server's samples.
    pub monitor: Monitor,
    /// The progress line.
    pub progress: Progress,
    /// Bots at the last step.
    pub max_bots: usize,
    step_size: usize,
    step_duration: Duration,
    deadline: Option<Instant>,
    phase: Phase,
    since: Instant,
    window_stats: IoStats,
}

impl Ramp {
    /// The ramp `args` ask for, starting now.
    pub fn new(args: &BotsArgs) -> Ramp {
        let start = Instant::now();
        Ramp {
            start,
            started_at: crate::clock::now_secs_f64(),
            connect_s: 0.0,
            monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
            progress: Progress::new(args.common.quiet, start),
            max_bots: args.bots,
            step_size: if args.step_size == 0 {
                (args.bots / 10).max(1)
            } else {
                args.step_size
            },
            step_duration: args.step_duration,
            deadline: args.common.duration.map(|d| start + d),
            phase: Phase::Connecting,
            since: start,
            window_stats: IoStats::default(),
        }
    }

    /// Bots added per step.
    pub fn step_size(&self) -> usize {
        self.step_size
    }

    /// How many bots the next step adds to the `have` running.
    pub fn new_bots(&self, have: usize) -> usize {
        self.step_size.min(self.max_bots.saturating_sub(have))
    }

    /// The step's new bots are connecting (the clients need their tick).
    pub fn connecting(&self) -> bool {
        self.phase == Phase::Connecting
    }

    /// Moves the ramp on at `now`; `settled`: every bot is connected and
    /// seated or waiting for a table; `bots`: how many run.
    pub fn advance(&mut self, io: &Io, now: Instant, settled: bool, bots: usize) -> Next {
        let wait = Next::Wait(now + Duration::from_millis(20));
        match self.phase {
            Phase::Connecting => {
                if settled {
                    self.connect_s = (now - self.since).as_secs_f64();
                    self.phase = Phase::Settling;
                    self.since = now;
                } else if now - self.since > SETTLE_LIMIT {
                    return Next::Stalled;
                }
                wait
            }
            Phase::Settling if now - self.since >= SETTLE => {
                self.phase = Phase::Running;
                self.since = now;
                self.window_stats = io.stats;
                Next::Window
            }
            Phase::Settling => wait,
            Phase::Running => {
                let out_of_time = self.deadline.is_some_and(|d| now >= d);
                if now - self.since >= self.step_duration || out_of_time {
                    let more = bots < self.max_bots && !out_of_time;
                    // The window (`since`) is read by `window` first.
                    Next::StepEnd { more }
                } else {
                    let Next::Wait(next) = wait else { return wait };
                    Next::Wait(next.min(self.since + self.step_duration))
                }
            }
            Phase::Done => Next::Done,
        }
    }

    /// The window that just ended (after [`Next::StepEnd`]); the ramp goes
    /// on to the next step's connects, or to the end.
    pub fn window(&mut self, io: &Io, now: Instant, more: bool) -> Window {
        let started_s = (self.since - self.start).as_secs_f64();
        let ended_s = (now - self.start).as_secs_f64();
        let secs = (now - self.since).as_secs_f64().max(1e-9);
        self.monitor.sample(now);
        let samples = &self.monitor.samples;
        let cpu = mean_between(samples, started_s, ended_s, |s| s.server_cpu_pct);
        let stats = io.stats;
        let w = Window {
            started_s,
            ended_s,
            secs,
            server_cpu_pct: cpu,
            server_idle_pct: cpu.map(|c| (100.0 - c).max(0.0)),
            system_idle_pct: mean_between(samples, started_s, ended_s, |s| s.system_idle_pct),
            bandwidth_in_bps: (stats.bytes_out - self.window_stats.bytes_out) as f64 / secs,
            bandwidth_out_bps: (stats.bytes_in - self.window_stats.bytes_in) as f64 / secs,
        };
        self.phase = if more { Phase::Connecting } else { Phase::Done };
        self.since = now;
        self.progress.clear();
        w
    }

    /// Samples the server and shows the progress line `text` when due;
    /// returns when next to wake for them.
    pub fn tick(&mut self, now: Instant, text: impl FnOnce() -> String) -> Instant {
        let sample = self.monitor.tick(now);
        sample.min(self.progress.tick(now, text))
    }

    /// Seconds since the start.
    pub fn elapsed(&self, now: Instant) -> f64 {
        (now - self.start).as_secs_f64()
    }

    /// The run is over: its result file with `steps`, the run's length and
    /// the server's samples (the caller adds params and summary).
    pub fn record<S: serde::Serialize>(
        &mut self,
        scenario: &str,
        label: String,
        steps: &[S],
    ) -> Result<RunRecord, BenchError> {
        self.progress.clear();
        let end = Instant::now();
        self.monitor.sample(end);
        let mut record = RunRecord::new(scenario, label, self.started_at);
        record.duration_s = (end - self.start).as_secs_f64();
        record.steps = steps
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(BenchError::Json)?;
        record.system = std::mem::take(&mut self.monitor.samples);
        Ok(record)
    }
}
