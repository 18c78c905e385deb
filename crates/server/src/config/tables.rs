//! `[[tables]]` of the TOML file: the game tables created at start-up.
//!
//! The type lives in the game engine ([`herald_game::TableConfig`]), since
//! the cluster's table registry (`herald-game-cluster`) reads it too; this
//! re-export keeps `herald_server::config::tables::TableConfig` working.

pub use herald_game::TableConfig;
