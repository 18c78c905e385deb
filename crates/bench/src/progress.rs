//! A one-line progress display on stderr for runs longer than a few seconds.
//!
//! On a terminal the line is redrawn in place once a second; when stderr is
//! a file or a pipe (CI logs) a plain line is written every ten seconds
//! instead, so logs stay readable. Nothing at all for the first three
//! seconds, so short runs and tests stay quiet. Stdout is left alone: it
//! carries the results.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// The display.
pub struct Progress {
    enabled: bool,
    tty: bool,
    start: Instant,
    next: Instant,
    shown: bool,
}

impl Progress {
    /// A display that starts showing three seconds after `start`
    /// (never when `quiet`).
    pub fn new(quiet: bool, start: Instant) -> Progress {
        Progress {
            enabled: !quiet,
            tty: std::io::stderr().is_terminal(),
            start,
            next: start + Duration::from_secs(3),
            shown: false,
        }
    }

    /// Shows `text()` if an update is due; returns when the next one is.
    pub fn tick(&mut self, now: Instant, text: impl FnOnce() -> String) -> Instant {
        if !self.enabled {
            return now + Duration::from_secs(3600);
        }
        if now >= self.next {
            let line = text();
            let mut err = std::io::stderr().lock();
            if self.tty {
                let _ = write!(err, "\r\x1b[K{line}");
                self.shown = true;
                self.next = now + Duration::from_secs(1);
            } else {
                let _ = writeln!(err, "{line}");
                self.next = now + Duration::from_secs(10);
            }
            let _ = err.flush();
        }
        self.next
    }

    /// Erases the line (before printing results, and at the end).
    pub fn clear(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.shown = false;
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self, now: Instant) -> f64 {
        (now - self.start).as_secs_f64()
    }
}
