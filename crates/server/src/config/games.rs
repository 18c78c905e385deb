//! `[[games]]` of the TOML file: game modules in JavaScript (docs/games.md).

use herald_script::Limits;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// One game module: its name (what `[[tables]]` and `POST /api/tables`
/// say in `game`), its file, and its limits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GameModule {
    /// The game's name.
    pub name: String,
    /// The module's file (one ES module; relative to the working directory).
    pub module: PathBuf,
    /// CPU time per call, in ms (default 100).
    pub cpu_ms: Option<u64>,
    /// Heap a table may hold, in MiB (default 16).
    pub memory_mb: Option<u64>,
    /// Bytes of one message or snapshot (default 65536).
    pub max_message: Option<usize>,
    /// Bytes of a table's saved state (default 1048576).
    pub max_state: Option<usize>,
    /// Runtimes the game's tables share (default: one per core).
    pub shards: Option<usize>,
}

impl GameModule {
    /// Its limits, defaults filled in.
    pub fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            cpu: self.cpu_ms.map_or(d.cpu, Duration::from_millis),
            memory: self
                .memory_mb
                .map_or(d.memory, |m| usize::try_from(m << 20).unwrap_or(usize::MAX)),
            max_message: self.max_message.unwrap_or(d.max_message),
            max_state: self.max_state.unwrap_or(d.max_state),
        }
    }
}
