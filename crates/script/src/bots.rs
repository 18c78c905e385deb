//! A module's `bot` export: players for `herald bench bots --game` and
//! `herald game test`.
//!
//! A bot is fed what its player receives (its seat's snapshot, then every
//! `game` push's data) and answers with the action to send, if any. Bots
//! run in a runtime of their own (one per [`Bots`]), never in a table's
//! shard, with the module's CPU budget per call.

use crate::shard::{Budget, Shard};
use crate::{Fault, Limits, LoadError};
use bytes::Bytes;
use rquickjs::Function;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a bot is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Its seat's snapshot (after sitting or returning).
    Snapshot,
    /// A `game` push.
    Game,
}

/// The bots of one module.
#[derive(Clone)]
pub struct Bots {
    shard: Arc<Shard>,
    next: Arc<AtomicU64>,
    limits: Limits,
}

impl Bots {
    /// Loads the module at `path` for its `bot`; `Err` if it has none.
    pub fn load(path: &Path, limits: Limits) -> Result<Bots, LoadError> {
        let shown = path.display().to_string();
        let err = |reason: String| LoadError {
            path: shown.clone(),
            reason,
        };
        let source =
            std::fs::read_to_string(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        Bots::from_source(&shown, &source, limits)
    }

    /// The bots of a module given as source text.
    pub fn from_source(path: &str, source: &str, limits: Limits) -> Result<Bots, LoadError> {
        let err = |reason: String| LoadError {
            path: path.to_string(),
            reason,
        };
        let shard = Shard::load(path, source).map_err(err)?;
        let bots = Bots {
            shard: Arc::new(shard),
            next: Arc::new(AtomicU64::new(1)),
            limits,
        };
        let has: bool = bots
            .call(|_, h| h.get::<_, Function>("hasBot")?.call(()))
            .map_err(|f| err(f.to_string()))?;
        if !has {
            return Err(err("the module exports no `bot`".into()));
        }
        Ok(bots)
    }

    fn call<T>(
        &self,
        f: impl for<'js> FnOnce(&rquickjs::Ctx<'js>, &rquickjs::Object<'js>) -> rquickjs::Result<T>,
    ) -> Result<T, Fault> {
        let mut rng = 0;
        let budget = Budget {
            cpu: self.limits.cpu,
            memory: self.limits.memory,
        };
        self.shard.call(&mut rng, budget, f).0
    }

    /// A new bot for the player at `seat`.
    pub fn bot(&self, seat: u32) -> Result<Bot, Fault> {
        let h = self.next.fetch_add(1, Ordering::Relaxed);
        self.call(|_, herald| {
            herald
                .get::<_, Function>("botInit")?
                .call::<_, ()>((h, seat))
        })?;
        Ok(Bot {
            bots: self.clone(),
            handle: h,
        })
    }
}

/// One player's bot.
pub struct Bot {
    bots: Bots,
    handle: u64,
}

impl Bot {
    /// The player received `msg` (JSON text); the action to send, if any.
    pub fn on(&mut self, event: Event, msg: &[u8]) -> Result<Option<Bytes>, Fault> {
        let kind = match event {
            Event::Snapshot => "snapshot",
            Event::Game => "game",
        };
        let msg = std::str::from_utf8(msg)
            .map_err(|_| Fault::Output("a message to the bot is not JSON".into()))?
            .to_string();
        let h = self.handle;
        let out: String = self
            .bots
            .call(|_, herald| herald.get::<_, Function>("botOn")?.call((h, kind, msg)))?;
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        let h = self.handle;
        self.bots.shard.upkeep(false, |_, herald| {
            if let Ok(f) = herald.get::<_, Function>("botDrop") {
                let _: rquickjs::Result<()> = f.call((h,));
            }
        });
    }
}
