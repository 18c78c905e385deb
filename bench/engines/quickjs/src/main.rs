//! QuickJS (rquickjs) probe for decision 0014, the same shape as the Boa one.
use rquickjs::{Context, Function, Runtime};
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
    let base = rss();
    let t = Instant::now();
    let mut keep = Vec::new();
    for _ in 0..n {
        let rt = Runtime::new().unwrap();
        let cx = context(&rt);
        cx.with(|cx| { cx.eval::<(), _>(SRC).unwrap(); cx.eval::<(), _>("create(1)").unwrap(); });
        keep.push((cx, rt));
    }
    println!("quickjs runtime per table: {:.1} us, {:.1} KiB each", t.elapsed().as_secs_f64() * 1e6 / n as f64, (rss() - base) as f64 / n as f64);
    drop(keep);
    let rt = Runtime::new().unwrap();
    let cx = Context::full(&rt).unwrap();
    cx.with(|cx| cx.eval::<(), _>(SRC).unwrap());
    let base = rss();
    let t = Instant::now();
    cx.with(|cx| for h in 0..n * 10 { cx.eval::<(), _>(format!("create({h})")).unwrap(); });
    println!("quickjs shared context: {:.1} us, {:.2} KiB per table", t.elapsed().as_secs_f64() * 1e6 / (n * 10) as f64, (rss() - base) as f64 / (n * 10) as f64);
    let k = 200_000;
    cx.with(|cx| {
        let f: Function = cx.globals().get("act").unwrap();
        let t = Instant::now();
        for i in 0..k { let r: String = f.call((1, i % 2)).unwrap(); std::hint::black_box(r); }
        println!("quickjs act with one JSON message: {:.0} ns", t.elapsed().as_nanos() as f64 / k as f64);
    });
}

/// A full context, or with `MINIMAL=1` only the intrinsics a game needs.
fn context(rt: &Runtime) -> Context {
    use rquickjs::context::intrinsic::*;
    if std::env::var_os("MINIMAL").is_none() {
        return Context::full(rt).unwrap();
    }
    Context::builder().with::<Eval>().with::<Json>().with::<MapSet>().with::<RegExp>().with::<RegExpCompiler>().build(rt).unwrap()
}
