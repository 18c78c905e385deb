//! `--workers N`: the shootout's clients spread over N child processes.
//!
//! Why processes: one process may open 20,000 files here (a hard limit), so
//! one process holds at most ~19,000 connections. The coordinator runs the
//! [`Driver`] and no connections; each worker is this same executable
//! re-executed as `… bench __worker`, runs one [`Pool`] on its own engine,
//! and talks to the coordinator over its stdin and stdout, one JSON object
//! per line:
//!
//! - coordinator → worker: first a [`PoolConfig`], then [`PoolCmd`]s;
//! - worker → coordinator: [`PoolEvent`]s.
//!
//! Traffic on the pipes is per request, never per delivery (a `Complete`
//! per broadcast per worker at most), so it costs nothing measurable.
//! Closing a worker's stdin ends it. Worker stderr goes to the terminal.
//!
//! Send times stay unique across workers (see `Pool::send_stamp`), and all
//! processes read the same system clock, so latencies measured in different
//! workers are comparable and merge into one all-received figure.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Instant;

use herald_ws::Message;
use mio::unix::pipe::Receiver;
use mio::{Interest, Token};

use super::driver::{Driver, ShootoutParams};
use super::pool::{Pool, PoolCmd, PoolConfig, PoolEvent};
use super::{finish, print_steps, ShootoutArgs, ShootoutOutcome, MAX_MESSAGE};
use crate::engine::{CloseReason, ConnId, Engine, Handler, Io, Tick, PIPE_TOKEN_BASE};
use crate::progress::Progress;
use crate::sysmon::Monitor;
use crate::BenchError;

/// Subcommands after which the re-executed command line is cut.
const SCENARIOS: &[&str] = &["broadcast", "echo", "idle"];

/// The command that starts a worker: this executable with the arguments
/// that led to the scenario (e.g. `herald bench`), then `__worker`.
pub(crate) fn worker_command() -> Result<Command, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Worker(format!("cannot find this executable: {e}")))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cut = args
        .iter()
        .position(|a| SCENARIOS.contains(&a.as_str()))
        .ok_or_else(|| {
            BenchError::Worker(
                "cannot re-execute this program as a worker (its command line names no scenario)"
                    .into(),
            )
        })?;
    let mut cmd = Command::new(exe);
    cmd.args(&args[..cut]).arg("__worker");
    Ok(cmd)
}

/// A running worker process.
pub(crate) struct WorkerProc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver,
    buf: Vec<u8>,
}

impl WorkerProc {
    /// Starts a worker and registers its stdout with `key`.
    pub fn spawn(io: &Io, key: usize) -> Result<WorkerProc, BenchError> {
        let mut child = worker_command()?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| BenchError::Worker(format!("cannot start a worker: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or(BenchError::Internal("worker without stdout"))?;
        let mut stdout = Receiver::from(stdout);
        stdout
            .set_nonblocking(true)
            .map_err(|e| BenchError::Worker(format!("worker pipe: {e}")))?;
        io.registry()
            .register(
                &mut stdout,
                Token(PIPE_TOKEN_BASE + key),
                Interest::READABLE,
            )
            .map_err(BenchError::Poll)?;
        Ok(WorkerProc {
            child,
            stdin,
            stdout,
            buf: Vec::new(),
        })
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one line of JSON.
    pub fn send<T: serde::Serialize>(&mut self, msg: &T) -> Result<(), BenchError> {
        let mut line = serde_json::to_vec(msg).map_err(BenchError::Json)?;
        line.push(b'\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or(BenchError::Internal("worker stdin closed"))?;
        stdin
            .write_all(&line)
            .map_err(|e| BenchError::Worker(format!("worker {} went away: {e}", self.pid())))
    }

    /// Reads what the worker wrote; returns whole lines, and whether the
    /// pipe is closed.
    pub fn read_lines<T: serde::de::DeserializeOwned>(
        &mut self,
        out: &mut Vec<T>,
    ) -> Result<bool, BenchError> {
        let mut tmp = [0u8; 8192];
        let closed = loop {
            match self.stdout.read(&mut tmp) {
                Ok(0) => break true,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BenchError::Worker(format!("worker pipe: {e}"))),
            }
        };
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            out.push(serde_json::from_slice(&line).map_err(BenchError::Json)?);
        }
        Ok(closed)
    }

    /// Closes stdin (the worker exits) and waits for the process.
    pub fn finish(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// The coordinator: a driver whose pools are worker processes.
struct Coordinator {
    driver: Driver,
    workers: Vec<WorkerProc>,
    monitor: Monitor,
    progress: Progress,
    quiet: bool,
    started: bool,
    error: Option<BenchError>,
}

impl Coordinator {
    fn forward(&mut self) -> Result<(), BenchError> {
        for (w, cmd) in self.driver.outbox.drain(..) {
            let worker = self
                .workers
                .get_mut(w)
                .ok_or(BenchError::Internal("no such worker"))?;
            worker.send(&cmd)?;
        }
        Ok(())
    }
}

impl Handler for Coordinator {
    fn on_open(
        &mut self,
        _: &mut Io,
        _: ConnId,
        _: u64,
        _: Option<&str>,
    ) -> Result<(), BenchError> {
        Ok(())
    }

    fn on_message(&mut self, _: &mut Io, _: u64, _: Message<'_>, _: i64) -> Result<(), BenchError> {
        Ok(())
    }

    fn on_close(&mut self, _: &mut Io, _: u64, _: CloseReason) -> Result<(), BenchError> {
        Ok(())
    }

    fn on_pipe(&mut self, _io: &mut Io, key: usize) -> Result<(), BenchError> {
        let now = Instant::now();
        let mut events: Vec<PoolEvent> = Vec::new();
        let worker = self
            .workers
            .get_mut(key)
            .ok_or(BenchError::Internal("event from an unknown worker"))?;
        let closed = worker.read_lines(&mut events)?;
        for ev in events {
            self.driver.on_event(ev, now);
        }
        if closed && self.error.is_none() {
            self.error = Some(BenchError::Worker(format!(
                "worker {key} exited unexpectedly (see its messages above)"
            )));
        }
        Ok(())
    }

    fn on_tick(&mut self, _io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if !self.started {
            self.started = true;
            self.driver.start(now);
        }
        let next = self.driver.tick(now)?;
        self.forward()?;
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

/// Runs the driver here and the clients in `--workers` processes.
pub(crate) fn run_coordinator(
    args: &ShootoutArgs,
    params: ShootoutParams,
) -> Result<ShootoutOutcome, BenchError> {
    let n = params.workers;
    let start = Instant::now();
    let started_at = crate::clock::now_secs_f64();
    let mut engine = Engine::new(MAX_MESSAGE)?;
    let mut monitor = Monitor::new(args.common.server_pid, &args.common.net_iface, start);
    let mut workers = Vec::new();
    for w in 0..n {
        let mut proc = WorkerProc::spawn(engine.io(), w as usize)?;
        proc.send(&args.pool_config(&params, w, n))?;
        monitor.add_bench_pid(proc.pid());
        workers.push(proc);
    }
    let mut coord = Coordinator {
        driver: Driver::new(params.clone(), n as usize, start),
        workers,
        monitor,
        progress: Progress::new(args.common.quiet, start),
        quiet: args.common.quiet,
        started: false,
        error: None,
    };
    let result = engine.run(&mut coord);
    coord.progress.clear();
    let end = Instant::now();
    coord.monitor.sample(end);
    for w in coord.workers.drain(..) {
        w.finish();
    }
    finish(
        args,
        params,
        coord.driver,
        coord.monitor.samples,
        started_at,
        (end - start).as_secs_f64(),
        result,
    )
}

/// A worker: reads its configuration and commands on stdin, runs a pool,
/// writes events on stdout, and exits when stdin closes.
pub fn run_worker() -> Result<(), BenchError> {
    // Stdin is read through its raw descriptor only (std's buffered stdin
    // could swallow commands queued behind the configuration line).
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| BenchError::Worker(format!("stdin: {e}")))?;
    let mut input = Receiver::from(fd);
    input
        .set_nonblocking(true)
        .map_err(|e| BenchError::Worker(format!("stdin: {e}")))?;
    let mut engine = Engine::new(MAX_MESSAGE)?;
    engine
        .io()
        .registry()
        .register(&mut input, Token(PIPE_TOKEN_BASE), Interest::READABLE)
        .map_err(BenchError::Poll)?;
    let mut worker = Worker {
        pool: None,
        input,
        buf: Vec::new(),
        closed: false,
        out: std::io::stdout(),
        line: Vec::new(),
    };
    engine.run(&mut worker)
}

/// The worker side.
struct Worker {
    /// Created from the first line read.
    pool: Option<Pool>,
    input: Receiver,
    buf: Vec<u8>,
    closed: bool,
    out: std::io::Stdout,
    line: Vec<u8>,
}

impl Worker {
    fn flush_events(&mut self) -> Result<(), BenchError> {
        let Some(pool) = self.pool.as_mut() else {
            return Ok(());
        };
        if pool.events.is_empty() {
            return Ok(());
        }
        self.line.clear();
        for ev in pool.events.drain(..) {
            serde_json::to_writer(&mut self.line, &ev).map_err(BenchError::Json)?;
            self.line.push(b'\n');
        }
        let mut out = self.out.lock();
        out.write_all(&self.line)
            .and_then(|()| out.flush())
            .map_err(|e| BenchError::Worker(format!("coordinator went away: {e}")))
    }
}

impl Handler for Worker {
    fn on_open(
        &mut self,
        io: &mut Io,
        _: ConnId,
        _: u64,
        _: Option<&str>,
    ) -> Result<(), BenchError> {
        if let Some(pool) = self.pool.as_mut() {
            pool.on_open(io);
        }
        Ok(())
    }

    fn on_message(
        &mut self,
        _: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        if let Some(pool) = self.pool.as_mut() {
            pool.on_message(tag, msg, now_ns);
        }
        Ok(())
    }

    fn on_close(&mut self, _: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        if let Some(pool) = self.pool.as_mut().filter(|_| !self.closed) {
            pool.on_close(tag, why);
        }
        Ok(())
    }

    fn on_pipe(&mut self, io: &mut Io, _key: usize) -> Result<(), BenchError> {
        let mut tmp = [0u8; 65536];
        loop {
            match self.input.read(&mut tmp) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BenchError::Worker(format!("stdin: {e}"))),
            }
        }
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            match self.pool.as_mut() {
                Some(pool) => {
                    let cmd: PoolCmd = serde_json::from_slice(&line).map_err(BenchError::Json)?;
                    pool.command(io, cmd);
                }
                None => {
                    let cfg: PoolConfig =
                        serde_json::from_slice(&line).map_err(BenchError::Json)?;
                    self.pool = Some(Pool::new(cfg)?);
                }
            }
        }
        Ok(())
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        if self.closed {
            return Ok(Tick::Done);
        }
        if let Some(pool) = self.pool.as_mut() {
            pool.tick(io, now);
        }
        self.flush_events()?;
        Ok(Tick::Continue(Some(
            now + std::time::Duration::from_millis(100),
        )))
    }
}
