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
//!
//! [`GameBots`] is the rest the two scenarios share: a bot per connection,
//! the events of each message handled once the clients have read it, and
//! the tick that runs the bots' timers and the ramp.

use std::time::{Duration, Instant};

use crate::bots::BotsArgs;
use crate::engine::{Engine, Io, IoStats, Tick};
use crate::hclients::{HeraldClients, State};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::scenario::{Adapter, Arrival, Got, Inbox, Scenario};
use crate::sysmon::{mean_between, Monitor};
use crate::target::Target;
use crate::BenchError;

/// Pause between the last bot of a step being seated and the step's
/// measured window: the window measures play, not the tail of the seating
/// burst.
pub(crate) const SETTLE: Duration = Duration::from_secs(3);
/// A step whose bots are not all connected and seated (or waiting) after
/// this long fails the run.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(120);

/// The game bots' clients (see [`crate::bots::bot_clients`]), lenient: a
/// message they cannot read is the scenario's to count, not fatal.
/// `players` names the bots in the error for other transports. Also
/// returns the servers.
pub(crate) fn game_clients(
    args: &BotsArgs,
    players: &str,
) -> Result<(HeraldClients, Vec<Target>), BenchError> {
    let (mut clients, targets) = crate::bots::bot_clients(args, &format!("{players} play"))?;
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
/// on the bench's sockets (in a step's JSON, flattened into it).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Window {
    /// Seconds since the start.
    pub started_s: f64,
    /// See `started_s`.
    pub ended_s: f64,
    /// Its length, seconds (never 0).
    #[serde(skip)]
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

    /// The run is over: its result file with `steps`, the run's length,
    /// the server's samples and the parameters every game bots run has
    /// (`extra` adds the scenario's own; the caller adds the summary).
    /// `label` unless `--label`.
    pub fn record<S: serde::Serialize>(
        &mut self,
        scenario: &str,
        args: &BotsArgs,
        label: String,
        steps: &[S],
        extra: serde_json::Value,
    ) -> Result<RunRecord, BenchError> {
        self.progress.clear();
        let end = Instant::now();
        self.monitor.sample(end);
        let label = args.common.label.clone().unwrap_or(label);
        let mut record = RunRecord::new(scenario, label, self.started_at);
        record.duration_s = (end - self.start).as_secs_f64();
        record.steps = steps
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(BenchError::Json)?;
        record.system = std::mem::take(&mut self.monitor.samples);
        let mut params = serde_json::json!({
            "url": args.url,
            "transport": args.transport,
            "game": args.game,
            "bots": args.bots,
            "step_size": self.step_size,
            "step_duration_s": args.step_duration.as_secs_f64(),
            "think_ms": args.think.as_millis() as u64,
        });
        if let (Some(p), serde_json::Value::Object(extra)) = (params.as_object_mut(), extra) {
            p.extend(extra);
        }
        record.params = params;
        Ok(record)
    }
}

/// Adds the first step's bots to `s` and runs it on the engine until its
/// last step is over; the engine's result is for the result file.
pub(crate) fn play<S: GameBots>(s: &mut S) -> Result<Result<(), BenchError>, BenchError> {
    s.add_step();
    // Lobby snapshots of many tables are large.
    let mut engine = Engine::new(16 << 20)?;
    Ok(engine.run(&mut Adapter(s)))
}

/// A game bots scenario: one bot per connection (tag = bot index) on one
/// lenient client set, stepped by a [`Ramp`]; it is a [`Scenario`] through
/// [`GameBots::arrival`] and [`GameBots::tick`].
pub(crate) trait GameBots {
    /// The clients, the inbox and the ramp.
    fn parts(&mut self) -> (&mut HeraldClients, &mut Inbox, &mut Ramp);
    /// Bots running.
    fn bots(&self) -> usize;
    /// One event `got` (with its message) for bot `b`.
    fn on_got(
        &mut self,
        io: &mut Io,
        b: usize,
        got: Got,
        msg: &[u8],
        now_ns: i64,
    ) -> Result<(), BenchError>;
    /// Bot `b`'s connection is set up (`connect` answered): its first step.
    /// Called after each of its messages until it has taken it.
    fn on_ready(&mut self, io: &mut Io, b: usize);
    /// Runs the bots' timers that are due; returns when the next one is
    /// (Unix ns).
    fn run_due(&mut self, io: &mut Io) -> Option<i64>;
    /// Every bot connected and seated or waiting for a table.
    fn settled(&self) -> bool;
    /// Bots seated.
    fn players(&self) -> usize;
    /// The measured window starts: reset the counters.
    fn reset_window(&mut self, io: &Io);
    /// The window is over: report the step ([`Ramp::window`]).
    fn finish_step(&mut self, io: &Io, now: Instant, more: bool);
    /// Adds the next step's bots.
    fn add_step(&mut self);
    /// The progress line.
    fn progress(&self, now: Instant) -> String;

    /// [`Scenario::on_arrival`]: feeds the message to the
    /// clients, then hands its events to the bot.
    fn arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        let (tag, now_ns) = (msg.tag, msg.now_ns);
        let (clients, inbox, _) = self.parts();
        let mut mail = std::mem::take(inbox);
        let fed = mail.fill(msg, clients, io);
        let b = tag as usize;
        let mut result = fed.and_then(|()| {
            if b >= self.bots() {
                return Err(BenchError::Internal("message for an unknown bot"));
            }
            Ok(())
        });
        for (g, m) in mail.iter() {
            if result.is_err() {
                break;
            }
            result = self.on_got(io, b, g, m, now_ns);
        }
        mail.clear();
        *self.parts().1 = mail;
        result?;
        if self.parts().0.clients[b].state == State::Ready {
            self.on_ready(io, b);
        }
        Ok(())
    }

    /// [`Scenario::on_tick`]: the bots' timers, the
    /// clients' connects, the ramp, the server's samples and the progress
    /// line.
    fn tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let due = self.run_due(io);
        if self.parts().2.connecting() {
            self.parts().0.tick(io)?;
        }
        let (settled, bots) = (self.settled(), self.bots());
        let mut next = match self.parts().2.advance(io, now, settled, bots) {
            Next::Wait(next) => next,
            Next::Window => {
                self.reset_window(io);
                now
            }
            Next::StepEnd { more } => {
                self.finish_step(io, now, more);
                if more {
                    self.add_step();
                }
                now
            }
            Next::Done => return Ok(Tick::Done),
            Next::Stalled => {
                let ready = self.parts().0.ready();
                return Err(BenchError::Stalled(format!(
                    "{ready} of {bots} bots connected, {} seated after {}s",
                    self.players(),
                    SETTLE_LIMIT.as_secs()
                )));
            }
        };
        if let Some(due) = due {
            let wait = due - crate::clock::now_ns();
            next = next.min(now + Duration::from_nanos(wait.max(0) as u64));
        }
        let text = self.progress(now);
        let show = self.parts().2.tick(now, || text);
        Ok(Tick::Continue(Some(next.min(show))))
    }
}

impl<T: GameBots> Scenario for T {
    fn group(&mut self, _: u64) -> &mut HeraldClients {
        self.parts().0
    }

    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError> {
        self.arrival(io, msg)
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        self.tick(io, now)
    }
}
