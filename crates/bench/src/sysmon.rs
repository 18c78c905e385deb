//! Once-a-second samples of the server's CPU, memory and the network, read
//! from `/proc`, so every result carries the load it was measured under.
//!
//! - Server CPU %: the change of `utime + stime` in `/proc/PID/stat` over
//!   the interval, in percent of one core (200 % = two cores busy). Clock
//!   ticks are taken as 100 per second, Linux's `USER_HZ` on every
//!   mainstream architecture (reading `sysconf` would need `unsafe`).
//! - Server RSS: `VmRSS` from `/proc/PID/status`.
//! - Bench CPU %: the same for this process and its worker processes, so a
//!   saturated load generator is visible rather than mistaken for a slow
//!   server.
//! - System idle %: from the `cpu` line of `/proc/stat`, over all cores.
//! - Network: bytes per second received and sent on one interface of
//!   `/proc/net/dev` (`lo` by default: bench and server share the machine).

use std::fs;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// `USER_HZ`: clock ticks per second in `/proc/*/stat`.
const TICKS_PER_SEC: f64 = 100.0;

/// One sample.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SysSample {
    /// Seconds since the run started (end of the interval).
    pub t: f64,
    /// Server CPU over the interval, % of one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
    /// Server resident memory, KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_rss_kib: Option<u64>,
    /// Bench CPU (this process and its workers), % of one core.
    pub bench_cpu_pct: f64,
    /// Idle share of all cores, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_idle_pct: Option<f64>,
    /// Bytes per second received on the interface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_rx_bps: Option<f64>,
    /// Bytes per second sent on the interface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_tx_bps: Option<f64>,
}

/// Raw counters at one instant.
#[derive(Debug, Clone, Copy)]
struct Raw {
    at: Instant,
    server_ticks: Option<u64>,
    bench_ticks: u64,
    cpu_total: Option<(u64, u64)>,
    net: Option<(u64, u64)>,
}

/// The sampler. Call [`Monitor::tick`] from the event loop.
pub struct Monitor {
    pid: Option<u32>,
    iface: String,
    extra_pids: Vec<u32>,
    start: Instant,
    next: Instant,
    interval: Duration,
    prev: Raw,
    /// Samples so far.
    pub samples: Vec<SysSample>,
}

impl Monitor {
    /// Samples `server_pid` (if given) and interface `iface` every second.
    pub fn new(server_pid: Option<u32>, iface: &str, start: Instant) -> Monitor {
        let mut m = Monitor {
            pid: server_pid,
            iface: iface.to_owned(),
            extra_pids: Vec::new(),
            start,
            next: start + Duration::from_secs(1),
            interval: Duration::from_secs(1),
            prev: Raw {
                at: start,
                server_ticks: None,
                bench_ticks: 0,
                cpu_total: None,
                net: None,
            },
            samples: Vec::new(),
        };
        m.prev = m.read(start);
        m
    }

    /// Also counts these processes (bench workers) as the bench.
    pub fn add_bench_pid(&mut self, pid: u32) {
        self.extra_pids.push(pid);
    }

    fn read(&self, at: Instant) -> Raw {
        let mut bench_ticks = proc_ticks("self").unwrap_or(0);
        for pid in &self.extra_pids {
            bench_ticks += proc_ticks(&pid.to_string()).unwrap_or(0);
        }
        Raw {
            at,
            server_ticks: self.pid.and_then(|p| proc_ticks(&p.to_string())),
            bench_ticks,
            cpu_total: system_cpu(),
            net: net_bytes(&self.iface),
        }
    }

    /// Takes a sample if one is due; returns when the next one is.
    pub fn tick(&mut self, now: Instant) -> Instant {
        if now >= self.next {
            self.sample(now);
            while self.next <= now {
                self.next += self.interval;
            }
        }
        self.next
    }

    /// Takes a sample now (also used at the end of a run).
    pub fn sample(&mut self, now: Instant) {
        let cur = self.read(now);
        let dt = (cur.at - self.prev.at).as_secs_f64();
        if dt < 0.05 {
            return;
        }
        let pct = |d: u64| d as f64 / TICKS_PER_SEC / dt * 100.0;
        let sample = SysSample {
            t: (now - self.start).as_secs_f64(),
            server_cpu_pct: match (cur.server_ticks, self.prev.server_ticks) {
                (Some(c), Some(p)) => Some(pct(c.saturating_sub(p))),
                _ => None,
            },
            server_rss_kib: self.pid.and_then(rss_kib),
            bench_cpu_pct: pct(cur.bench_ticks.saturating_sub(self.prev.bench_ticks)),
            system_idle_pct: match (cur.cpu_total, self.prev.cpu_total) {
                (Some((ct, ci)), Some((pt, pi))) if ct > pt => {
                    Some((ci.saturating_sub(pi)) as f64 / (ct - pt) as f64 * 100.0)
                }
                _ => None,
            },
            net_rx_bps: match (cur.net, self.prev.net) {
                (Some((c, _)), Some((p, _))) => Some(c.saturating_sub(p) as f64 / dt),
                _ => None,
            },
            net_tx_bps: match (cur.net, self.prev.net) {
                (Some((_, c)), Some((_, p))) => Some(c.saturating_sub(p) as f64 / dt),
                _ => None,
            },
        };
        self.samples.push(sample);
        self.prev = cur;
    }

    /// The mean of `f` over samples whose interval ends within `[from, to]`
    /// seconds since the start (`None` if there are none).
    pub fn mean(&self, from: f64, to: f64, f: impl Fn(&SysSample) -> Option<f64>) -> Option<f64> {
        mean_between(&self.samples, from, to, f)
    }
}

/// The mean of `f` over `samples` whose `t` lies within `[from, to]`.
pub fn mean_between(
    samples: &[SysSample],
    from: f64,
    to: f64,
    f: impl Fn(&SysSample) -> Option<f64>,
) -> Option<f64> {
    let vals: Vec<f64> = samples
        .iter()
        .filter(|s| s.t >= from && s.t <= to + 0.01)
        .filter_map(f)
        .collect();
    if vals.is_empty() {
        None
    } else {
        Some(vals.iter().sum::<f64>() / vals.len() as f64)
    }
}

/// `utime + stime` of a process, in clock ticks.
fn proc_ticks(pid: &str) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11, 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` of a process, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// (total, idle + iowait) jiffies over all CPUs.
fn system_cpu() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total, idle))
}

/// (received, sent) bytes of an interface.
fn net_bytes(iface: &str) -> Option<(u64, u64)> {
    let dev = fs::read_to_string("/proc/net/dev").ok()?;
    for line in dev.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == iface {
            let v: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            return Some((*v.first()?, *v.get(8)?));
        }
    }
    None
}

/// The number of CPUs the machine has (from `/proc/stat`), for reports.
pub fn cpu_count() -> usize {
    fs::read_to_string("/proc/stat")
        .map(|s| {
            s.lines()
                .filter(|l| {
                    l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)
                })
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        assert!(proc_ticks("self").is_some());
        assert!(rss_kib(std::process::id()).unwrap() > 0);
        assert!(system_cpu().is_some());
        assert!(cpu_count() >= 1);
        let start = Instant::now();
        let mut m = Monitor::new(Some(std::process::id()), "lo", start);
        m.sample(start + Duration::from_millis(200));
        let s = &m.samples[0];
        assert!(s.server_rss_kib.unwrap() > 0);
        assert!(s.server_cpu_pct.is_some());
    }
}
