//! Giving memory back once the node is quiet (issue 30, part 5).
//!
//! Why: after a burst of traffic the broker's housekeeping frees what the
//! burst left (one-off channels, their history), but the allocator keeps
//! the freed memory — in each worker thread's cache and in dirty pages that
//! decay slowly — so the process's RSS stays near its peak for minutes
//! (bench/RESULTS.md, "Memory given back once traffic stops"). Returning it
//! on every free would cost the fast path under load; returning it when
//! nothing happens costs nothing anyone waits for.
//!
//! The server does not know the allocator (the binary chooses it), so it
//! takes a [`Reclaim`] hook and calls it from its housekeeping tick while
//! the node is [`Quiet`]: no publication, no message from a client and no
//! new connection for [`QUIET_AFTER`], then again every [`RECLAIM_EVERY`]
//! while that lasts (the housekeeping sweep frees expired history later
//! than traffic stops, and that must be given back too). Idle connections
//! do not keep a node busy: heartbeats are not counted.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long without activity before the node counts as quiet.
pub const QUIET_AFTER: Duration = Duration::from_secs(5);

/// How often the hook runs while the node stays quiet.
pub const RECLAIM_EVERY: Duration = Duration::from_secs(10);

/// What the binary does to give memory back (e.g. flush the allocator's
/// thread caches and purge its dirty pages). Called from a runtime worker:
/// it must not block for long.
#[derive(Clone)]
pub struct Reclaim(pub Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for Reclaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reclaim(..)")
    }
}

/// Decides when a quiet node reclaims, from a running count of activity
/// sampled on every housekeeping tick.
#[derive(Debug)]
pub struct Quiet {
    activity: u64,
    since: Instant,
    last: Option<Instant>,
}

impl Quiet {
    /// Starts watching at `now` with `activity` counted so far.
    pub fn new(activity: u64, now: Instant) -> Quiet {
        Quiet {
            activity,
            since: now,
            last: None,
        }
    }

    /// One tick at `now`, with the activity counted so far: true when the
    /// hook should run now.
    pub fn tick(&mut self, activity: u64, now: Instant) -> bool {
        if activity != self.activity {
            self.activity = activity;
            self.since = now;
            self.last = None;
            return false;
        }
        if now.duration_since(self.since) < QUIET_AFTER {
            return false;
        }
        let due = self
            .last
            .is_none_or(|t| now.duration_since(t) >= RECLAIM_EVERY);
        if due {
            self.last = Some(now);
        }
        due
    }
}

/// The activity a node counts (see the module docs): publications, client
/// messages and connections accepted, on every transport.
pub fn activity(m: &herald_core::metrics::Metrics) -> u64 {
    let accepted: u64 = herald_core::metrics::Transport::ALL
        .iter()
        .map(|&t| m.accepted(t))
        .sum();
    m.publications.get() + m.messages_in.get() + accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reclaims_once_quiet_then_every_period_and_never_while_busy() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s * 250);
        let mut q = Quiet::new(0, t0);
        // Busy: activity moves every tick.
        for i in 1..=40 {
            assert!(!q.tick(i, at(i)));
        }
        // Quiet from tick 40: nothing until QUIET_AFTER (20 ticks) passed.
        let mut calls = Vec::new();
        for i in 41..=160 {
            if q.tick(40, at(i)) {
                calls.push(i);
            }
        }
        // At 5 s of quiet, then every 10 s (40 ticks).
        assert_eq!(calls, [60, 100, 140]);
        // Activity again: the clock restarts.
        assert!(!q.tick(41, at(161)));
        assert!(!q.tick(41, at(170)));
        assert!(q.tick(41, at(181)));
    }
}
