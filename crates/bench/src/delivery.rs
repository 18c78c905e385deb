//! Delivery checking for `fanout`: per subscriber and publisher, which
//! sequence numbers arrived (lost, duplicated, out of order), what came
//! through recovery, and the latency of live deliveries.
//!
//! Kept apart from the clients so the clients' event callbacks can borrow
//! it while the clients are borrowed; nothing here allocates per delivery.

use herald_proto::Encoding;

use crate::fanout::FanoutSummary;
use crate::hclients::Event;
use crate::herald_wire;
use crate::latency::Latency;

/// Per subscriber and publisher: the highest sequence seen and which of the
/// 64 before it arrived (bit i: `last - 1 - i`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SeqTrack {
    last: u64,
    window: u64,
}

/// What a delivery was.
pub(crate) enum Seen {
    InOrder,
    Gap,
    Late,
    Duplicate,
}

impl SeqTrack {
    pub(crate) fn see(&mut self, seq: u64) -> Seen {
        if seq > self.last {
            let shift = seq - self.last;
            self.window = if shift >= 64 { 0 } else { self.window << shift };
            if self.last > 0 && shift <= 64 {
                self.window |= 1 << (shift - 1);
            }
            let gap = shift > 1;
            self.last = seq;
            if gap {
                Seen::Gap
            } else {
                Seen::InOrder
            }
        } else if seq == self.last {
            Seen::Duplicate
        } else {
            let d = self.last - seq;
            if d > 64 {
                return Seen::Late;
            }
            let bit = 1u64 << (d - 1);
            if self.window & bit != 0 {
                Seen::Duplicate
            } else {
                self.window |= bit;
                Seen::Late
            }
        }
    }
}

/// Per-subscriber counters (the `--verify` table).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SubCounts {
    pub(crate) delivered: u64,
    pub(crate) duplicated: u64,
    pub(crate) out_of_order: u64,
    pub(crate) recovered: u64,
    pub(crate) failed_recoveries: u64,
}

/// Everything that checks deliveries, apart from the clients so that the
/// clients' event callbacks can borrow it.
pub(crate) struct Checker {
    pub(crate) enc: Encoding,
    /// Deliveries are Pusher frames: the stamp is in their `data` string.
    pub(crate) pusher: bool,
    pub(crate) publishers: usize,
    /// `[s * P + p]`.
    pub(crate) tracks: Vec<SeqTrack>,
    pub(crate) subs: Vec<SubCounts>,
    pub(crate) sum: FanoutSummary,
    pub(crate) hist: Latency,
    pub(crate) interval_hist: Latency,
    pub(crate) interval_sent: u64,
    pub(crate) interval_delivered: u64,
    pub(crate) api_answers: u64,
}

impl Checker {
    pub(crate) fn on_sub_event(&mut self, sub: usize, ev: Event<'_>, now_ns: i64) {
        match ev {
            Event::Pub {
                data,
                recovered,
                resumed_ns,
                ..
            } => self.on_pub(sub, data, recovered, resumed_ns, now_ns),
            Event::Unrecovered => {
                self.sum.failed_recoveries += 1;
                if let Some(s) = self.subs.get_mut(sub) {
                    s.failed_recoveries += 1;
                }
            }
            Event::Error { code, .. } => self.error(code),
            Event::Reply { .. } | Event::Other { .. } => {}
            // Only lenient client sets report it; subscribers are not lenient.
            Event::Unreadable => self.error(0),
        }
    }

    pub(crate) fn error(&mut self, code: u16) {
        self.sum.errors += 1;
        self.sum.first_error_code.get_or_insert(code);
    }

    pub(crate) fn on_pub(
        &mut self,
        sub: usize,
        data: &[u8],
        recovered: bool,
        resumed_ns: i64,
        now_ns: i64,
    ) {
        let stamp = if self.pusher {
            herald_wire::read_pusher_stamp(data)
        } else {
            herald_wire::read_stamp(self.enc, data)
        };
        let Some(stamp) = stamp else {
            self.sum.unreadable += 1;
            return;
        };
        let slot = sub * self.publishers + stamp.publisher as usize;
        let (Some(track), Some(counts)) = (self.tracks.get_mut(slot), self.subs.get_mut(sub))
        else {
            self.sum.unreadable += 1;
            return;
        };
        match track.see(stamp.seq) {
            Seen::Duplicate => {
                self.sum.duplicated += 1;
                counts.duplicated += 1;
                return;
            }
            Seen::Late => {
                self.sum.out_of_order += 1;
                counts.out_of_order += 1;
            }
            Seen::InOrder | Seen::Gap => {}
        }
        counts.delivered += 1;
        self.sum.delivered += 1;
        self.interval_delivered += 1;
        if recovered || (resumed_ns != 0 && stamp.time_ns < resumed_ns) {
            counts.recovered += 1;
            self.sum.recovered += 1;
        } else {
            self.hist.record_ns(now_ns - stamp.time_ns);
            self.interval_hist.record_ns(now_ns - stamp.time_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_tracking() {
        let mut t = SeqTrack::default();
        assert!(matches!(t.see(1), Seen::InOrder));
        assert!(matches!(t.see(2), Seen::InOrder));
        assert!(matches!(t.see(2), Seen::Duplicate));
        assert!(matches!(t.see(5), Seen::Gap));
        assert!(matches!(t.see(4), Seen::Late));
        assert!(matches!(t.see(4), Seen::Duplicate));
        assert!(matches!(t.see(3), Seen::Late));
        assert!(matches!(t.see(1), Seen::Duplicate));
        assert!(matches!(t.see(200), Seen::Gap));
        assert!(matches!(t.see(100), Seen::Late));
        assert!(matches!(t.see(199), Seen::Late));
        assert!(matches!(t.see(199), Seen::Duplicate));
    }
}
