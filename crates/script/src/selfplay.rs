//! `herald game test MODULE`: a module played headless by its own bots on
//! the engine's fake-clock harness (`herald_game::testing::Harness`), the
//! way the server would run it, with no socket and no wall clock.
//!
//! Each table seats a bot in every seat, then loops: every message the
//! table sent since the last turn goes to the bots that would have received
//! it (a seat's own, the table's, the players'); the actions they return
//! are played in seat order; when no bot has anything to do the next timer
//! fires (the clock jumps to it). Halfway through, the table is saved and
//! restored (what a node taking it over does, decision 0009) and the state
//! saved again right after must be the same. The run stops at `actions`
//! actions per table, or when nothing is left to happen. Any fault of the
//! module (or of a bot) is reported and fails the run.

use crate::bots::{Bot, Bots, Event};
use crate::{Script, ScriptTable};
use herald_game::testing::{Harness, To};
use herald_game::TableParams;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What to play.
#[derive(Debug, Clone)]
pub struct Options {
    /// Tables to play, one after the other.
    pub tables: u32,
    /// Seats per table (each gets a bot).
    pub seats: u32,
    /// Actions per table at most.
    pub actions: u64,
    /// The first table's generator seed (table `i` gets `seed + i`).
    pub seed: u64,
    /// Table parameters (`params` of `created`).
    pub params: Map<String, Value>,
}

/// What one table did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableReport {
    /// Actions the bots sent.
    pub actions: u64,
    /// Of those, refused by the game (118).
    pub refused: u64,
    /// Timers fired.
    pub timers: u64,
    /// Hands reported finished.
    pub hands: u64,
    /// Messages the table sent.
    pub messages: u64,
    /// Seats the game stood up.
    pub unseated: u64,
    /// Whether the mid-game save and restore round-tripped.
    pub restored: bool,
    /// The module's or a bot's fault, if any: the run fails.
    pub fault: Option<String>,
}

/// Plays `opts.tables` tables of `script` with `bots`.
pub fn run(script: &Arc<Script>, bots: &Bots, opts: &Options) -> Vec<TableReport> {
    (0..opts.tables)
        .map(|i| play(script, bots, opts, u64::from(i) + 1))
        .collect()
}

fn play(script: &Arc<Script>, bots: &Bots, opts: &Options, id: u64) -> TableReport {
    let mut r = TableReport::default();
    let params = TableParams {
        id,
        seats: opts.seats,
        timing: "normal".into(),
        params: opts.params.clone(),
    };
    let table = match ScriptTable::create(script.clone(), &params, opts.seed.wrapping_add(id)) {
        Ok(t) => t,
        Err(e) => {
            r.fault = Some(format!("created: {e}"));
            return r;
        }
    };
    let mut h = Harness::new(Box::new(table));
    let mut players: Vec<(u32, Bot)> = Vec::new();
    let mut queue: Vec<(u32, bytes::Bytes)> = Vec::new();
    for seat in 0..opts.seats {
        if let Err(e) = h.sit(seat, &format!("bot{seat}"), b"") {
            r.fault = h
                .fault
                .clone()
                .or(Some(format!("bot{seat} could not sit: {e}")));
            return r;
        }
        let mut bot = match bots.bot(seat) {
            Ok(b) => b,
            Err(f) => {
                r.fault = Some(format!("bot.init: {f}"));
                return r;
            }
        };
        let view = h.snapshot(Some(seat));
        match bot.on(Event::Snapshot, &view) {
            Ok(Some(a)) => queue.push((seat, a)),
            Ok(None) => {}
            Err(f) => {
                r.fault = Some(format!("bot.on: {f}"));
                return r;
            }
        }
        players.push((seat, bot));
    }
    let mut seen = 0;
    let halfway = opts.actions / 2;
    loop {
        if let Some(f) = &h.fault {
            r.fault = Some(f.clone());
            break;
        }
        // Deliver what the table sent since the last turn.
        for (to, msg) in h.sent[seen..].iter() {
            r.messages += 1;
            for (seat, bot) in players.iter_mut() {
                let gets = match to {
                    To::Seat(s) => s == seat,
                    To::Table | To::Players => true,
                    To::Watchers => false,
                };
                if !gets || !h.seats().contains_key(seat) {
                    continue;
                }
                match bot.on(Event::Game, msg) {
                    Ok(Some(a)) => queue.push((*seat, a)),
                    Ok(None) => {}
                    Err(f) => {
                        r.fault = Some(format!("bot {seat}: {f}"));
                        return r;
                    }
                }
            }
        }
        seen = h.sent.len();
        if r.actions >= opts.actions {
            break;
        }
        if queue.is_empty() {
            if !h.fire_next() {
                break;
            }
            r.timers += 1;
            continue;
        }
        queue.sort_by_key(|(s, _)| *s);
        for (seat, action) in std::mem::take(&mut queue) {
            if !h.seats().contains_key(&seat) {
                continue;
            }
            r.actions += 1;
            if h.act(seat, &action).is_err() && h.fault.is_none() {
                r.refused += 1;
            }
            if r.actions == halfway && !r.restored {
                match round_trip(script, &params, &mut h) {
                    Ok(()) => r.restored = true,
                    Err(e) => {
                        r.fault = Some(e);
                        return r;
                    }
                }
            }
        }
    }
    r.hands = h.hands;
    r.unseated = h.unseated.len() as u64;
    r
}

/// Saves the table, puts a game restored from the save in its place, and
/// checks that saving again gives the same state.
fn round_trip(script: &Arc<Script>, params: &TableParams, h: &mut Harness) -> Result<(), String> {
    let before = h.save().ok_or_else(|| {
        h.fault
            .clone()
            .unwrap_or_else(|| "the table cannot be saved".into())
    })?;
    let back = ScriptTable::restore(script.clone(), params, &before)?;
    h.replace_game(Box::new(back));
    let after = h.save().ok_or("the restored table cannot be saved")?;
    if before != after {
        return Err(format!(
            "the state restored differs from the state saved: {} vs {}",
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        ));
    }
    Ok(())
}
