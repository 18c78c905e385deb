//! What a table is made from: [`TableSpec`] (the engine's) and
//! [`TableConfig`] (as users write it). Its own module so that everything
//! that makes tables (the engine, `play`, the cluster's registry) shares it
//! without depending on the engine itself.

use serde_json::{Map, Value};

/// What a table is created from (the TOML file's `[[tables]]` or
/// `POST /api/tables`).
#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    /// The game's name (a registered factory).
    pub game: String,
    /// Number of seats.
    pub seats: u32,
    /// Timing profile, interpreted by the game.
    pub timing: String,
    /// Lobby path; default `{game}/{seats}-seat/{timing}`.
    pub path: Option<String>,
    /// Everything else, for the game.
    pub params: Map<String, Value>,
}

/// `count` tables alike, as written by users: one `[[tables]]` entry of the
/// server's TOML file, or the body of `POST /api/tables` (the server and
/// the cluster's table registry both read it, hence here).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct TableConfig {
    /// The game's name.
    pub game: String,
    /// How many such tables (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// Seats per table.
    pub seats: u32,
    /// Timing profile (default `normal`).
    #[serde(default = "normal")]
    pub timing: String,
    /// Lobby path (default `GAME/SEATS-seat/TIMING`).
    #[serde(default)]
    pub path: Option<String>,
    /// Every other key, for the game.
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

fn one() -> u32 {
    1
}

fn normal() -> String {
    "normal".into()
}

impl TableConfig {
    /// The engine's spec for one of these tables.
    pub fn spec(&self) -> TableSpec {
        TableSpec {
            game: self.game.clone(),
            seats: self.seats,
            timing: self.timing.clone(),
            path: self.path.clone(),
            params: self.params.clone(),
        }
    }
}
