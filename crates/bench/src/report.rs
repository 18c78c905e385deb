//! `report`: result files (`--out`) drawn as one self-contained HTML page of
//! SVG line charts, like the seeds' graphs, several runs overlaid.
//!
//! Runs are grouped by scenario; each scenario gets the charts its reports
//! are known by (latency against clients for the shootout, events/s against
//! batch size for streaming, throughput, response time, CPU idle and
//! bandwidth against load for the bots, hands per minute and CPU idle
//! against players for the poker bots, memory per connection for idle
//! connections), one line per run, named by the run's label. A table lists
//! every run with its command line. No JavaScript, no external resources:
//! the page can be attached to an issue or committed next to the results.

use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::output::RunRecord;
use crate::BenchError;

/// Arguments of `report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Result files written with --out.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(long, default_value = "report.html")]
    pub out: PathBuf,
    /// The page's title.
    #[arg(long, default_value = "herald bench report")]
    pub title: String,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points, drawn in the given order.
    pub points: Vec<(f64, f64)>,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the chart.
    pub title: String,
    /// X axis label.
    pub x: String,
    /// Y axis label.
    pub y: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Use a logarithmic x axis (batch sizes).
    pub log_x: bool,
}

/// Writes the report page.
pub fn run(args: &ReportArgs) -> Result<(), BenchError> {
    let mut runs = Vec::new();
    for f in &args.files {
        runs.push(RunRecord::read(f)?);
    }
    let html = render(&args.title, &runs);
    fs::write(&args.out, html).map_err(|e| BenchError::File {
        path: args.out.display().to_string(),
        source: e,
    })?;
    eprintln!("report written to {}", args.out.display());
    Ok(())
}

/// Reads a number at a dotted path of a JSON value.
fn num(v: &Value, path: &str) -> Option<f64> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    cur.as_f64()
}

/// A series from the steps of `run`: x and y read at dotted paths.
fn series(run: &RunRecord, x: &str, y: &str) -> Series {
    Series {
        name: run.label.clone(),
        points: run
            .steps
            .iter()
            .filter(|s| s.get("over_limit").and_then(Value::as_bool) != Some(true))
            .filter_map(|s| Some((num(s, x)?, num(s, y)?)))
            .collect(),
    }
}

/// A series over the run's system samples.
fn system_series(run: &RunRecord, y: &str) -> Series {
    Series {
        name: run.label.clone(),
        points: run
            .system
            .iter()
            .filter_map(|s| {
                let v = serde_json::to_value(s).ok()?;
                Some((s.t, num(&v, y)?))
            })
            .collect(),
    }
}

/// One series per group of runs (`group` names it), one point per run:
/// the run's `params` at `x` against its `summary` at `y`, ordered by x.
/// Seed 001's charts: latency against message rate, a line per transport
/// and client count, from one fanout run per rate.
fn per_run_series(
    runs: &[&RunRecord],
    group: impl Fn(&RunRecord) -> String,
    x: &str,
    y: &str,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in runs {
        let (Some(px), Some(py)) = (num(&r.params, x), num(&r.summary, y)) else {
            continue;
        };
        let name = group(r);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((px, py)),
            None => out.push(Series {
                name,
                points: vec![(px, py)],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// A fanout run's group in the latency-vs-rate charts.
fn fanout_group(r: &RunRecord) -> String {
    let p = &r.params;
    format!(
        "{} ({} clients)",
        p.get("transport")
            .and_then(Value::as_str)
            .unwrap_or("ws-json"),
        p.get("subscribers").and_then(Value::as_u64).unwrap_or(0)
    )
}

fn chart(title: &str, x: &str, y: &str, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x: x.into(),
        y: y.into(),
        series: series
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .collect(),
        log_x: false,
    }
}

/// The charts for the runs of one scenario.
fn charts_for(scenario: &str, runs: &[&RunRecord]) -> Vec<Chart> {
    let mut charts = match scenario {
        "broadcast" => broadcast_charts(runs),
        "echo" => echo_charts(runs),
        "fanout" => fanout_charts(runs),
        "bots" => bots_charts(runs),
        "bots-holdem" => holdem_charts(runs),
        "stream" => stream_charts(runs),
        "idle" => idle_charts(runs),
        _ => Vec::new(),
    };
    charts.push(chart(
        "Server CPU over time",
        "seconds",
        "% of one core",
        runs.iter()
            .map(|r| system_series(r, "server_cpu_pct"))
            .collect(),
    ));
    charts.push(chart(
        "Bench CPU over time",
        "seconds",
        "% of one core",
        runs.iter()
            .map(|r| system_series(r, "bench_cpu_pct"))
            .collect(),
    ));
    charts.retain(|c| !c.series.is_empty());
    charts
}

/// One series per run: `y` against `x` over the run's steps.
fn each(runs: &[&RunRecord], x: &str, y: &str) -> Vec<Series> {
    runs.iter().map(|r| series(r, x, y)).collect()
}

/// The `broadcast` charts: round trips, all-received latency and server CPU
/// against clients.
fn broadcast_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Broadcast round trip (limit percentile) vs clients",
            "clients",
            "ms",
            each(runs, "clients", "rtt.pct_ms"),
        ),
        chart(
            "Median broadcast round trip vs clients",
            "clients",
            "ms",
            each(runs, "clients", "rtt.median_ms"),
        ),
        chart(
            "All-received latency (limit percentile) vs clients",
            "clients",
            "ms",
            each(runs, "clients", "all_received.pct_ms"),
        ),
        chart(
            "Server CPU vs clients",
            "clients",
            "% of one core",
            each(runs, "clients", "server_cpu_pct"),
        ),
    ]
}

/// The `echo` charts: round trips against clients.
fn echo_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Echo round trip (limit percentile) vs clients",
            "clients",
            "ms",
            each(runs, "clients", "rtt.pct_ms"),
        ),
        chart(
            "Median echo round trip vs clients",
            "clients",
            "ms",
            each(runs, "clients", "rtt.median_ms"),
        ),
    ]
}

/// The `fanout` charts: deliveries and latency over time, and latency against
/// the message rate across runs.
fn fanout_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Deliveries per second over time",
            "seconds",
            "deliveries/s",
            each(runs, "t", "delivered"),
        ),
        chart(
            "p99 delivery latency (from schedule) over time",
            "seconds",
            "ms",
            each(runs, "t", "latency.p99_ms"),
        ),
        chart(
            "Median delivery latency vs message rate (one run per rate)",
            "messages/s",
            "ms",
            per_run_series(runs, fanout_group, "rate", "latency.p50_ms"),
        ),
        chart(
            "p99 delivery latency vs message rate (one run per rate)",
            "messages/s",
            "ms",
            per_run_series(runs, fanout_group, "rate", "latency.p99_ms"),
        ),
    ]
}

/// The `bots` charts: throughput, response time, server CPU idle and bandwidth
/// against load.
fn bots_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Throughput: actual vs theoretical events/s",
            "theoretical events/s",
            "actual events/s",
            each(runs, "theoretical_eps", "actual_eps"),
        ),
        chart(
            "Response time (mean) vs load",
            "theoretical events/s",
            "ms",
            each(runs, "theoretical_eps", "response.mean_ms"),
        ),
        chart(
            "Response time (p95) vs load",
            "theoretical events/s",
            "ms",
            each(runs, "theoretical_eps", "response.p95_ms"),
        ),
        chart(
            "Server CPU idle vs load",
            "theoretical events/s",
            "% idle (of the server's core)",
            each(runs, "theoretical_eps", "server_idle_pct"),
        ),
        chart(
            "Bandwidth out of the server vs load",
            "theoretical events/s",
            "bytes/s",
            each(runs, "theoretical_eps", "bandwidth_out_bps"),
        ),
        chart(
            "Bandwidth into the server vs load",
            "theoretical events/s",
            "bytes/s",
            each(runs, "theoretical_eps", "bandwidth_in_bps"),
        ),
    ]
}

/// Seed 003's poker charts: hands and CPU idle against players.
fn holdem_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Hands per minute vs players",
            "players seated",
            "hands/min",
            each(runs, "players", "hands_per_min"),
        ),
        chart(
            "Server CPU idle vs players",
            "players seated",
            "% idle (of the server's core)",
            each(runs, "players", "server_idle_pct"),
        ),
        chart(
            "Game events received per second vs players",
            "players seated",
            "events/s",
            each(runs, "players", "game_events_per_s"),
        ),
        chart(
            "Action response time (p99) vs players",
            "players seated",
            "ms",
            each(runs, "players", "response.p99_ms"),
        ),
        chart(
            "Action response time (median) vs players",
            "players seated",
            "ms",
            each(runs, "players", "response.p50_ms"),
        ),
        chart(
            "Bandwidth out of the server vs players (lobby included)",
            "players seated",
            "bytes/s",
            each(runs, "players", "bandwidth_out_bps"),
        ),
        chart(
            "Lobby bandwidth vs players",
            "players seated",
            "bytes/s",
            each(runs, "players", "lobby_bps"),
        ),
    ]
}

/// The `stream` charts: events/s and CPU against batch size (log scale), one
/// series per run and consumer count.
fn stream_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    let by_consumers = |y: &str| {
        let mut out = Vec::new();
        for r in runs {
            let mut counts: Vec<u64> = r
                .steps
                .iter()
                .filter_map(|s| s.get("consumers")?.as_u64())
                .collect();
            counts.dedup();
            for c in counts {
                out.push(Series {
                    name: format!("{} · {c} consumers", r.label),
                    points: r
                        .steps
                        .iter()
                        .filter(|s| s.get("consumers").and_then(Value::as_u64) == Some(c))
                        .filter_map(|s| Some((num(s, "batch_size")?, num(s, y)?)))
                        .collect(),
                });
            }
        }
        out
    };
    let mut v = vec![
        chart(
            "Events per second vs batch size",
            "batch size (events)",
            "events/s",
            by_consumers("eps"),
        ),
        chart(
            "Client (bench) CPU vs batch size",
            "batch size (events)",
            "% of one core",
            by_consumers("client_cpu_pct"),
        ),
        chart(
            "Server CPU vs batch size",
            "batch size (events)",
            "% of one core",
            by_consumers("server_cpu_pct"),
        ),
    ];
    for c in &mut v {
        c.log_x = true;
    }
    v
}

/// The `idle` charts: server memory against connections.
fn idle_charts(runs: &[&RunRecord]) -> Vec<Chart> {
    vec![
        chart(
            "Server memory per connection vs connections",
            "connections",
            "KiB per connection",
            each(runs, "clients", "kib_per_connection"),
        ),
        chart(
            "Server RSS vs connections",
            "connections",
            "KiB",
            each(runs, "clients", "rss_kib"),
        ),
    ]
}

/// The whole page.
pub fn render(title: &str, runs: &[RunRecord]) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\n\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}}\n\
         h1{{font-size:1.6em}} h2{{margin-top:2em;border-bottom:1px solid #ccc}}\n\
         .charts{{display:flex;flex-wrap:wrap;gap:1em}} figure{{margin:0}}\n\
         figcaption{{font-weight:600;margin:.3em 0}}\n\
         table{{border-collapse:collapse;font-size:.85em}} td,th{{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}}\n\
         code{{font-size:.85em;word-break:break-all}} .fail{{color:#b00;font-weight:600}}\n\
         </style></head><body>\n<h1>{t}</h1>\n",
        t = esc(title)
    );
    let _ = write!(html, "<h2>Runs</h2>\n<table><tr><th>label</th><th>scenario</th><th>duration</th><th>checks</th><th>command</th></tr>\n");
    for r in runs {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{:.1}s</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&r.label),
            esc(&r.scenario),
            r.duration_s,
            if r.passed {
                "passed".to_owned()
            } else {
                "<span class=\"fail\">FAILED</span>".to_owned()
            },
            esc(&r.command.join(" "))
        );
    }
    html.push_str("</table>\n");
    let mut scenarios: Vec<&str> = runs.iter().map(|r| r.scenario.as_str()).collect();
    scenarios.dedup();
    let mut seen = Vec::new();
    for s in scenarios {
        if seen.contains(&s) {
            continue;
        }
        seen.push(s);
        let group: Vec<&RunRecord> = runs.iter().filter(|r| r.scenario == s).collect();
        let _ = writeln!(html, "<h2>{}</h2>\n<div class=\"charts\">", esc(s));
        for c in charts_for(s, &group) {
            html.push_str("<figure>");
            let _ = write!(html, "<figcaption>{}</figcaption>", esc(&c.title));
            html.push_str(&svg(&c));
            html.push_str("</figure>\n");
        }
        html.push_str("</div>\n");
    }
    html.push_str(
        "<p><small>Generated by <code>herald bench report</code>.</small></p>\n</body></html>\n",
    );
    html
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Round numbers for axis ticks between `lo` and `hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(mag * 10.0);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(t);
        t += step;
    }
    out
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One chart as inline SVG.
pub fn svg(c: &Chart) -> String {
    let (w, h) = (520.0, 320.0);
    let (left, right, top, bottom) = (64.0, 16.0, 12.0, 48.0);
    let legend_h = 16.0 * c.series.len() as f64;
    let total_h = h + legend_h;
    let pts = c.series.iter().flat_map(|s| s.points.iter());
    let tx = |x: f64| if c.log_x { x.max(1e-9).log10() } else { x };
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
        y1 = y1.max(y);
    }
    if x0 > x1 {
        x0 = 0.0;
        x1 = 1.0;
    }
    if x1 - x0 < 1e-12 {
        x1 = x0 + 1.0;
    }
    let y0 = 0.0;
    if y1 <= y0 {
        y1 = 1.0;
    }
    let yt = ticks(y0, y1 * 1.05);
    let y1 = yt.last().copied().unwrap_or(y1).max(y1);
    let px = |x: f64| left + (tx(x) - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| top + (1.0 - (y - y0) / (y1 - y0)) * (h - top - bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{total_h}\" viewBox=\"0 0 {w} {total_h}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = write!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{total_h}\" fill=\"#fff\"/>"
    );
    for t in &yt {
        let y = py(*t);
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - right,
            left - 4.0,
            y + 4.0,
            fmt_tick(*t)
        );
    }
    let xt: Vec<(f64, String)> = if c.log_x {
        let mut v = Vec::new();
        let mut d = 10f64.powf(x0.floor());
        while d.log10() <= x1 + 1e-9 {
            for m in [1.0, 2.0, 5.0] {
                let x = d * m;
                if x.log10() >= x0 - 1e-9 && x.log10() <= x1 + 1e-9 {
                    v.push((x, fmt_tick(x)));
                }
            }
            d *= 10.0;
        }
        v
    } else {
        ticks(x0, x1)
            .into_iter()
            .map(|x| (x, fmt_tick(x)))
            .collect()
    };
    for (x, label) in &xt {
        let xp = px(*x);
        let _ = write!(
            s,
            "<line x1=\"{xp:.1}\" y1=\"{top}\" x2=\"{xp:.1}\" y2=\"{:.1}\" stroke=\"#f3f3f3\"/><text x=\"{xp:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            h - bottom,
            h - bottom + 14.0
        );
    }
    let _ = write!(
        s,
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{:.1}\" stroke=\"#444\"/>",
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        (left + w - right) / 2.0,
        h - 12.0,
        esc(&c.x)
    );
    let _ = write!(
        s,
        "<text transform=\"translate(14,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (top + h - bottom) / 2.0,
        esc(&c.y)
    );
    for (i, series) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for &(x, y) in &series.points {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"><title>{}: {} , {}</title></circle>",
                px(x),
                py(y),
                esc(&series.name),
                fmt_tick(x),
                fmt_tick(y)
            );
        }
        let ly = h + 4.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            "<rect x=\"{left}\" y=\"{ly:.1}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            left + 18.0,
            ly + 5.0,
            esc(&series.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// Escapes text for HTML and SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 100.0), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 7.0), vec![0.0, 2.0, 4.0, 6.0]);
    }

    #[test]
    fn renders_overlaid_runs() {
        let mut a = RunRecord::new("broadcast", "herald <json>".into(), 0.0);
        a.steps = vec![
            serde_json::json!({"clients": 1000, "rtt": {"pct_ms": 10.0, "median_ms": 5.0}}),
            serde_json::json!({"clients": 2000, "rtt": {"pct_ms": 20.0, "median_ms": 9.0}}),
        ];
        let mut b = a.clone();
        b.label = "node".into();
        b.passed = false;
        let html = render("t", &[a, b]);
        assert!(html.starts_with("<!doctype html>"));
        assert!(html.contains("herald &lt;json&gt;"));
        assert_eq!(html.matches("<polyline").count(), 4);
        assert!(html.contains("FAILED"));
    }

    #[test]
    fn fanout_runs_draw_latency_against_rate() {
        let run = |transport: &str, rate: f64, p50: f64| {
            let mut r = RunRecord::new("fanout", format!("{transport} {rate}"), 0.0);
            r.params = serde_json::json!({"transport": transport, "subscribers": 10, "rate": rate});
            r.summary = serde_json::json!({"latency": {"p50_ms": p50, "p99_ms": p50 * 3.0}});
            r
        };
        let runs = [
            run("poll", 2000.0, 9.0),
            run("poll", 1000.0, 4.0),
            run("ws-json", 1000.0, 1.0),
            run("ws-json", 2000.0, 1.5),
        ];
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let series = per_run_series(&refs, fanout_group, "rate", "latency.p50_ms");
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].name, "poll (10 clients)");
        assert_eq!(series[0].points, vec![(1000.0, 4.0), (2000.0, 9.0)]);
        let html = render("t", &runs);
        assert!(html.contains("p99 delivery latency vs message rate"));
        assert!(html.contains("ws-json (10 clients)"));
    }

    #[test]
    fn poker_runs_draw_hands_and_idle_against_players() {
        let mut r = RunRecord::new("bots-holdem", "ws-json".into(), 0.0);
        r.steps = vec![
            serde_json::json!({"players": 6, "hands_per_min": 40.0, "server_idle_pct": 95.0, "response": {"p50_ms": 1.0, "p99_ms": 3.0}}),
            serde_json::json!({"players": 12, "hands_per_min": 80.0, "server_idle_pct": 90.0, "response": {"p50_ms": 1.0, "p99_ms": 4.0}}),
        ];
        let refs = [&r];
        let charts = charts_for("bots-holdem", &refs);
        let hands = charts
            .iter()
            .find(|c| c.title == "Hands per minute vs players")
            .unwrap();
        assert_eq!(hands.series[0].points, vec![(6.0, 40.0), (12.0, 80.0)]);
        assert!(charts
            .iter()
            .any(|c| c.title == "Server CPU idle vs players"));
        assert!(render("t", &[r]).contains("Action response time (p99) vs players"));
    }
}
