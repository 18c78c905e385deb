//! `[[tables]]` of the TOML file: the game tables created at start-up.

use serde::Deserialize;

/// One `[[tables]]` entry of the TOML file: `count` tables alike.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    pub params: serde_json::Map<String, serde_json::Value>,
}

fn one() -> u32 {
    1
}

fn normal() -> String {
    "normal".into()
}

impl TableConfig {
    /// The engine's spec for one of these tables.
    pub fn spec(&self) -> herald_game::TableSpec {
        herald_game::TableSpec {
            game: self.game.clone(),
            seats: self.seats,
            timing: self.timing.clone(),
            path: self.path.clone(),
            params: self.params.clone(),
        }
    }
}
