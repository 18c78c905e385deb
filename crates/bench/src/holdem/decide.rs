//! What a poker bot reads from the Hold'em events (crates/holdem/README.md,
//! "Events") and how it decides: a legal random action for a `turn`, and a
//! random think time within the table's timing.
//!
//! Why random rather than a strategy: the bots load the server like people
//! at fast tables, not win. Every decision must be legal (a refused action
//! is a bench bug, counted as such), so the choice is made from the `turn`
//! event's own limits: check only when nothing is owed, call when something
//! is, raise only between `min_raise_to` and `max_raise_to` when the event
//! offers them. Raises are usually small, so that stacks last a while and
//! hands are not all-in shoves; folds are common enough that hands end
//! before the river too. No I/O and no clock here, so the unit tests pin
//! the rules.

use serde::Deserialize;

/// An event's type (`t`); the ones a bot does not act on are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The snapshot (the `sit` reply's data).
    State,
    /// A hand starts.
    Hand,
    /// A seat is to act.
    Turn,
    /// A seat acted.
    Action,
    /// The hand ended.
    Result,
    /// A seat added chips.
    Rebuy,
    /// Any other event (`cards`, `street`, `sitout`, `sitin`, future ones).
    #[serde(other)]
    Other,
}

/// `{"seat","stack"}`, as in `result`'s `stacks` and the snapshot's `seats`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct SeatStack {
    /// The seat.
    pub seat: u32,
    /// Its chips (absent for an empty seat of a snapshot, if a game
    /// writes those).
    #[serde(default)]
    pub stack: Option<u64>,
}

/// The fields of an event that a bot uses; serde skips the rest without
/// allocating (only `stacks`/`seats` of a `result` or snapshot allocate).
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// The type.
    pub t: Kind,
    /// `turn`, `action`, `rebuy`: the seat.
    #[serde(default)]
    pub seat: Option<u32>,
    /// `hand`, `result`, `state`: the hand number.
    #[serde(default)]
    pub hand: Option<u64>,
    /// `turn`: chips owed.
    #[serde(default)]
    pub to_call: Option<u64>,
    /// `turn`: the smallest raise-to (absent: may not raise).
    #[serde(default)]
    pub min_raise_to: Option<u64>,
    /// `turn`: the largest raise-to.
    #[serde(default)]
    pub max_raise_to: Option<u64>,
    /// `turn`: the time to act before the server acts.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `action`, `rebuy`: the seat's stack after it.
    #[serde(default)]
    pub stack: Option<u64>,
    /// `action`: the timer acted.
    #[serde(default)]
    pub auto: bool,
    /// `result`: every seat's stack.
    #[serde(default)]
    pub stacks: Option<Vec<SeatStack>>,
    /// `state`: the seats (each with more fields than a bot reads).
    #[serde(default)]
    pub seats: Option<Vec<SeatStack>>,
    /// `state`: the seat to act, if a hand is in progress (its limits are
    /// `to_call`, `min_raise_to`, `max_raise_to` as in a `turn`).
    #[serde(default, rename = "turn")]
    pub turn_seat: Option<u32>,
    /// `state`: the street, `idle` between hands (only a snapshot carries
    /// it as a field a bot reads; `street` events name it too, but are
    /// `Other` and seldom: the allocation does not matter).
    #[serde(default)]
    pub street: Option<String>,
}

/// Parses one event (game data is JSON text).
pub fn parse(data: &[u8]) -> Result<Event, serde_json::Error> {
    serde_json::from_slice(data)
}

impl Event {
    /// The stack of `seat` in a `result` (`stacks`) or snapshot (`seats`).
    pub fn stack_of(&self, seat: u32) -> Option<u64> {
        self.stacks
            .iter()
            .chain(self.seats.iter())
            .flatten()
            .find(|s| s.seat == seat)
            .and_then(|s| s.stack)
    }

    /// A snapshot's hand: its number and whether it is in progress (the
    /// street is not `idle`); `None` when this is not a snapshot with a
    /// hand number.
    pub fn snapshot_hand(&self) -> Option<(u64, bool)> {
        if self.t != Kind::State {
            return None;
        }
        let hand = self.hand?;
        Some((hand, self.street.as_deref().is_some_and(|s| s != "idle")))
    }

    /// The turn a snapshot says `seat` has (a player sitting back into a
    /// hand where it is to act hears no `turn` event: the snapshot is it).
    pub fn snapshot_turn(&self, seat: u32) -> Option<Turn> {
        if self.t != Kind::State || self.turn_seat != Some(seat) {
            return None;
        }
        Some(Turn {
            seat,
            to_call: self.to_call?,
            raise: match (self.min_raise_to, self.max_raise_to) {
                (Some(min), Some(max)) => Some((min, max.max(min))),
                (Some(min), None) => Some((min, min)),
                _ => None,
            },
            timeout_ms: 0,
        })
    }

    /// The turn's limits, when this is a well-formed `turn`.
    pub fn turn(&self) -> Option<Turn> {
        if self.t != Kind::Turn {
            return None;
        }
        Some(Turn {
            seat: self.seat?,
            to_call: self.to_call?,
            raise: match (self.min_raise_to, self.max_raise_to) {
                (Some(min), Some(max)) => Some((min, max.max(min))),
                (Some(min), None) => Some((min, min)),
                _ => None,
            },
            timeout_ms: self.timeout_ms.unwrap_or(0),
        })
    }
}

/// A `turn` event's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// The seat to act.
    pub seat: u32,
    /// Chips owed.
    pub to_call: u64,
    /// (min_raise_to, max_raise_to), when raising is allowed.
    pub raise: Option<(u64, u64)>,
    /// The time to act (0: not given).
    pub timeout_ms: u64,
}

/// A bot's answer to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// `{"a":"fold"}`.
    Fold,
    /// `{"a":"check"}`.
    Check,
    /// `{"a":"call"}`.
    Call,
    /// `{"a":"raise","to":N}`.
    Raise(u64),
}

/// A legal random decision for `turn`: with nothing owed, check (70%) or
/// raise (30%, when allowed); facing a bet, fold (25%), call (60%) or raise
/// (15%, when allowed). A raise is to within 3× the minimum in 9 of 10
/// cases, anywhere up to the maximum otherwise.
pub fn decide(turn: &Turn, rng: &mut fastrand::Rng) -> Decision {
    let roll = rng.u32(0..100);
    let raise = |rng: &mut fastrand::Rng| {
        turn.raise.map(|(min, max)| {
            let top = if rng.u32(0..10) == 0 {
                max
            } else {
                max.min(min.saturating_mul(3))
            };
            Decision::Raise(rng.u64(min..=top.max(min)))
        })
    };
    if turn.to_call == 0 {
        if roll < 30 {
            if let Some(d) = raise(rng) {
                return d;
            }
        }
        Decision::Check
    } else if roll < 25 {
        Decision::Fold
    } else if roll < 85 {
        Decision::Call
    } else {
        raise(rng).unwrap_or(Decision::Call)
    }
}

/// Appends the `act` data of `d` (JSON text).
pub fn write_decision(d: Decision, out: &mut Vec<u8>) {
    match d {
        Decision::Fold => out.extend_from_slice(br#"{"a":"fold"}"#),
        Decision::Check => out.extend_from_slice(br#"{"a":"check"}"#),
        Decision::Call => out.extend_from_slice(br#"{"a":"call"}"#),
        Decision::Raise(to) => {
            out.extend_from_slice(br#"{"a":"raise","to":"#);
            crate::herald_wire::write_u64(out, to);
            out.push(b'}');
        }
    }
}

/// Appends the `act` data of a rebuy of `amount` chips.
pub fn write_rebuy(amount: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"a":"rebuy","amount":"#);
    crate::herald_wire::write_u64(out, amount);
    out.push(b'}');
}

/// A think time in ms: uniform in `0..think_ms`, capped at 3/4 of the
/// turn's `timeout_ms` (when given) so the answer arrives in time even
/// with some network and server delay.
pub fn think_ms(think_ms: u64, timeout_ms: u64, rng: &mut fastrand::Rng) -> u64 {
    let cap = if timeout_ms == 0 {
        think_ms
    } else {
        think_ms.min(timeout_ms * 3 / 4)
    };
    if cap == 0 {
        0
    } else {
        rng.u64(0..cap)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn turn(json: &str) -> Turn {
        parse(json.as_bytes()).unwrap().turn().unwrap()
    }

    /// Whether `d` is legal for `t`, by the README's rules.
    fn legal(t: &Turn, d: Decision) -> bool {
        match d {
            Decision::Fold | Decision::Call => t.to_call > 0,
            Decision::Check => t.to_call == 0,
            Decision::Raise(to) => t.raise.is_some_and(|(min, max)| min <= to && to <= max),
        }
    }

    #[test]
    fn reads_a_turn_event() {
        let t = turn(
            r#"{"t":"turn","seat":2,"to_call":10,"min_raise_to":20,"max_raise_to":990,"pot":15,"timeout_ms":4000}"#,
        );
        assert_eq!(
            t,
            Turn {
                seat: 2,
                to_call: 10,
                raise: Some((20, 990)),
                timeout_ms: 4000
            }
        );
        let t = turn(r#"{"t":"turn","seat":0,"to_call":50,"pot":115,"timeout_ms":800}"#);
        assert_eq!(t.raise, None);
        // Not a turn, or one without its limits: nothing to act on.
        let e = parse(br#"{"t":"action","seat":1,"a":"call","amount":5,"bet":10,"stack":990,"pot":20,"auto":false}"#).unwrap();
        assert_eq!(
            (e.t, e.turn(), e.stack, e.auto),
            (Kind::Action, None, Some(990), false)
        );
        assert_eq!(parse(br#"{"t":"turn","seat":1}"#).unwrap().turn(), None);
        assert_eq!(
            parse(br#"{"t":"street","street":"flop","board":["Ah","Kd","2c"],"pot":40}"#)
                .unwrap()
                .t,
            Kind::Other
        );
        assert!(parse(b"{\"seat\":1}").is_err());
        assert!(parse(b"not json").is_err());
    }

    #[test]
    fn reads_a_snapshots_hand_and_turn() {
        let ev = parse(
            br#"{"t":"state","hand":7,"street":"flop","turn":2,"to_call":20,"min_raise_to":40,"max_raise_to":900,"seats":[]}"#,
        )
        .unwrap();
        assert_eq!(ev.snapshot_hand(), Some((7, true)));
        let t = ev.snapshot_turn(2).unwrap();
        assert_eq!((t.seat, t.to_call, t.raise), (2, 20, Some((40, 900))));
        assert!(ev.snapshot_turn(1).is_none());
        let idle = parse(br#"{"t":"state","hand":7,"street":"idle","turn":null}"#).unwrap();
        assert_eq!(idle.snapshot_hand(), Some((7, false)));
        assert!(idle.snapshot_turn(0).is_none());
        assert!(parse(br#"{"t":"hand","hand":8}"#)
            .unwrap()
            .snapshot_hand()
            .is_none());
    }

    #[test]
    fn reads_stacks_from_results_and_snapshots() {
        let r = parse(br#"{"t":"result","hand":7,"board":[],"pots":[{"amount":30,"winners":[1],"rank":null}],"shown":[],"returned":{"seat":1,"amount":10},"stacks":[{"seat":0,"stack":0},{"seat":1,"stack":1020}]}"#).unwrap();
        assert_eq!((r.t, r.hand), (Kind::Result, Some(7)));
        assert_eq!(
            (r.stack_of(0), r.stack_of(1), r.stack_of(2)),
            (Some(0), Some(1020), None)
        );
        let s = parse(br#"{"t":"state","hand":0,"street":"idle","button":null,"sb":5,"bb":10,"board":[],"pot":0,"seats":[{"seat":3,"user":"","stack":1000,"bet":0,"folded":false,"all_in":false,"sitting_out":false,"in_hand":false}],"turn":null,"to_call":0}"#).unwrap();
        assert_eq!((s.t, s.stack_of(3)), (Kind::State, Some(1000)));
    }

    #[test]
    fn random_decisions_are_always_legal() {
        let mut rng = fastrand::Rng::with_seed(7);
        let turns = [
            turn(
                r#"{"t":"turn","seat":0,"to_call":0,"min_raise_to":10,"max_raise_to":1000,"timeout_ms":1}"#,
            ),
            turn(r#"{"t":"turn","seat":0,"to_call":0,"timeout_ms":1}"#),
            turn(
                r#"{"t":"turn","seat":0,"to_call":5,"min_raise_to":20,"max_raise_to":20,"timeout_ms":1}"#,
            ),
            turn(r#"{"t":"turn","seat":0,"to_call":500,"timeout_ms":1}"#),
            turn(
                r#"{"t":"turn","seat":0,"to_call":10,"min_raise_to":20,"max_raise_to":35,"timeout_ms":1}"#,
            ),
            // A maximum below the minimum (never sent): still within both.
            turn(
                r#"{"t":"turn","seat":0,"to_call":10,"min_raise_to":40,"max_raise_to":30,"timeout_ms":1}"#,
            ),
        ];
        for t in &turns {
            let mut seen = [false; 4];
            for _ in 0..2000 {
                let d = decide(t, &mut rng);
                assert!(
                    legal(t, d) || matches!(d, Decision::Raise(40)),
                    "{d:?} for {t:?}"
                );
                seen[match d {
                    Decision::Fold => 0,
                    Decision::Check => 1,
                    Decision::Call => 2,
                    Decision::Raise(_) => 3,
                }] = true;
            }
            // Every legal kind of answer comes up.
            assert_eq!(seen[1], t.to_call == 0, "{t:?}");
            assert_eq!(seen[0] && seen[2], t.to_call > 0, "{t:?}");
            assert_eq!(seen[3], t.raise.is_some(), "{t:?}");
        }
    }

    #[test]
    fn decisions_are_json() {
        for (d, want) in [
            (Decision::Fold, r#"{"a":"fold"}"#),
            (Decision::Check, r#"{"a":"check"}"#),
            (Decision::Call, r#"{"a":"call"}"#),
            (Decision::Raise(120), r#"{"a":"raise","to":120}"#),
        ] {
            let mut out = Vec::new();
            write_decision(d, &mut out);
            assert_eq!(out, want.as_bytes());
        }
        let mut out = Vec::new();
        write_rebuy(1000, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (v["a"].as_str(), v["amount"].as_u64()),
            (Some("rebuy"), Some(1000))
        );
    }

    #[test]
    fn think_time_stays_below_the_timeout() {
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..1000 {
            assert!(think_ms(500, 4000, &mut rng) < 500);
            assert!(think_ms(500, 400, &mut rng) < 300);
            assert!(think_ms(500, 0, &mut rng) < 500);
        }
        assert_eq!(think_ms(0, 4000, &mut rng), 0);
        assert_eq!(think_ms(500, 1, &mut rng), 0);
    }
}
