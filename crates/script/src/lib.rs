//! Game modules in JavaScript: a [`herald_game::GameFactory`] whose rules
//! are an ES module run in QuickJS (docs/games.md, decision 0014).
//!
//! A [`ScriptFactory`] loads a module file into a [`Script`] (one version
//! of the code, in one runtime per core: the *shards*, `shard.rs`) and
//! makes a [`ScriptTable`] per table: a handle into its shard plus what the
//! engine cannot keep for it (the table's generator, its timer names, its
//! tick). The engine sees an ordinary [`herald_game::Game`], so seats,
//! watchers, grace periods, timers, the lobby, durability and every
//! transport work unchanged; a module's failure is a [`Fault`], reported
//! through [`herald_game::Game::fault`], which closes the table with code
//! 100 and leaves every other table alone.
//!
//! - `shard.rs`: the runtime, the CPU budget and the memory cap per call.
//! - `table.rs`: [`ScriptTable`], effects and saves.
//! - `alloc.rs`: the counting allocator behind the memory cap.
//! - [`rng`]: the generator behind `ctx.random()`.
//! - [`bots`]: a module's `bot` export, for `herald bench bots --game` and
//!   `herald game test`.
//! - [`selfplay`] (feature `harness`): `herald game test`, a module played
//!   by its bots on the engine's fake-clock harness.
//! - `prelude.js`: the JavaScript side of the glue.

mod alloc;
pub mod bots;
pub mod rng;
#[cfg(feature = "harness")]
pub mod selfplay;
mod shard;
mod table;

pub use table::ScriptTable;

use herald_game::{Game, GameFactory, TableParams};
use shard::Shard;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// What a module's tables may use (`[[games]]` in the server's config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU time per call.
    pub cpu: Duration,
    /// Heap a table may hold.
    pub memory: usize,
    /// Bytes of one message or snapshot.
    pub max_message: usize,
    /// Bytes of a table's saved state.
    pub max_state: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            cpu: Duration::from_millis(100),
            memory: 16 << 20,
            max_message: 64 << 10,
            max_state: 1 << 20,
        }
    }
}

/// Why a table's module failed: the table is closed with code 100.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// The module threw (anything but a refusal from `act`).
    #[error("{0}")]
    Exception(String),
    /// A call ran past the CPU budget.
    #[error("a call ran longer than {0:?}")]
    Timeout(Duration),
    /// A call allocated past the table's memory cap.
    #[error("the table's memory passed its cap of {0} bytes")]
    Memory(usize),
    /// The module returned or sent something Herald cannot use (a message
    /// too large, a state that is not JSON, a value of the wrong type).
    #[error("{0}")]
    Output(String),
}

impl Fault {
    /// The label counted in `/metrics`.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Exception(_) => "exception",
            Fault::Timeout(_) => "timeout",
            Fault::Memory(_) => "memory",
            Fault::Output(_) => "output",
        }
    }
}

/// Faults counted per kind, for `/metrics` (`herald_script_faults_total`).
#[derive(Debug, Default)]
pub struct FaultCounts {
    counts: [AtomicU64; 4],
}

impl FaultCounts {
    /// The kinds, in the order [`FaultCounts::get`] answers.
    pub const KINDS: [&'static str; 4] = ["exception", "timeout", "memory", "output"];

    fn count(&self, f: &Fault) {
        let i = Self::KINDS.iter().position(|k| *k == f.kind()).unwrap_or(0);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Faults of each kind so far, in the order of [`FaultCounts::KINDS`].
    pub fn get(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed))
    }
}

/// Why a module was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("game module {path}: {reason}")]
pub struct LoadError {
    /// The module's file.
    pub path: String,
    /// What is wrong, with the line where QuickJS knows it.
    pub reason: String,
}

/// One loaded version of a module.
pub struct Script {
    name: String,
    path: String,
    version: u64,
    limits: Limits,
    shards: Vec<Arc<Shard>>,
    has_bot: bool,
    faults: Arc<FaultCounts>,
    next: AtomicU64,
}

impl Script {
    /// Loads `source` as the module `path` (used in error messages and
    /// stack traces) into `shards` runtimes.
    fn load(
        name: &str,
        path: &str,
        source: &str,
        limits: Limits,
        shards: usize,
        version: u64,
        faults: Arc<FaultCounts>,
    ) -> Result<Script, LoadError> {
        let err = |reason: String| LoadError {
            path: path.to_string(),
            reason,
        };
        let mut loaded = Vec::new();
        for _ in 0..shards.max(1) {
            loaded.push(Arc::new(Shard::load(path, source).map_err(err)?));
        }
        let mut rng = 0;
        let budget = shard::Budget {
            cpu: limits.cpu,
            memory: limits.memory,
        };
        let (has_bot, _) = loaded[0].call(&mut rng, budget, |_, h| {
            h.get::<_, rquickjs::Function>("hasBot")?.call(())
        });
        Ok(Script {
            name: name.to_string(),
            path: path.to_string(),
            version,
            limits,
            shards: loaded,
            has_bot: has_bot.unwrap_or(false),
            faults,
            next: AtomicU64::new(1),
        })
    }

    /// The game's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module's file.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Which load of the module this is (1 for the first, then one more
    /// per reload).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the module exports a `bot`.
    pub fn has_bot(&self) -> bool {
        self.has_bot
    }

    /// Its limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn shard(&self, handle: u64) -> Arc<Shard> {
        self.shards[(handle % self.shards.len() as u64) as usize].clone()
    }
}

/// The [`GameFactory`] of a module: new tables get the version loaded last;
/// tables keep the version they were created with (see [`ScriptFactory::reload`]).
pub struct ScriptFactory {
    name: &'static str,
    path: PathBuf,
    limits: Limits,
    shards: usize,
    current: RwLock<Arc<Script>>,
    faults: Arc<FaultCounts>,
}

impl ScriptFactory {
    /// Loads the module at `path` as the game `name`, checking its exports.
    /// `shards` runtimes share its tables (0: one per core).
    pub fn load(
        name: &str,
        path: &Path,
        limits: Limits,
        shards: usize,
    ) -> Result<ScriptFactory, LoadError> {
        let shards = if shards == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            shards
        };
        // A game's name lives as long as the server (GameFactory::name
        // answers &'static str); a few names per process.
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        let faults = Arc::new(FaultCounts::default());
        let script = read_and_load(name, path, limits, shards, 1, faults.clone())?;
        Ok(ScriptFactory {
            name,
            path: path.to_path_buf(),
            limits,
            shards,
            current: RwLock::new(Arc::new(script)),
            faults,
        })
    }

    /// Loads the module's file again. On success new tables get the new
    /// code and running tables finish on theirs; on failure nothing
    /// changes and the error says why.
    pub fn reload(&self) -> Result<u64, LoadError> {
        let version = self.current().version + 1;
        let script = read_and_load(
            self.name,
            &self.path,
            self.limits,
            self.shards,
            version,
            self.faults.clone(),
        )?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(script);
        tracing::info!(game = self.name, version, path = %self.path.display(), "game module reloaded");
        Ok(version)
    }

    /// The version new tables get.
    pub fn current(&self) -> Arc<Script> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Faults of this game's tables so far.
    pub fn faults(&self) -> &FaultCounts {
        &self.faults
    }

    /// A table of the current version (for the harness and the bench).
    pub fn table(&self, params: &TableParams) -> Result<ScriptTable, String> {
        ScriptTable::create(self.current(), params, rng::SplitMix::from_os().0)
    }
}

fn read_and_load(
    name: &'static str,
    path: &Path,
    limits: Limits,
    shards: usize,
    version: u64,
    faults: Arc<FaultCounts>,
) -> Result<Script, LoadError> {
    let shown = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| LoadError {
        path: shown.clone(),
        reason: format!("cannot read it: {e}"),
    })?;
    Script::load(name, &shown, &source, limits, shards, version, faults)
}

impl GameFactory for ScriptFactory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn create(&self, params: &TableParams) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(self.table(params)?))
    }

    fn restore(&self, params: &TableParams, state: &[u8]) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(ScriptTable::restore(
            self.current(),
            params,
            state,
        )?))
    }
}

/// A module loaded from source text (tests, and tools that hold the source
/// in memory): the game `name`, with `path` shown in errors.
pub fn load_source(
    name: &str,
    path: &str,
    source: &str,
    limits: Limits,
    shards: usize,
) -> Result<Arc<Script>, LoadError> {
    Ok(Arc::new(Script::load(
        name,
        path,
        source,
        limits,
        shards,
        1,
        Arc::new(FaultCounts::default()),
    )?))
}
