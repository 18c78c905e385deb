//! Wall-clock time as Unix nanoseconds.
//!
//! The shootout protocol carries the send time inside the message as Unix
//! nanoseconds (that is what the reference client writes), and worker
//! processes must agree on one clock with their coordinator, so the bench
//! measures latency on the system's real-time clock rather than on
//! `Instant`, which cannot cross a process boundary. On Linux this is a vDSO
//! call of a few tens of nanoseconds; it is read once per batch of received
//! messages, not once per message.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (0 if the clock is set before 1970).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Seconds since the Unix epoch, as a float (for report timestamps).
pub fn now_secs_f64() -> f64 {
    now_ns() as f64 / 1e9
}
