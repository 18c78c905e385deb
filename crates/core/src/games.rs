//! The contract between a connection's session and a game engine.
//!
//! The session is shared by every transport, so it is where game commands
//! (`lobby`, `sit`, `watch`, `stand`, `act`, ...) arrive whatever carried
//! them. It hands them to the node's [`Games`] and does nothing else with
//! them: the engine (crate `herald-game`) answers through the client's
//! outbox, like the broker's completions do. Keeping only this trait here
//! keeps the core free of any runtime and of game logic; a node without an
//! engine answers every game command with error 111.
//!
//! Contract for implementations:
//! - [`Games::command`] returns at once (no blocking, no waiting on a
//!   table): the answer may come later, but every command gets exactly one
//!   reply or error with its id (none on success when the id is 0).
//! - Replies and pushes for one client from one table leave in the order the
//!   table produced them.
//! - [`Games::gone`] is called once, when the connection of a client that
//!   sent at least one game command ends; afterwards nothing is sent to it.

use crate::client::Client;
use herald_proto::Command;
use std::sync::Arc;

/// A game engine as sessions see it.
pub trait Games: Send + Sync + std::fmt::Debug {
    /// Handles one game command of a connected client (`cmd` is one of
    /// the game commands; [`is_game_command`] tells which).
    fn command(&self, client: &Arc<Client>, id: u32, cmd: Command);

    /// The client's connection ended: its seats are kept for the grace
    /// period, its watching and lobby subscriptions end.
    fn gone(&self, client: &Arc<Client>);
}

/// Whether `cmd` is a game command, handled by [`Games`].
pub fn is_game_command(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Lobby { .. }
            | Command::LobbyOff { .. }
            | Command::Sit { .. }
            | Command::Watch { .. }
            | Command::Stand { .. }
            | Command::Act { .. }
    )
}
