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
//!
//! It is also called after a [`ParkWave`]: when many more connections are
//! parked than at the last reclaim and parking has slowed down. Each
//! connection that parks frees its task, its I/O registration and its timer
//! (≈ 0.75 KiB); after clients connect in a crowd (a load test, a mass
//! reconnect), that is megabytes the allocator would otherwise keep for
//! its decay time (10 s) or until the node is quiet, and an idle client
//! would cost ≈ 1 KiB for its first seconds instead of ≈ 0.33 (decision
//! 0010, "Heartbeats while parked, and from the first second"). The rise
//! is counted from the number parked at the last such reclaim, never from
//! a lower point: under steady traffic the number parked swings up and
//! down, and the memory freed by parks is used again by the next wakes.

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

/// How many more parked connections than at the last reclaim make a wave
/// worth giving back (≈ 0.75 MiB freed).
pub const PARK_WAVE: usize = 1024;

/// The least time between two reclaims for waves.
pub const WAVE_GAP: Duration = Duration::from_secs(1);

/// Decides when a wave of parked connections is over and its memory worth
/// giving back, from the number parked sampled on every housekeeping tick.
#[derive(Debug)]
pub struct ParkWave {
    /// Parked at the last wave's reclaim (at the start: when watching
    /// began). Not lowered when connections wake or leave: on a busy node
    /// the number parked swings by more than a wave (every connection
    /// parking between messages and waking for the next), and a purge at
    /// each swing would hand the allocator's pages back only for the next
    /// wakes to fault them in again.
    base: usize,
    /// Parked at the previous tick.
    prev: usize,
    last: Option<Instant>,
}

impl ParkWave {
    /// Starts watching with `parked` connections parked.
    pub fn new(parked: usize) -> ParkWave {
        ParkWave {
            base: parked,
            prev: parked,
            last: None,
        }
    }

    /// One tick at `now` with `parked` connections parked: true when the
    /// hook should run now (at least [`PARK_WAVE`] more than at the last
    /// wave's reclaim, fewer than an eighth of that parked since the last
    /// tick, and not within [`WAVE_GAP`] of the last wave's reclaim).
    pub fn tick(&mut self, parked: usize, now: Instant) -> bool {
        let rise = parked.saturating_sub(self.prev);
        self.prev = parked;
        let over = parked >= self.base + PARK_WAVE && rise < PARK_WAVE / 8;
        let spaced = self.last.is_none_or(|t| now.duration_since(t) >= WAVE_GAP);
        if over && spaced {
            self.base = parked;
            self.last = Some(now);
            return true;
        }
        false
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

    #[test]
    fn a_wave_of_parks_reclaims_once_it_is_over_and_swings_never() {
        let t0 = Instant::now();
        let at = |i: u64| t0 + Duration::from_millis(i * 250);
        let mut w = ParkWave::new(0);
        // 10,000 connections park over four ticks: nothing while it goes on,
        // once when it has stopped.
        let calls: Vec<u64> = [2500, 5000, 7500, 10_000, 10_010, 10_020, 10_020]
            .iter()
            .zip(1..)
            .filter_map(|(&p, i)| w.tick(p, at(i)).then_some(i))
            .collect();
        assert_eq!(calls, [5]);
        // A busy node: connections park between messages and wake for the
        // next, so the number parked swings by more than a wave: never.
        for i in 8..200 {
            let p = (i * 7919 % 10_021) as usize;
            assert!(!w.tick(p, at(i)), "tick {i}");
        }
        // More connections than at the last reclaim park and stay: once.
        assert!(!w.tick(10_020, at(200)));
        assert!(!w.tick(11_000, at(201)));
        assert!(w.tick(11_040, at(202)));
        assert!(!w.tick(11_040, at(210)));
        // A slow climb (more than an eighth of a wave per tick) waits for
        // its end; two waves a tick apart: the second waits for the gap.
        let mut w = ParkWave::new(0);
        assert!(!w.tick(2000, at(1)));
        assert!(w.tick(2000, at(2)));
        assert!(!w.tick(4000, at(3)));
        assert!(!w.tick(4000, at(4)));
        assert!(!w.tick(4000, at(5)));
        assert!(w.tick(4000, at(6)));
    }
}
