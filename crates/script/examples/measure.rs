//! Measures game modules for decision 0014 and bench/RESULTS.md. Run in
//! release, nothing else running:
//!
//! ```text
//! cargo run --release -p herald-script --example measure -- tables games/dist/liars-dice.js 10000
//! cargo run --release -p herald-script --example measure -- actions games/dist/rps.js 200000
//! cargo run --release -p herald-script --example measure -- ticks games/dist/snake.js 50,100,200,400 10
//! ```
//!
//! - `tables MODULE N`: creates N tables (4 seats, nobody seated) in one
//!   shard: microseconds per table and the shard's heap per idle table (as
//!   the counting allocator sees it) and the process's RSS per table.
//! - `actions MODULE N`: rock-paper-scissors, the module's port against the
//!   Rust example's rules (the same game, in `rps_rust` below), both on the
//!   fake-clock harness: nanoseconds per action, alternating rounds.
//! - `ticks MODULE N,N,... SECS`: N tables of a real-time module on the
//!   real engine, on a single-threaded runtime (one core), each with one
//!   player seated (a socket-less client whose queue is emptied, not read):
//!   ticks per second achieved against the ticks asked (N × 20 at 20 Hz:
//!   fewer when the module pauses its loop), the process's CPU and CPU
//!   per tick, and each tick's lateness against the deadline the engine
//!   was given (p50/p99/max).

use bytes::Bytes;
use herald_game::testing::Harness;
use herald_game::{Ctx, Game, GameFactory, Seat, TableParams};
use herald_script::{load_source, Limits, ScriptFactory, ScriptTable};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn cpu_secs() -> f64 {
    // utime + stime of this process, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn params(id: u64, seats: u32) -> TableParams {
    TableParams {
        id,
        seats,
        timing: "normal".into(),
        params: Default::default(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match arg(1).as_str() {
        "tables" => tables(&arg(2), arg(3).parse().unwrap_or(10_000)),
        "actions" => actions(&arg(2), arg(3).parse().unwrap_or(200_000)),
        "ticks" => ticks(&arg(2), &arg(3), arg(4).parse().unwrap_or(10)),
        _ => eprintln!("usage: measure tables|actions|ticks MODULE ..."),
    }
}

fn tables(module: &str, n: u64) {
    let source = std::fs::read_to_string(module).expect("module");
    let script = load_source("m", module, &source, Limits::default(), 1).expect("loads");
    let rss0 = rss_kib();
    let t = Instant::now();
    let mut kept = Vec::with_capacity(n as usize);
    let mut charged = 0;
    for id in 1..=n {
        let mut table = ScriptTable::create(script.clone(), &params(id, 4), id).expect("table");
        table.created(&mut Ctx::new());
        charged += table.charge();
        kept.push(table);
    }
    let el = t.elapsed();
    let rss = rss_kib().saturating_sub(rss0);
    println!(
        "{n} tables of {module}: {:.1} us each; heap charged {:.2} KiB each; RSS {:.2} KiB each",
        el.as_secs_f64() * 1e6 / n as f64,
        charged as f64 / 1024.0 / n as f64,
        rss as f64 / n as f64,
    );
}

/// Rock-paper-scissors as crates/game/examples/rps.rs plays it, with the
/// module's wire format (JSON strings in, JSON objects out), so both sides
/// do the same work per action.
mod rps_rust {
    use super::*;
    const PICKS: [&str; 3] = ["\"rock\"", "\"paper\"", "\"scissors\""];

    #[derive(Default)]
    pub struct Rps {
        picks: [Option<usize>; 2],
        wins: [u32; 2],
        seated: [bool; 2],
    }

    impl Rps {
        fn start_round(&mut self, ctx: &mut Ctx) {
            self.picks = [None, None];
            ctx.send_table(format!(r#"{{"t":"round","score":{:?}}}"#, self.wins));
            ctx.set_timer(0, Duration::from_secs(5));
        }

        fn decide(&mut self, ctx: &mut Ctx) {
            ctx.cancel_timer(0);
            let winner = match self.picks {
                [Some(a), Some(b)] if a == b => None,
                [Some(a), Some(b)] => Some(if (a + 3 - b) % 3 == 1 { 0 } else { 1 }),
                [None, None] => None,
                [a, _] => Some(if a.is_some() { 0 } else { 1 }),
            };
            if let Some(w) = winner {
                self.wins[w] += 1;
            }
            let shown = self
                .picks
                .map(|p| p.map_or("none", |p| PICKS[p].trim_matches('"')));
            let w = winner.map_or("null".into(), |w| w.to_string());
            ctx.send_table(format!(r#"{{"t":"reveal","picks":{shown:?},"w":{w}}}"#));
            if let Some(w) = self.wins.iter().position(|&n| n == 2) {
                ctx.send_table(format!(r#"{{"t":"match","winner":{w}}}"#));
                ctx.hand_finished();
                self.wins = [0, 0];
            }
            if self.seated == [true, true] {
                self.start_round(ctx);
            }
        }
    }

    impl Game for Rps {
        fn can_sit(&self, seat: Seat, _: &str, _: &[u8]) -> Result<(), String> {
            (seat < 2).then_some(()).ok_or("two seats".into())
        }
        fn sat(&mut self, ctx: &mut Ctx, seat: Seat, _: &str, _: &[u8]) {
            self.seated[seat as usize] = true;
            ctx.set_attr("waiting", self.seated != [true, true]);
            if self.seated == [true, true] {
                self.start_round(ctx);
            }
        }
        fn left(&mut self, ctx: &mut Ctx, seat: Seat) {
            (self.seated[seat as usize], self.wins) = (false, [0, 0]);
            ctx.cancel_timer(0);
        }
        fn act(
            &mut self,
            ctx: &mut Ctx,
            seat: Seat,
            data: &[u8],
        ) -> Result<(), herald_game::ActionError> {
            let pick = PICKS
                .iter()
                .position(|p| p.as_bytes() == data)
                .ok_or_else(|| {
                    herald_game::ActionError::Malformed("rock, paper or scissors".into())
                })?;
            let mine = &mut self.picks[seat as usize];
            if mine.is_some() {
                return Err(herald_game::ActionError::OutOfTurn("wait".into()));
            }
            *mine = Some(pick);
            ctx.send_table(format!(r#"{{"t":"picked","seat":{seat}}}"#));
            if self.picks.iter().all(Option::is_some) {
                self.decide(ctx);
            }
            Ok(())
        }
        fn timer(&mut self, ctx: &mut Ctx, _: u64) {
            self.decide(ctx);
        }
        fn snapshot(&self, _: Option<Seat>) -> Bytes {
            Bytes::from(format!(r#"{{"score":{:?}}}"#, self.wins))
        }
    }
}

/// Plays `n` actions (alternating seats, picks cycling) on `h`: ns each.
fn play(h: &mut Harness, n: u64) -> f64 {
    let picks: [&[u8]; 3] = [b"\"rock\"", b"\"paper\"", b"\"scissors\""];
    let t = Instant::now();
    for i in 0..n {
        let seat = (i % 2) as u32;
        let pick = picks[((i / 2 + i / 7) % 3) as usize];
        h.act(seat, pick).expect("accepted");
        if i % 64 == 0 {
            h.clear_sent();
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn actions(module: &str, n: u64) {
    let source = std::fs::read_to_string(module).expect("module");
    let script = load_source("rps", module, &source, Limits::default(), 1).expect("loads");
    let mut js = Harness::new(Box::new(
        ScriptTable::create(script, &params(1, 2), 1).expect("table"),
    ));
    let mut rust = Harness::new(Box::new(rps_rust::Rps::default()));
    for h in [&mut js, &mut rust] {
        h.sit(0, "a", b"").expect("sit");
        h.sit(1, "b", b"").expect("sit");
    }
    play(&mut js, 10_000);
    play(&mut rust, 10_000);
    let (mut tj, mut tr) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        tj.push(play(&mut js, n / 5));
        tr.push(play(&mut rust, n / 5));
    }
    tj.sort_by(f64::total_cmp);
    tr.sort_by(f64::total_cmp);
    let (j, r) = (tj[2], tr[2]);
    println!(
        "rps per action (median of 5 alternated rounds of {}): module {j:.0} ns, Rust {r:.0} ns, ratio {:.1}",
        n / 5,
        j / r
    );
    assert_eq!(js.fault, None);
}

/// A game that records how late each tick (engine timer key 0) fires
/// against the deadline its module set (seen in the effects of the call
/// that set it): the engine's lateness, not the module's pauses.
struct Timed {
    inner: Box<dyn Game>,
    due: Option<Instant>,
    /// The deadline of the tick being fired: the engine counts the next
    /// one from it (table.rs, `firing`), and so does this.
    firing: Option<Instant>,
    late: Arc<Mutex<hdrhistogram::Histogram<u64>>>,
}

impl Timed {
    fn saw(&mut self, ctx: &Ctx) {
        for e in ctx.effects() {
            match e {
                herald_game::Effect::SetTimer(0, d) => {
                    let now = Instant::now();
                    self.due = Some(match self.firing {
                        Some(at) if at + *d > now => at + *d,
                        _ => now + *d,
                    });
                }
                herald_game::Effect::CancelTimer(0) => self.due = None,
                _ => {}
            }
        }
    }
}

impl Game for Timed {
    fn created(&mut self, ctx: &mut Ctx) {
        self.inner.created(ctx);
        self.saw(ctx);
    }
    fn can_sit(&self, s: Seat, u: &str, d: &[u8]) -> Result<(), String> {
        self.inner.can_sit(s, u, d)
    }
    fn sat(&mut self, ctx: &mut Ctx, s: Seat, u: &str, d: &[u8]) {
        self.inner.sat(ctx, s, u, d);
        self.saw(ctx);
    }
    fn left(&mut self, ctx: &mut Ctx, s: Seat) {
        self.inner.left(ctx, s);
        self.saw(ctx);
    }
    fn act(&mut self, ctx: &mut Ctx, s: Seat, d: &[u8]) -> Result<(), herald_game::ActionError> {
        let r = self.inner.act(ctx, s, d);
        self.saw(ctx);
        r
    }
    fn timer(&mut self, ctx: &mut Ctx, key: u64) {
        if key == 0 {
            if let Some(due) = self.due.take() {
                let late = Instant::now().saturating_duration_since(due);
                if let Ok(mut h) = self.late.lock() {
                    let _ = h.record(late.as_micros() as u64);
                }
                self.firing = Some(due);
            }
        }
        self.inner.timer(ctx, key);
        self.saw(ctx);
        self.firing = None;
    }
    fn snapshot(&self, s: Option<Seat>) -> Bytes {
        self.inner.snapshot(s)
    }
    fn fault(&self) -> Option<String> {
        self.inner.fault()
    }
}

struct TimedFactory {
    inner: ScriptFactory,
    late: Arc<Mutex<hdrhistogram::Histogram<u64>>>,
}

impl GameFactory for TimedFactory {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn create(&self, p: &TableParams) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(Timed {
            inner: self.inner.create(p)?,
            due: None,
            firing: None,
            late: self.late.clone(),
        }))
    }
}

fn ticks(module: &str, counts: &str, secs: u64) {
    for n in counts.split(',').filter_map(|c| c.parse::<u64>().ok()) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let late = Arc::new(Mutex::new(hdrhistogram::Histogram::new(3).expect("histogram")));
            let factory = TimedFactory {
                inner: ScriptFactory::load("rt", module.as_ref(), Limits::default(), 1).expect("loads"),
                late: late.clone(),
            };
            let engine = herald_game::Engine::new(Default::default(), vec![Arc::new(factory)]);
            let mut clients = Vec::new();
            for _ in 0..n {
                let spec = herald_game::TableSpec {
                    game: "rt".into(),
                    seats: 4,
                    timing: "normal".into(),
                    path: None,
                    params: Default::default(),
                };
                let id = engine.create_table(&spec).expect("table");
                let c = herald_game::testing::client(&format!("p{id}"), herald_proto::Encoding::Json);
                herald_core::games::Games::command(
                    &*engine,
                    &c,
                    1,
                    herald_proto::Command::Sit { table: id, seat: None, data: Bytes::new() },
                );
                clients.push(c);
            }
            // Let every table start ticking, then count.
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Ok(mut h) = late.lock() {
                h.reset();
            }
            let (cpu0, t0) = (cpu_secs(), Instant::now());
            let end = t0 + Duration::from_secs(secs);
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(100)).await;
                for c in &clients {
                    c.outbox.with_queue(|q| {
                        let k = q.frames.len();
                        q.advance(k, 0);
                    });
                }
            }
            let (cpu, el) = (cpu_secs() - cpu0, t0.elapsed().as_secs_f64());
            let h = late.lock().map(|h| h.clone()).expect("histogram");
            println!(
                "{n} tables at 20 Hz: {:.0} ticks/s of {} asked, CPU {:.0}% ({:.1} us per tick), lateness p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
                h.len() as f64 / el,
                n * 20,
                100.0 * cpu / el,
                1e6 * cpu / h.len().max(1) as f64,
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                h.max() as f64 / 1000.0,
            );
        });
    }
}
