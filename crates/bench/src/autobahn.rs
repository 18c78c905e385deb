//! `herald bench __autobahn-client` (hidden): the bench's WebSocket client as
//! the testee of Autobahn|Testsuite's `fuzzingserver`.
//!
//! Why it exists: the bench opens tens of thousands of WebSocket connections
//! with its own client framing (`herald-ws` in the client role, driven by
//! [`engine`](crate::engine)). A load generator that misreads a fragmented,
//! pinged-into or oddly closed stream would report the server's faults as its
//! own or hide them, so that client is checked against the field's
//! conformance suite too (`tests/outside/autobahn.test.sh`).
//!
//! Nothing here frames or decodes: connections are opened, read and written
//! by the same [`Engine`] and [`Io`] every scenario uses, which answer pings
//! and close handshakes themselves. This module only follows Autobahn's
//! client protocol: `GET /getCaseCount` (one text message: the count), then
//! for each case `/runCase?case=N&agent=A`, echoing every message back (text
//! as text, binary as binary) until the connection ends, then
//! `/updateReports?agent=A` so the suite writes its reports. The verdicts
//! are in those reports; the test script reads them.

use std::time::{Duration, Instant};

use herald_ws::{Message, OpCode};

use crate::engine::{CloseReason, ConnId, Engine, Handler, Io, Tick};
use crate::target::Target;
use crate::BenchError;

/// Arguments of `__autobahn-client`.
#[derive(Debug, Clone, clap::Args)]
pub struct AutobahnArgs {
    /// The fuzzing server's base URL, e.g. ws://127.0.0.1:9001.
    #[arg(long)]
    pub url: String,
    /// The agent name the reports file the results under.
    #[arg(long, default_value = "herald-bench")]
    pub agent: String,
    /// Largest message accepted, in bytes (Autobahn's 9.x cases send 16 MiB).
    #[arg(long, default_value_t = 64 << 20)]
    pub max_message: usize,
    /// Longest one case (one connection) may take before the run fails.
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse_duration)]
    pub case_timeout: Duration,
}

/// One connection to the fuzzing server, from open to end.
struct OneConnection {
    /// The connection, once open.
    id: Option<ConnId>,
    /// Text messages received (for `/getCaseCount`).
    texts: Vec<String>,
    /// Why the connection ended, once it has.
    ended: Option<CloseReason>,
    /// Echo what arrives (a case) or only collect it.
    echo: bool,
    deadline: Instant,
}

impl Handler for OneConnection {
    fn on_open(
        &mut self,
        _: &mut Io,
        id: ConnId,
        _: u64,
        _: Option<&str>,
    ) -> Result<(), BenchError> {
        self.id = Some(id);
        Ok(())
    }

    fn on_message(
        &mut self,
        io: &mut Io,
        _: u64,
        msg: Message<'_>,
        _: i64,
    ) -> Result<(), BenchError> {
        let Some(id) = self.id else {
            return Err(BenchError::Internal("message before open"));
        };
        let (opcode, payload) = match msg {
            Message::Text(p) => (OpCode::Text, p),
            Message::Binary(p) => (OpCode::Binary, p),
            // The engine answers pings and closes; nothing else reaches here.
            _ => return Ok(()),
        };
        if self.echo {
            io.send(id, opcode, payload);
        } else if opcode == OpCode::Text {
            self.texts
                .push(String::from_utf8_lossy(payload).into_owned());
        }
        Ok(())
    }

    fn on_close(&mut self, _: &mut Io, _: u64, why: CloseReason) -> Result<(), BenchError> {
        self.ended = Some(why);
        Ok(())
    }

    fn on_tick(&mut self, _: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        if self.ended.is_some() {
            return Ok(Tick::Done);
        }
        if now >= self.deadline {
            return Err(BenchError::Stalled(
                "an Autobahn case did not end in time".into(),
            ));
        }
        Ok(Tick::Continue(Some(self.deadline)))
    }
}

/// Opens `path` on the fuzzing server and runs it to its end; returns the
/// text messages received (when not echoing) and why the connection ended.
fn run_one(
    engine: &mut Engine,
    args: &AutobahnArgs,
    path: &str,
    echo: bool,
) -> Result<(Vec<String>, CloseReason), BenchError> {
    let base = args.url.trim_end_matches('/');
    let target = Target::parse(&format!("{base}{path}"))?;
    let mut conn = OneConnection {
        id: None,
        texts: Vec::new(),
        ended: None,
        echo,
        deadline: Instant::now() + args.case_timeout,
    };
    engine.io().connect(&target, None, 0)?;
    engine.run(&mut conn)?;
    let why = conn
        .ended
        .ok_or(BenchError::Internal("connection ended without a reason"))?;
    Ok((conn.texts, why))
}

/// Runs every case the fuzzing server offers, then asks it for its reports.
/// A case's own verdict is not known here (the reports have it); this fails
/// only when the server cannot be reached or a case never ends.
pub fn run(args: &AutobahnArgs) -> Result<(), BenchError> {
    let mut engine = Engine::new(args.max_message)?;
    let (texts, _) = run_one(&mut engine, args, "/getCaseCount", false)?;
    let count: u32 = texts
        .first()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| BenchError::Client(format!("getCaseCount answered {texts:?}")))?;
    eprintln!("autobahn client: {count} cases, agent {}", args.agent);
    for case in 1..=count {
        let path = format!("/runCase?case={case}&agent={}", args.agent);
        let (_, why) = run_one(&mut engine, args, &path, true)?;
        if let CloseReason::Connect(e) = why {
            return Err(BenchError::Client(format!("case {case}: connect: {e}")));
        }
    }
    run_one(
        &mut engine,
        args,
        &format!("/updateReports?agent={}", args.agent),
        false,
    )?;
    eprintln!("autobahn client: {count} cases run, reports updated");
    Ok(())
}
