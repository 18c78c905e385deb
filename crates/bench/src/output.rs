//! The result file (`--out FILE.json`) and table (`--csv FILE`) every
//! scenario writes, in one documented shape so `herald bench report` and
//! other tools can read any run.
//!
//! ```text
//! {
//!   "schema": "herald-bench/1",
//!   "scenario": "broadcast" | "echo" | "fanout" | "bots" | "bots-holdem" | "bots-script" | "stream" | "idle",
//!   "label": "free text naming the run (--label; defaults to scenario + target)",
//!   "started_at": 1700000000.0,          // Unix seconds
//!   "duration_s": 42.0,
//!   "command": ["herald", "bench", ...], // argv
//!   "host": { "cpus": 2, "bench_pid": 1234 },
//!   "params": { ... },                   // the scenario's resolved parameters
//!   "steps": [ { ... }, ... ],           // one object per step / rate / batch
//!   "summary": { ... },                  // scenario-specific totals
//!   "verification": { ... } | null,      // exactly-once checks, when the scenario has them
//!   "passed": true,                      // false when a check failed
//!   "system": [ { "t", "server_cpu_pct", "server_rss_kib", "bench_cpu_pct",
//!                 "system_idle_pct", "net_rx_bps", "net_tx_bps" }, ... ]
//! }
//! ```
//!
//! The CSV has one row per step: the step objects flattened, nested keys
//! joined with `.` (e.g. `rtt.pct_ms`), columns in first-seen order.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sysmon::SysSample;
use crate::BenchError;

/// The schema identifier written in every result file.
pub const SCHEMA: &str = "herald-bench/1";

/// Facts about the machine the run happened on.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct HostInfo {
    /// CPUs on the machine.
    pub cpus: usize,
    /// The bench's own process id.
    pub bench_pid: u32,
}

/// One run, as written to `--out`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Which scenario ran.
    pub scenario: String,
    /// A name for the run in reports.
    pub label: String,
    /// Unix seconds at the start.
    pub started_at: f64,
    /// Wall time of the whole run.
    pub duration_s: f64,
    /// The command line.
    pub command: Vec<String>,
    /// Where it ran.
    pub host: HostInfo,
    /// The scenario's resolved parameters.
    pub params: Value,
    /// Per-step results.
    pub steps: Vec<Value>,
    /// Scenario-specific totals.
    pub summary: Value,
    /// Exactly-once checks, if the scenario has them.
    pub verification: Option<Value>,
    /// False when a check failed.
    pub passed: bool,
    /// Once-a-second system samples.
    pub system: Vec<SysSample>,
}

impl RunRecord {
    /// A record with the common fields filled in.
    pub fn new(scenario: &str, label: String, started_at: f64) -> RunRecord {
        RunRecord {
            schema: SCHEMA.to_owned(),
            scenario: scenario.to_owned(),
            label,
            started_at,
            duration_s: 0.0,
            command: std::env::args().collect(),
            host: HostInfo {
                cpus: crate::sysmon::cpu_count(),
                bench_pid: std::process::id(),
            },
            params: Value::Null,
            steps: Vec::new(),
            summary: Value::Null,
            verification: None,
            passed: true,
            system: Vec::new(),
        }
    }

    /// Writes the JSON and CSV files that were asked for.
    pub fn write(&self, json: Option<&Path>, csv: Option<&Path>) -> Result<(), BenchError> {
        if let Some(path) = json {
            let text = serde_json::to_string_pretty(self).map_err(BenchError::Json)?;
            fs::write(path, text + "\n").map_err(|e| BenchError::File {
                path: path.display().to_string(),
                source: e,
            })?;
        }
        if let Some(path) = csv {
            fs::write(path, to_csv(&self.steps)).map_err(|e| BenchError::File {
                path: path.display().to_string(),
                source: e,
            })?;
        }
        Ok(())
    }

    /// Writes the files of a run that may have failed: when `result` is an
    /// error, the record is marked `passed: false`, the error goes into
    /// `summary.error`, the files are still written (what was measured
    /// before the failure is kept), and the error is returned.
    pub fn write_after(
        &mut self,
        result: Result<(), BenchError>,
        json: Option<&Path>,
        csv: Option<&Path>,
    ) -> Result<(), BenchError> {
        if let Err(e) = &result {
            self.passed = false;
            if let Value::Object(map) = &mut self.summary {
                map.insert("error".into(), Value::String(e.to_string()));
            }
        }
        self.write(json, csv)?;
        if result.is_err() {
            if let Some(path) = json {
                eprintln!("partial results written to {}", path.display());
            }
        }
        result
    }

    /// Reads a result file.
    pub fn read(path: &Path) -> Result<RunRecord, BenchError> {
        let text = fs::read_to_string(path).map_err(|e| BenchError::File {
            path: path.display().to_string(),
            source: e,
        })?;
        serde_json::from_str(&text).map_err(BenchError::Json)
    }
}

/// Flattens `value` into `(dotted key, cell)` pairs.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Null => out.push((prefix.to_owned(), String::new())),
        Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

/// One row per step, columns in first-seen order.
pub fn to_csv(steps: &[Value]) -> String {
    let rows: Vec<Vec<(String, String)>> = steps
        .iter()
        .map(|s| {
            let mut row = Vec::new();
            flatten("", s, &mut row);
            row
        })
        .collect();
    let mut columns: Vec<String> = Vec::new();
    for row in &rows {
        for (k, _) in row {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let mut out = columns
        .iter()
        .map(|c| csv_cell(c))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for row in &rows {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| {
                row.iter()
                    .find(|(k, _)| k == c)
                    .map(|(_, v)| csv_cell(v))
                    .unwrap_or_default()
            })
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn csv_flattens() {
        let steps = vec![
            serde_json::json!({"clients": 10, "rtt": {"min_ms": 1.5, "max_ms": 2.0}, "label": "a,b"}),
            serde_json::json!({"clients": 20, "rtt": {"min_ms": 1.0}, "extra": null}),
        ];
        let csv = to_csv(&steps);
        assert_eq!(
            csv,
            "clients,label,rtt.max_ms,rtt.min_ms,extra\n10,\"a,b\",2.0,1.5,\n20,,,1.0,\n"
        );
    }
}
