//! Game modules on the engine's fake-clock harness: the module API
//! (docs/games.md), saves that round-trip, and every fault closing its own
//! table only.

use herald_game::testing::{Harness, To};
use herald_game::{ActionError, Game, TableParams};
use herald_script::{load_source, Fault, Limits, Script, ScriptTable};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// A small turn game: each act adds `n` to a counter; "turn" timer of 1 s
/// skips the turn; private messages; lobby attributes; random draws.
const COUNTER: &str = r#"
export const game = {
  created(ctx, table) {
    ctx.lobby({ waiting: true, seats: table.seats });
    return { total: 0, turn: 0, seated: [], log: [], draws: [] };
  },
  canSit(state, seat, user, data) {
    if (user === "banned") return "banned here";
  },
  sat(state, ctx, seat, user, data) {
    state.seated.push(seat);
    ctx.send(seat, { t: "hello", user, data });
    ctx.lobby({ waiting: state.seated.length < 2 });
    if (state.seated.length === 2) ctx.setTimer("turn", 1000);
  },
  left(state, ctx, seat) {
    state.seated = state.seated.filter((s) => s !== seat);
    ctx.cancelTimer("turn");
  },
  act(state, ctx, seat, data) {
    if (data === null || typeof data.n !== "number") return ctx.malformed("send {n}");
    if (seat !== state.seated[state.turn % state.seated.length]) throw ctx.outOfTurn("not your turn");
    if (data.n > 10) { ctx.broadcast({ t: "never sent" }); return ctx.illegal("at most 10"); }
    state.total += data.n;
    state.turn += 1;
    state.draws.push(ctx.randomInt(1000));
    ctx.broadcast({ t: "total", total: state.total });
    ctx.setTimer("turn", 1000);
    if (state.total >= 20) ctx.handEnded();
  },
  timer(state, ctx, key) {
    state.turn += 1;
    state.log.push(key);
    ctx.players({ t: "skipped" });
    ctx.setTimer("turn", 1000);
  },
  snapshot(state, seat) {
    return { total: state.total, you: seat };
  },
};
"#;

fn limits() -> Limits {
    Limits {
        cpu: Duration::from_millis(200),
        memory: 4 << 20,
        ..Limits::default()
    }
}

fn script(source: &str) -> Arc<Script> {
    load_source("t", "t.js", source, limits(), 1).expect("module loads")
}

fn params(id: u64) -> TableParams {
    TableParams {
        id,
        seats: 4,
        timing: "normal".into(),
        params: Default::default(),
    }
}

fn table(s: &Arc<Script>, id: u64, seed: u64) -> Box<dyn Game> {
    Box::new(ScriptTable::create(s.clone(), &params(id), seed).expect("table"))
}

fn texts(v: Vec<&bytes::Bytes>) -> Vec<Value> {
    v.into_iter()
        .map(|b| serde_json::from_slice(b).expect("JSON"))
        .collect()
}

#[test]
fn the_module_api_drives_a_table_on_the_harness() {
    let s = script(COUNTER);
    let mut h = Harness::new(table(&s, 1, 7));
    assert_eq!(h.attrs.get("waiting"), Some(&json!(true)));
    assert_eq!(h.sit(0, "banned", b""), Err("banned here".into()));
    h.sit(0, "ann", br#"{"chips":5}"#).expect("sits");
    h.sit(1, "bob", b"").expect("sits");
    assert_eq!(h.attrs.get("waiting"), Some(&json!(false)));
    assert_eq!(
        texts(h.sent_to(To::Seat(0))),
        vec![json!({"t":"hello","user":"ann","data":{"chips":5}})]
    );
    h.clear_sent();
    // Refusals: each kind, and nothing the refused call recorded is sent.
    assert!(
        matches!(h.act(1, br#"{"n":1}"#), Err(ActionError::OutOfTurn(m)) if m == "not your turn")
    );
    assert!(matches!(h.act(0, br#"{"n":11}"#), Err(ActionError::Illegal(m)) if m == "at most 10"));
    assert!(matches!(h.act(0, b"{}"), Err(ActionError::Malformed(_))));
    assert!(
        matches!(h.act(0, b"not json"), Err(ActionError::Malformed(m)) if m.contains("not JSON"))
    );
    assert!(h.sent.is_empty());
    h.act(0, br#"{"n":4}"#).expect("accepted");
    assert_eq!(
        texts(h.sent_to(To::Table)),
        vec![json!({"t":"total","total":4})]
    );
    // The turn timer, by name, through the engine's numbered timers.
    h.advance(Duration::from_millis(1000));
    assert_eq!(texts(h.sent_to(To::Players)), vec![json!({"t":"skipped"})]);
    assert_eq!(h.pending_timers().len(), 1);
    let view: Value = serde_json::from_slice(&h.snapshot(Some(1))).expect("json");
    assert_eq!(view, json!({"total":4,"you":1}));
    let watcher: Value = serde_json::from_slice(&h.snapshot(None)).expect("json");
    assert_eq!(watcher, json!({"total":4,"you":null}));
    h.leave(1);
    assert!(h.pending_timers().is_empty());
    assert_eq!(h.fault, None);
}

/// Plays the same scripted moves on two harnesses, one of which swaps its
/// game for one restored from a save halfway: everything sent afterwards,
/// random draws included, must be identical.
#[test]
fn a_saved_table_restored_goes_on_exactly() {
    let s = script(COUNTER);
    // Seat 0, seat 1, then the turn timer skips seat 0: seat 1 again, seat 0.
    let moves: Vec<(u32, &[u8])> = vec![
        (0, br#"{"n":3}"#),
        (1, br#"{"n":2}"#),
        (1, br#"{"n":5}"#),
        (0, br#"{"n":1}"#),
    ];
    let run = |restore_at: Option<usize>| {
        let mut h = Harness::new(table(&s, 2, 99));
        h.sit(0, "ann", b"").expect("sit");
        h.sit(1, "bob", b"").expect("sit");
        for (i, (seat, m)) in moves.iter().enumerate() {
            if Some(i) == restore_at {
                let saved = h.save().expect("saves");
                let back = ScriptTable::restore(s.clone(), &params(2), &saved).expect("restores");
                h.replace_game(Box::new(back));
                h.clear_sent();
            }
            if i == 2 {
                h.advance(Duration::from_millis(1000));
            }
            h.act(*seat, m).expect("act");
        }
        let saved: Value = serde_json::from_slice(&h.save().expect("save")).expect("json");
        (saved["state"].clone(), h.sent.clone(), h.fault.clone())
    };
    let (plain, sent_plain, f1) = run(None);
    let (restored, sent_restored, f2) = run(Some(1));
    assert_eq!((f1, f2), (None, None));
    assert_eq!(plain, restored, "same state, same random draws");
    assert!(plain["draws"].as_array().is_some_and(|d| d.len() == 4));
    // What the restored run sent is the tail of what the plain run sent.
    assert!(sent_plain.ends_with(&sent_restored) && !sent_restored.is_empty());
}

#[test]
fn the_generator_is_per_table_and_seeded() {
    let s = script(COUNTER);
    let draws = |seed| {
        let mut h = Harness::new(table(&s, 3, seed));
        h.sit(0, "a", b"").expect("sit");
        h.sit(1, "b", b"").expect("sit");
        h.act(0, br#"{"n":1}"#).expect("act");
        h.act(1, br#"{"n":1}"#).expect("act");
        let v: Value = serde_json::from_slice(&h.save().expect("save")).expect("json");
        v["state"]["draws"].clone()
    };
    assert_eq!(draws(5), draws(5));
    assert_ne!(draws(5), draws(6));
    // SplitMix64 seeded 5, drawn as the SDK's harness draws: floor(x * 1000).
    let mut g = herald_script::rng::SplitMix(5);
    let first = (g.next_f64() * 1000.0).floor() as u64;
    assert_eq!(draws(5)[0], json!(first));
}

const TICKER: &str = r#"
export const game = {
  created(ctx) { return { ticks: 0 }; },
  sat(state, ctx) { ctx.every(50); },
  left(state, ctx) { ctx.every(0); },
  act(state, ctx, seat, data) { if (data === "stop") ctx.every(0); },
  tick(state, ctx) { state.ticks += 1; ctx.broadcast(state.ticks); },
  snapshot(state) { return state; },
};
"#;

#[test]
fn every_ticks_until_stopped_and_survives_a_save() {
    let s = script(TICKER);
    let mut h = Harness::new(table(&s, 4, 1));
    h.sit(0, "a", b"").expect("sit");
    h.advance(Duration::from_millis(500));
    assert_eq!(h.sent_to(To::Table).len(), 10);
    let saved = h.save().expect("save");
    h.replace_game(Box::new(
        ScriptTable::restore(s.clone(), &params(4), &saved).expect("restore"),
    ));
    h.advance(Duration::from_millis(100));
    assert_eq!(texts(h.sent_to(To::Table)).last(), Some(&json!(12)));
    h.act(0, br#""stop""#).expect("act");
    h.advance(Duration::from_millis(500));
    assert_eq!(h.sent_to(To::Table).len(), 12);
    assert!(h.pending_timers().is_empty());
}

/// A module whose `act` misbehaves in the way `data.do` names.
const FAULTY: &str = r#"
export const game = {
  created() { return { n: 0 }; },
  sat() {},
  left() {},
  act(state, ctx, seat, data) {
    switch (data.do) {
      case "ok": state.n += 1; ctx.broadcast(state.n); return;
      case "throw": throw new Error("boom");
      case "loop": for (;;) {}
      case "recurse": { const f = (n) => f(n + 1) + 1; return f(0); }
      case "memory": { const a = []; for (;;) a.push(new Array(1000).fill(state)); }
      case "hoard": { state.big = "x".repeat(3 << 20); return; }
      case "huge": ctx.broadcast("x".repeat(70000)); return;
      case "function": ctx.broadcast(() => 1); return;
      case "garbage": return 42;
      case "random": return Math.random();
      case "date": return new Date();
      case "later": Promise.resolve().then(() => ctx.broadcast("later")); return;
      case "state": state.bad = 10n; return;
    }
  },
  snapshot(state) { return state; },
};
"#;

/// Every kind of fault fails its own table and no other: a second table
/// in the same shard plays on.
#[test]
fn every_fault_fails_its_own_table_only() {
    let s = script(FAULTY);
    let cases: &[(&str, &str)] = &[
        ("throw", "exception"),
        ("loop", "timeout"),
        ("recurse", "exception"),
        ("memory", "memory"),
        ("huge", "output"),
        ("function", "exception"),
        ("garbage", "exception"),
        ("random", "exception"),
        ("date", "exception"),
    ];
    let mut bystander = Harness::new(table(&s, 100, 1));
    bystander.sit(0, "b", b"").expect("sit");
    for (i, (what, kind)) in cases.iter().enumerate() {
        let mut h = Harness::new(table(&s, i as u64 + 1, 1));
        h.sit(0, "a", b"").expect("sit");
        h.act(0, br#"{"do":"ok"}"#).expect("ok");
        let _ = h.act(0, format!(r#"{{"do":"{what}"}}"#).as_bytes());
        let fault = h.fault.clone().unwrap_or_default();
        assert!(fault.contains(&format!("({kind})")), "{what}: {fault:?}");
        // Nothing more reaches or leaves the failed table.
        assert!(h.act(0, br#"{"do":"ok"}"#).is_err(), "{what}");
        bystander
            .act(0, br#"{"do":"ok"}"#)
            .expect("the other table goes on");
        assert_eq!(bystander.fault, None, "after {what}");
    }
    assert_eq!(
        texts(bystander.sent_to(To::Table)).last(),
        Some(&json!(cases.len()))
    );
}

#[test]
fn a_table_holding_more_than_its_cap_fails_on_the_call_that_passes_it() {
    let s = script(FAULTY);
    let mut h = Harness::new(table(&s, 1, 1));
    h.sit(0, "a", b"").expect("sit");
    // 3 MiB of string (6 MiB in QuickJS's UTF-16-free latin1: 3 MiB) stays
    // under the 4 MiB cap once; a second table doing the same is charged
    // separately, not with the first's.
    let _ = h.act(0, br#"{"do":"hoard"}"#);
    assert_eq!(h.fault, None);
    let mut g = Harness::new(table(&s, 2, 1));
    g.sit(0, "a", b"").expect("sit");
    let _ = g.act(0, br#"{"do":"hoard"}"#);
    assert_eq!(g.fault, None, "charged for its own state only");
}

#[test]
fn a_state_that_is_not_json_fails_at_save() {
    let s = script(FAULTY);
    let mut h = Harness::new(table(&s, 1, 1));
    h.sit(0, "a", b"").expect("sit");
    h.act(0, br#"{"do":"state"}"#).expect("accepted in memory");
    assert_eq!(h.save(), None);
    assert!(
        h.fault.clone().unwrap_or_default().contains("(exception)"),
        "{:?}",
        h.fault
    );
}

/// Promise jobs run when the call returns, under its budget; by then its
/// `ctx` records nothing, so using it there is a fault, not a message
/// slipped in after the engine applied the call's effects.
#[test]
fn a_ctx_used_after_its_call_is_a_fault() {
    let s = script(FAULTY);
    let mut h = Harness::new(table(&s, 1, 1));
    h.sit(0, "a", b"").expect("sit");
    let _ = h.act(0, br#"{"do":"later"}"#);
    assert!(
        h.fault
            .clone()
            .unwrap_or_default()
            .contains("outside the call"),
        "{:?}",
        h.fault
    );
    assert!(h.sent.is_empty());
}

#[test]
fn faults_are_counted_by_kind() {
    let dir = std::env::temp_dir().join(format!("herald-script-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("faulty.js");
    std::fs::write(&path, FAULTY).expect("write");
    let f = herald_script::ScriptFactory::load("faulty", &path, limits(), 1).expect("loads");
    let mut h = Harness::new(Box::new(f.table(&params(1)).expect("table")));
    h.sit(0, "a", b"").expect("sit");
    let _ = h.act(0, br#"{"do":"loop"}"#);
    assert_eq!(f.faults().get(), [0, 1, 0, 0]);
    let _ = std::fs::remove_dir_all(dir);
}

fn load_error(source: &str) -> String {
    match load_source("t", "games/t.js", source, limits(), 1) {
        Ok(_) => panic!("loaded: {source}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_bad_module_is_refused_with_a_clear_error() {
    let e = load_error("export const game = {\n  created() { return 1 }\n  sat() {}\n};");
    assert!(e.starts_with("game module games/t.js: SyntaxError"), "{e}");
    assert!(e.contains("games/t.js:3"), "names the line: {e}");
    let e = load_error("export const nothing = 1;");
    assert!(e.contains("exports no `game`"), "{e}");
    let e = load_error(
        "export const game = { created() {}, sat() {}, left() {}, act: 5, snapshot() {} };",
    );
    assert!(e.contains("game.act is number"), "{e}");
    let e = load_error("export const game = { created() {}, sat() {}, left() {}, act() {}, snapshot() {}, timer: {} };");
    assert!(e.contains("game.timer is object"), "{e}");
    let e = load_error("import x from './other.js'; export const game = x;");
    assert!(e.contains("other.js"), "{e}");
    let e = load_error("throw new Error('at load');");
    assert!(e.contains("at load"), "{e}");
    let e = load_error(&format!("{COUNTER}\nexport const bot = 3;"));
    assert!(e.contains("`bot`"), "{e}");
    let missing = herald_script::ScriptFactory::load(
        "x",
        std::path::Path::new("/nonexistent/game.js"),
        limits(),
        1,
    );
    let e = missing.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("/nonexistent/game.js") && e.contains("cannot read"),
        "{e}"
    );
}

#[test]
fn created_failing_refuses_the_parameters() {
    let s = script("export const game = { created(ctx, t) { if (t.params.bad) throw new Error('bad params'); return {}; }, sat() {}, left() {}, act() {}, snapshot() { return 0; } };");
    let mut p = params(1);
    p.params.insert("bad".into(), json!(true));
    let e = ScriptTable::create(s.clone(), &p, 1)
        .err()
        .unwrap_or_default();
    assert!(e.contains("bad params"), "{e}");
    assert!(ScriptTable::create(s, &params(2), 1).is_ok());
}

#[test]
fn a_malformed_save_is_an_error_not_a_panic() {
    let s = script(COUNTER);
    for bad in [
        &b""[..],
        b"{}",
        br#"{"v":2,"state":{},"rng":"1","timers":{},"next":1,"every":null}"#,
        br#"{"v":1,"state":{},"rng":"zz","timers":{},"next":1,"every":null}"#,
        br#"{"v":1,"state":{},"rng":"1","timers":{"a":0},"next":1,"every":null}"#,
        br#"{"v":1,"state":{},"rng":"1","timers":{"a":3},"next":2,"every":null}"#,
    ] {
        assert!(
            ScriptTable::restore(s.clone(), &params(1), bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let _ = Fault::Output(String::new()).kind();
}

/// The SDK harness's rules (game-harness.ts) hold here too: a refusal
/// gives back its random draws, a period under 10 ms is raised to 10, a
/// message to a seat the table does not have is a fault.
const EDGES: &str = r#"
export const game = {
  created() { return { draws: [] }; },
  sat(state, ctx) { ctx.every(1); },
  left() {},
  act(state, ctx, seat, data) {
    const d = ctx.randomInt(1000000);
    if (data === "refuse") return ctx.illegal("no");
    if (data === "far") { ctx.send(9, "hi"); return; }
    state.draws.push(d);
  },
  tick(state, ctx) {},
  snapshot(state) { return state; },
};
"#;

#[test]
fn refusals_give_back_their_draws_and_bad_seats_fault() {
    let s = script(EDGES);
    let draws = |refuse_first: bool| {
        let mut h = Harness::new(table(&s, 1, 42));
        h.sit(0, "a", b"").expect("sit");
        assert_eq!(
            h.pending_timers(),
            vec![(0, Duration::from_millis(10))],
            "every(1) runs at 10 ms"
        );
        if refuse_first {
            assert!(h.act(0, br#""refuse""#).is_err());
        }
        h.act(0, br#""ok""#).expect("act");
        let v: Value = serde_json::from_slice(&h.save().expect("save")).expect("json");
        v["state"]["draws"].clone()
    };
    assert_eq!(draws(true), draws(false));
    let mut h = Harness::new(table(&s, 2, 1));
    h.sit(0, "a", b"").expect("sit");
    let _ = h.act(0, br#""far""#);
    assert!(
        h.fault.clone().unwrap_or_default().contains("seat 9"),
        "{:?}",
        h.fault
    );
}
