//! `broadcast` and `echo`: the websocket-shootout method (hashrocket's
//! `websocket-bench`), against any server that speaks that protocol.
//!
//! - [`wire`]: the messages, encoded and scanned without allocating.
//! - [`pool`]: the clients of one process; commands in, events out.
//! - [`driver`]: the reference's step logic, plus all-received latency,
//!   the membership barrier, the drain and the exactly-once verification.
//! - [`workers`]: the same pools in child processes, for more clients than
//!   one process has file descriptors for.
//!
//! This module holds the arguments and the glue that runs a driver and its
//! pools on the [`engine`](crate::engine).

pub mod driver;
pub mod pool;
pub mod wire;
pub mod workers;

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use herald_ws::Message;
use serde_json::{json, Value};

use crate::common::{CommonArgs, Transport};
use crate::duration::parse_duration;
use crate::engine::{CloseReason, ConnId, Engine, Handler, Io, Tick};
use crate::output::RunRecord;
use crate::progress::Progress;
use crate::sysmon::{mean_between, Monitor};
use crate::BenchError;
use driver::{Driver, ShootoutParams, StepResult};
use pool::{Pool, PoolConfig, VerifyReport};
use wire::ServerType;

/// Arguments of `broadcast` and `echo`. Flag names and defaults are the
/// reference tool's, so its command lines work unchanged.
#[derive(Debug, Clone, clap::Args)]
pub struct ShootoutArgs {
    /// The server's URL, e.g. ws://127.0.0.1:8080/shootout.
    pub url: String,
    /// How the server encodes messages: json (text frames) or binary.
    #[arg(long, value_enum, default_value = "json")]
    pub server_type: ServerType,
    /// Same as --server-type, in the other scenarios' terms: ws-json or
    /// ws-binary. Overrides --server-type when given.
    #[arg(long, value_enum)]
    pub transport: Option<Transport>,
    /// Clients before the first step (0: one step's worth).
    #[arg(long, default_value_t = 0)]
    pub initial_clients: usize,
    /// Clients added per step. Default 5000.
    #[arg(long)]
    pub step_size: Option<usize>,
    /// Requests in flight at once. Default 4 (broadcast), 50 (echo).
    #[arg(short = 'c', long)]
    pub concurrent: Option<usize>,
    /// Answers collected per step. Default 20 (broadcast), 10000 (echo).
    #[arg(short = 's', long)]
    pub sample_size: Option<usize>,
    /// Bytes of padding in each request's payload.
    #[arg(long, default_value_t = 0)]
    pub payload_padding: usize,
    /// The RTT percentile compared with --limit-rtt (1-99).
    #[arg(long, default_value_t = 95, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub limit_percentile: u32,
    /// Stop at the first step whose --limit-percentile RTT exceeds this.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub limit_rtt: Duration,
    /// Stop after this many printed steps instead (0: run until the limit).
    #[arg(long, default_value_t = 0)]
    pub total_steps: u32,
    /// Local (source) address to connect from; repeat to spread clients
    /// round-robin over several, e.g. -l 127.0.0.2 -l 127.0.0.3.
    #[arg(short = 'l', long = "local-addr")]
    pub local_addr: Vec<IpAddr>,
    /// Never go beyond this many clients (0: no cap).
    #[arg(long, default_value_t = 0)]
    pub max_clients: usize,
    /// Worker processes holding the clients (needed above ~19,000 clients:
    /// one process may open 20,000 files here). 1 runs everything in this
    /// process.
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// Connects in progress at once, per process.
    #[arg(long, default_value_t = 128)]
    pub connect_concurrency: usize,
    /// Longest wait, after a step's sample, for its broadcasts to reach
    /// every client before the step is closed anyway.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Longest wait for a probe broadcast to reach every client before a
    /// step's sample starts.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub barrier_timeout: Duration,
    /// Fail when no answer or connection arrives for this long.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Wait after the last step before verifying, to catch late duplicates.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub verify_grace: Duration,
    /// Output, sampling and time-limit flags.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ShootoutArgs {
    /// The parameters with the per-scenario defaults applied.
    pub fn params(&self, broadcast: bool) -> ShootoutParams {
        let server_type = match self.transport {
            Some(Transport::WsBinary) => ServerType::Binary,
            Some(Transport::WsJson) => ServerType::Json,
            // Refused by `measure` before any use.
            Some(_) | None => self.server_type,
        };
        ShootoutParams {
            scenario: if broadcast { "broadcast" } else { "echo" },
            url: self.url.clone(),
            server_type,
            initial_clients: self.initial_clients,
            step_size: self.step_size.unwrap_or(5000),
            concurrent: self.concurrent.unwrap_or(if broadcast { 4 } else { 50 }),
            sample_size: self
                .sample_size
                .unwrap_or(if broadcast { 20 } else { 10000 }),
            payload_padding: self.payload_padding,
            limit_percentile: self.limit_percentile,
            limit_rtt_ms: self.limit_rtt.as_secs_f64() * 1e3,
            total_steps: self.total_steps,
            max_clients: self.max_clients,
            local_addrs: self.local_addr.iter().map(ToString::to_string).collect(),
            workers: self.workers.max(1),
            connect_concurrency: self.connect_concurrency.max(1),
            drain_timeout_s: self.drain_timeout.as_secs_f64(),
            barrier_timeout_s: self.barrier_timeout.as_secs_f64(),
            stall_timeout_s: self.timeout.as_secs_f64(),
            verify_grace_s: self.verify_grace.as_secs_f64(),
            duration_s: self.common.duration.map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    /// The configuration of pool `worker` of `workers`.
    pub(crate) fn pool_config(&self, p: &ShootoutParams, worker: u32, workers: u32) -> PoolConfig {
        PoolConfig {
            url: p.url.clone(),
            mode: p.server_type,
            broadcast: p.scenario == "broadcast",
            padding: p.payload_padding,
            local_addrs: self.local_addr.clone(),
            connect_concurrency: p.connect_concurrency,
            worker,
            workers,
        }
    }
}

/// What a finished run produced (also when its verification failed).
#[derive(Debug, Clone)]
pub struct ShootoutOutcome {
    /// Every measured step, the last one possibly over the limit.
    pub steps: Vec<StepResult>,
    /// The merged verification report.
    pub verification: VerifyReport,
    /// The record written to `--out`.
    pub record: RunRecord,
}

/// Runs `broadcast` (or `echo`) and prints the reference's lines on stdout.
/// Fails with [`BenchError::Verification`] when a delivery was lost or
/// duplicated, after writing the result files.
pub fn run(args: &ShootoutArgs, broadcast: bool) -> Result<ShootoutOutcome, BenchError> {
    let outcome = measure(args, broadcast)?;
    if !outcome.record.passed {
        return Err(BenchError::Verification(failure_text(
            &outcome.verification,
        )));
    }
    Ok(outcome)
}

/// Runs the scenario and returns its outcome whether or not the
/// verification passed (errors are I/O or protocol failures).
pub fn measure(args: &ShootoutArgs, broadcast: bool) -> Result<ShootoutOutcome, BenchError> {
    if let Some(t @ (Transport::Tcp | Transport::Sse | Transport::Poll)) = args.transport {
        return Err(BenchError::Args(format!(
            "the websocket-shootout scenarios run over WebSocket only, not --transport {}",
            t.as_str()
        )));
    }
    let params = args.params(broadcast);
    if params.sample_size == 0 {
        return Err(BenchError::Args("--sample-size must be at least 1".into()));
    }
    if args.workers > 1 {
        return workers::run_coordinator(args, params);
    }
    let start = Instant::now();
    let started_at = crate::clock::now_secs_f64();
    let pool = Pool::new(args.pool_config(&params, 0, 1))?;
    let mut run = LocalRun {
        driver: Driver::new(params.clone(), 1, start),
        pool,
        monitor: Monitor::new(args.common.server_pid, &args.common.net_iface, start),
        progress: Progress::new(args.common.quiet, start),
        quiet: args.common.quiet,
        started: false,
    };
    let mut engine = Engine::new(MAX_MESSAGE)?;
    let result = engine.run(&mut run);
    run.progress.clear();
    let end = Instant::now();
    run.monitor.sample(end);
    finish(
        args,
        params,
        run.driver,
        run.monitor.samples,
        started_at,
        (end - start).as_secs_f64(),
        result,
    )
}

/// The largest message a shootout client accepts.
pub(crate) const MAX_MESSAGE: usize = 16 << 20;

/// Builds the outcome and writes the files. When the run itself failed
/// (`result` is an error), the steps measured so far are still written,
/// with `passed: false` and the error in `summary.error`, and the error is
/// returned.
pub(crate) fn finish(
    args: &ShootoutArgs,
    params: ShootoutParams,
    driver: Driver,
    samples: Vec<crate::sysmon::SysSample>,
    started_at: f64,
    duration_s: f64,
    result: Result<(), BenchError>,
) -> Result<ShootoutOutcome, BenchError> {
    let verification = driver.verification.clone().unwrap_or_default();
    let passed = verification.passed() && result.is_ok();
    let label = args.common.label.clone().unwrap_or_else(|| {
        format!(
            "{} {} {}",
            params.scenario,
            params.server_type.as_str(),
            params.url
        )
    });
    let mut record = RunRecord::new(params.scenario, label, started_at);
    record.duration_s = duration_s;
    record.params = serde_json::to_value(&params).map_err(BenchError::Json)?;
    for s in &driver.results {
        let mut v = serde_json::to_value(s).map_err(BenchError::Json)?;
        let cpu = mean_between(&samples, s.started_s, s.ended_s, |x| x.server_cpu_pct);
        let bench = mean_between(&samples, s.started_s, s.ended_s, |x| Some(x.bench_cpu_pct));
        if let Value::Object(map) = &mut v {
            map.insert("server_cpu_pct".into(), json!(cpu));
            map.insert("bench_cpu_pct".into(), json!(bench));
        }
        record.steps.push(v);
    }
    let within: Vec<&StepResult> = driver.results.iter().filter(|s| !s.over_limit).collect();
    record.summary = json!({
        "steps": within.len(),
        "max_clients_within_limit": within.last().map(|s| s.clients),
        "stopped_by_limit": driver.results.last().is_some_and(|s| s.over_limit),
        "deliveries_verified": verification.received,
        "error": result.as_ref().err().map(ToString::to_string),
    });
    record.verification = match &driver.verification {
        Some(_) => Some(serde_json::to_value(&verification).map_err(BenchError::Json)?),
        None => None,
    };
    record.passed = passed;
    record.system = samples;
    record.write(args.common.out.as_deref(), args.common.csv.as_deref())?;
    if let Err(e) = result {
        if let (false, Some(path)) = (args.common.quiet, args.common.out.as_deref()) {
            eprintln!("partial results written to {}", path.display());
        }
        return Err(e);
    }
    if !args.common.quiet {
        if passed {
            if params.scenario == "broadcast" {
                eprintln!(
                    "verified: {} broadcast deliveries to {} clients, every broadcast exactly once",
                    verification.received, verification.clients
                );
            } else {
                eprintln!("verified: every echo came back exactly once");
            }
        } else {
            eprintln!("VERIFICATION FAILED: {}", failure_text(&verification));
        }
        if let Some(path) = args.common.out.as_deref().map(Path::display) {
            eprintln!("results written to {path}");
        }
    }
    Ok(ShootoutOutcome {
        steps: driver.results,
        verification,
        record,
    })
}

/// A readable account of a failed verification.
pub fn failure_text(v: &VerifyReport) -> String {
    let mut parts = Vec::new();
    if v.missing > 0 {
        parts.push(format!(
            "{} of {} expected broadcast deliveries missing ({} clients affected)",
            v.missing, v.expected, v.clients_missing
        ));
    }
    if v.extra > 0 {
        parts.push(format!(
            "{} deliveries beyond the {} expected (duplicates; {} clients affected)",
            v.extra, v.expected, v.clients_extra
        ));
    }
    if v.clients_wrong_set > 0 {
        parts.push(format!(
            "{} clients received the right number of broadcasts but not the right ones (a loss hidden by a duplicate)",
            v.clients_wrong_set
        ));
    }
    if v.unmatched_answers > 0 {
        parts.push(format!(
            "{} answers matched no request in flight (duplicated answers)",
            v.unmatched_answers
        ));
    }
    if v.unexpected_messages > 0 {
        parts.push(format!(
            "{} messages of an unexpected type",
            v.unexpected_messages
        ));
    }
    if v.unanswered > 0 {
        parts.push(format!("{} requests never answered", v.unanswered));
    }
    parts.join("; ")
}

/// Driver and pool in this process.
struct LocalRun {
    driver: Driver,
    pool: Pool,
    monitor: Monitor,
    progress: Progress,
    quiet: bool,
    started: bool,
}

impl LocalRun {
    /// Passes events and commands between pool and driver until both are quiet.
    fn pump(&mut self, io: &mut Io, now: Instant) -> Result<Option<Instant>, BenchError> {
        if !self.started {
            self.started = true;
            self.driver.start(now);
        }
        loop {
            self.pool.tick(io, now);
            for ev in self.pool.events.drain(..) {
                self.driver.on_event(ev, now);
            }
            let next = self.driver.tick(now)?;
            let cmds: Vec<_> = self.driver.outbox.drain(..).collect();
            let idle = cmds.is_empty();
            for (_, cmd) in cmds {
                self.pool.command(io, cmd);
            }
            if idle && self.pool.events.is_empty() {
                return Ok(next);
            }
        }
    }
}

/// Prints the steps a driver finished since last asked.
pub(crate) fn print_steps(driver: &mut Driver, progress: &mut Progress, quiet: bool) {
    if driver.finished.is_empty() {
        return;
    }
    progress.clear();
    for step in driver.finished.drain(..) {
        if step.over_limit {
            if !quiet {
                eprintln!(
                    "  limit reached at {} clients: {}per-rtt {:.0}ms exceeds --limit-rtt (step not printed, as in the reference)",
                    step.clients, step.rtt.percentile, step.rtt.pct_ms
                );
            }
            continue;
        }
        println!("{}", step.line());
        if !quiet {
            if let Some(line) = step.all_received_line() {
                eprintln!("{line}");
            }
        }
    }
}

impl Handler for LocalRun {
    fn on_open(
        &mut self,
        io: &mut Io,
        _id: ConnId,
        _tag: u64,
        _protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        self.pool.on_open(io);
        Ok(())
    }

    fn on_message(
        &mut self,
        _io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        self.pool.on_message(tag, msg, now_ns);
        Ok(())
    }

    fn on_close(&mut self, _io: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        self.pool.on_close(tag, why);
        Ok(())
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        let next = self.pump(io, now)?;
        print_steps(&mut self.driver, &mut self.progress, self.quiet);
        let Some(next) = next else {
            return Ok(Tick::Done);
        };
        let sample = self.monitor.tick(now);
        let driver = &self.driver;
        let show = self.progress.tick(now, || driver.progress(now));
        Ok(Tick::Continue(Some(next.min(sample).min(show))))
    }
}
