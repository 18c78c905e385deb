//! Boa probe for decision 0014: per-table Context (Boa has no cheap shared
//! heap isolation), start-up, RSS per idle table, a no-op act and an act
//! with one JSON message.
use boa_engine::{Context, Source, JsValue, js_string, property::Attribute};
use std::time::Instant;

fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status").unwrap().lines()
        .find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap()
}

const SRC: &str = r#"
var game = {
  created() { return { n: 0, log: [] }; },
  act(s, seat) { s.n++; return JSON.stringify({ t: "picked", seat: seat }); },
};
var tables = new Map();
function create(h) { tables.set(h, { state: game.created() }); }
function act(h, seat) { return game.act(tables.get(h).state, seat); }
"#;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    // One context per table.
    let base = rss();
    let t = Instant::now();
    let mut keep = Vec::new();
    for _ in 0..n {
        let mut cx = Context::default();
        cx.eval(Source::from_bytes(SRC)).unwrap();
        cx.eval(Source::from_bytes("create(1)")).unwrap();
        keep.push(cx);
    }
    println!("boa context per table: {:.1} us, {:.1} KiB each", t.elapsed().as_secs_f64() * 1e6 / n as f64, (rss() - base) as f64 / n as f64);
    drop(keep);
    // Shared context: objects per table.
    let mut cx = Context::default();
    cx.eval(Source::from_bytes(SRC)).unwrap();
    let base = rss();
    let t = Instant::now();
    for h in 0..n * 10 { cx.eval(Source::from_bytes(&format!("create({h})"))).unwrap(); }
    println!("boa shared context: {:.1} us, {:.2} KiB per table", t.elapsed().as_secs_f64() * 1e6 / (n * 10) as f64, (rss() - base) as f64 / (n * 10) as f64);
    let act = cx.global_object().get(js_string!("act"), &mut cx).unwrap();
    let f = act.as_callable().unwrap().clone();
    let k = 200_000;
    let t = Instant::now();
    for i in 0..k {
        let r = f.call(&JsValue::undefined(), &[JsValue::from(1), JsValue::from(i % 2)], &mut cx).unwrap();
        std::hint::black_box(r);
    }
    println!("boa act with one JSON message: {:.0} ns", t.elapsed().as_nanos() as f64 / k as f64);
    let _ = Attribute::all();
}
