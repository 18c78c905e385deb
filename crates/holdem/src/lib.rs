//! No-limit Texas Hold'em with play chips, as a [`herald_game::Game`].
//!
//! Herald's reference game: it proves the engine can carry a complete,
//! server-authoritative card game (button and blinds, four betting rounds,
//! no-limit raising rules, side pots, showdown, timeouts, sitting out,
//! busting and rebuying) and it is what `herald bench bots --game holdem`
//! plays, as the bots of the Cubeia Firebase reports did. The rules do no
//! I/O and read no clock: the engine delivers actions and timer events one at
//! a time, so everything here is tested with the fake-clock harness of
//! `herald_game::testing`.
//!
//! - [`cards`]: cards and the deck.
//! - [`eval`]: the hand evaluator.
//! - `table`: the game itself, its state machine and messages (their format
//!   is in the crate's README).
//!
//! Register it with the engine through [`factory`].

pub mod cards;
pub mod eval;
mod table;

pub use table::Holdem;

use herald_game::{Game, GameFactory, TableParams};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The game's name in configs (`game = "holdem"`).
pub const NAME: &str = "holdem";

/// The three timing profiles of the seed's tables.
pub const TIMINGS: [&str; 3] = ["normal", "express", "super-express"];

/// A table's delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a player has to act before the table checks or folds.
    pub action: Duration,
    /// Pause between a hand's result and the next hand.
    pub hand: Duration,
    /// Pause before each new street is dealt.
    pub street: Duration,
    /// How long a busted player may rebuy before being stood up.
    pub rebuy: Duration,
}

impl Timing {
    /// The named profile: `normal`, `express` or `super-express`.
    pub fn named(name: &str) -> Option<Timing> {
        let ms = Duration::from_millis;
        match name {
            "normal" => Some(Timing {
                action: ms(15_000),
                hand: ms(3_000),
                street: ms(1_000),
                rebuy: ms(10 * 3_000).max(ms(5_000)),
            }),
            "express" => Some(Timing {
                action: ms(8_000),
                hand: ms(1_500),
                street: ms(500),
                rebuy: ms(10 * 1_500).max(ms(5_000)),
            }),
            "super-express" => Some(Timing {
                action: ms(4_000),
                hand: ms(750),
                street: ms(250),
                rebuy: ms(10 * 750).max(ms(5_000)),
            }),
            _ => None,
        }
    }
}

/// What a table plays with: stakes, buy-ins, timing, deck seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Seats at the table (2 to 10).
    pub seats: u32,
    /// Small blind, chips.
    pub small_blind: u64,
    /// Big blind, chips.
    pub big_blind: u64,
    /// Least a player may bring.
    pub min_buyin: u64,
    /// Most a player may bring, and the most a rebuy may top up to.
    pub max_buyin: u64,
    /// What a `sit` without data brings.
    pub buyin: u64,
    /// Delays.
    pub timing: Timing,
    /// The deck's seed.
    pub seed: u64,
}

impl Config {
    /// Reads a table's parameters; refuses unknown ones and bad values with
    /// a message for the operator.
    pub fn from_params(p: &TableParams) -> Result<Config, String> {
        if !(2..=10).contains(&p.seats) {
            return Err(format!("holdem tables have 2 to 10 seats, not {}", p.seats));
        }
        let mut timing = Timing::named(&p.timing).ok_or_else(|| {
            format!(
                "unknown timing {:?}: one of {}",
                p.timing,
                TIMINGS.join(", ")
            )
        })?;
        const KNOWN: [&str; 10] = [
            "small_blind",
            "big_blind",
            "min_buyin",
            "max_buyin",
            "buyin",
            "seed",
            "action_ms",
            "hand_ms",
            "street_ms",
            "rebuy_ms",
        ];
        if let Some(k) = p.params.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!(
                "unknown holdem parameter {k:?} (known: {})",
                KNOWN.join(", ")
            ));
        }
        let num = |k: &str| -> Result<Option<u64>, String> {
            match p.params.get(k) {
                None => Ok(None),
                Some(Value::Number(n)) => n
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("{k} must be a whole number >= 0")),
                Some(v) => Err(format!("{k} must be a number, not {v}")),
            }
        };
        let big_blind = num("big_blind")?.unwrap_or(10);
        let small_blind = num("small_blind")?.unwrap_or(big_blind / 2);
        if big_blind == 0 || small_blind == 0 || small_blind > big_blind {
            return Err("blinds must satisfy 0 < small_blind <= big_blind".into());
        }
        // Stacks are counted in u64; keep any sum far from overflow.
        let cap = 1u64 << 40;
        let min_buyin = num("min_buyin")?.unwrap_or(big_blind.saturating_mul(20));
        let max_buyin = num("max_buyin")?.unwrap_or(big_blind.saturating_mul(200));
        let buyin = num("buyin")?.unwrap_or(big_blind.saturating_mul(100));
        if !(min_buyin > 0 && min_buyin <= buyin && buyin <= max_buyin && max_buyin <= cap) {
            return Err(format!(
                "buy-ins must satisfy 0 < min_buyin <= buyin <= max_buyin <= {cap}"
            ));
        }
        for (k, field) in [
            ("action_ms", &mut timing.action),
            ("hand_ms", &mut timing.hand),
            ("street_ms", &mut timing.street),
            ("rebuy_ms", &mut timing.rebuy),
        ] {
            if let Some(ms) = num(k)? {
                if ms > 3_600_000 {
                    return Err(format!("{k} must be at most an hour"));
                }
                *field = Duration::from_millis(ms);
            }
        }
        if timing.action.is_zero() {
            return Err("action_ms must be above 0".into());
        }
        let seed = num("seed")?.unwrap_or_else(|| fastrand::u64(..));
        Ok(Config {
            seats: p.seats,
            small_blind,
            big_blind,
            min_buyin,
            max_buyin,
            buyin,
            timing,
            seed,
        })
    }
}

/// Makes Hold'em tables.
#[derive(Debug, Default)]
pub struct Factory;

impl GameFactory for Factory {
    fn name(&self) -> &'static str {
        NAME
    }

    fn create(&self, params: &TableParams) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(Holdem::new(Config::from_params(params)?)))
    }

    fn restore(&self, params: &TableParams, state: &[u8]) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(Holdem::restore(
            Config::from_params(params)?,
            state,
        )?))
    }
}

/// The factory to register with the engine.
pub fn factory() -> Arc<dyn GameFactory> {
    Arc::new(Factory)
}
