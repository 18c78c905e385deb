//! [`ScriptTable`]: one table of a module, as the engine's [`Game`].
//!
//! The module's state lives in its shard (the prelude's `Map`, keyed by the
//! table's handle); what lives here is what the engine cannot keep for a
//! module: the table's generator, the names of its pending timers (the
//! engine's timers have `u64` keys, a module's have names), the period of
//! its tick, the bytes its calls left allocated, and its fault. Every call
//! turns the effects the prelude recorded into the engine's [`Ctx`], after
//! checking them: a message larger than `max_message`, an attribute that
//! is not JSON, too many timers, are faults like an exception.

use crate::shard::{Budget, Shard};
use crate::{Fault, Script};
use bytes::Bytes;
use herald_game::{ActionError, Ctx, Game, Seat, TableParams};
use rquickjs::{Array, Function, Object, Value};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The engine's timer key of the tick (`ctx.every`); named timers get 1…
const TICK: u64 = 0;
/// Timers a table may have pending at once.
const MAX_TIMERS: usize = 1024;
/// Layout version of a saved scripted table.
const SAVE_VERSION: u32 = 1;

/// What [`Game::save`] writes: the module's state as JSON, the generator,
/// the timer names and the tick.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved<'a> {
    v: u32,
    #[serde(borrow)]
    state: &'a RawValue,
    /// The generator's state, in hex (a JSON number would lose bits).
    rng: String,
    timers: BTreeMap<String, u64>,
    next: u64,
    every: Option<u64>,
}

/// See the module's doc.
pub struct ScriptTable {
    script: Arc<Script>,
    shard: Arc<Shard>,
    handle: u64,
    id: u64,
    seats: u32,
    rng: Cell<u64>,
    names: BTreeMap<String, u64>,
    keys: BTreeMap<u64, String>,
    next_key: u64,
    every: Option<u64>,
    /// Bytes this table's calls left allocated.
    charge: Cell<i64>,
    fault: RefCell<Option<Fault>>,
    /// Effects of `created`, run by the factory (so that a module refusing
    /// the parameters is an error for the operator, not a failed table),
    /// applied when the engine calls [`Game::created`].
    pending: Vec<Effect>,
}

/// One effect as the prelude recorded it.
enum Effect {
    Send(Seat, Bytes),
    Table(Bytes),
    Players(Bytes),
    Watchers(Bytes),
    SetTimer(String, u64),
    CancelTimer(String),
    Every(u64),
    Attr(String, serde_json::Value),
    HandEnded,
    Unseat(Seat, String),
}

impl ScriptTable {
    fn new(script: Arc<Script>, params: &TableParams, seed: u64) -> ScriptTable {
        let handle = script.next.fetch_add(1, Ordering::Relaxed);
        ScriptTable {
            shard: script.shard(handle),
            script,
            handle,
            id: params.id,
            seats: params.seats,
            rng: Cell::new(seed),
            names: BTreeMap::new(),
            keys: BTreeMap::new(),
            next_key: 1,
            every: None,
            charge: Cell::new(0),
            fault: RefCell::new(None),
            pending: Vec::new(),
        }
    }

    /// A new table of `script`, its generator seeded with `seed`: calls the
    /// module's `created`. `Err`: the module failed on these parameters.
    pub fn create(script: Arc<Script>, params: &TableParams, seed: u64) -> Result<Self, String> {
        let mut t = ScriptTable::new(script, params, seed);
        let info = serde_json::json!({
            "id": params.id,
            "seats": params.seats,
            "timing": params.timing,
            "params": params.params,
        })
        .to_string();
        let h = t.handle;
        let fx = t.run(|cx, herald| {
            let info = cx.json_parse(info)?;
            read_fx(herald.get::<_, Function>("create")?.call((h, info))?)
        });
        match fx.and_then(|fx| t.effects(&fx)) {
            Ok(effects) => {
                t.pending = effects;
                Ok(t)
            }
            Err(f) => {
                t.forget();
                Err(format!("{} ({})", f, t.script.path()))
            }
        }
    }

    /// A table of `script` from what [`Game::save`] wrote (outside data:
    /// anything malformed is an `Err`).
    pub fn restore(
        script: Arc<Script>,
        params: &TableParams,
        saved: &[u8],
    ) -> Result<Self, String> {
        let s: Saved =
            serde_json::from_slice(saved).map_err(|e| format!("malformed scripted save: {e}"))?;
        if s.v != SAVE_VERSION {
            return Err(format!(
                "scripted save version {} (this server reads {SAVE_VERSION})",
                s.v
            ));
        }
        let rng = u64::from_str_radix(&s.rng, 16).map_err(|e| format!("malformed rng: {e}"))?;
        let mut t = ScriptTable::new(script, params, rng);
        let keys: BTreeMap<u64, String> = s.timers.iter().map(|(n, k)| (*k, n.clone())).collect();
        if keys.len() != s.timers.len()
            || keys.contains_key(&TICK)
            || s.next <= keys.keys().max().copied().unwrap_or(0)
        {
            return Err("malformed scripted save: timer keys".into());
        }
        (t.names, t.keys, t.next_key, t.every) = (s.timers.clone(), keys, s.next, s.every);
        let (h, state) = (t.handle, s.state.get().to_string());
        let r = t.run(|_, herald| {
            herald
                .get::<_, Function>("restore")?
                .call::<_, ()>((h, state))
        });
        if let Err(f) = r {
            t.forget();
            return Err(format!("cannot restore the table: {f}"));
        }
        Ok(t)
    }

    /// The table's fault, if it failed.
    pub fn failure(&self) -> Option<Fault> {
        self.fault.borrow().clone()
    }

    /// Bytes the table's calls left allocated in its shard.
    pub fn charge(&self) -> i64 {
        self.charge.get()
    }

    /// Runs one call into the module under the table's budget, charging
    /// what it left allocated.
    fn run<T>(
        &self,
        f: impl for<'js> FnOnce(&rquickjs::Ctx<'js>, &Object<'js>) -> rquickjs::Result<T>,
    ) -> Result<T, Fault> {
        if let Some(f) = self.fault.borrow().clone() {
            return Err(f);
        }
        let limits = self.script.limits;
        let left = (limits.memory as i64 - self.charge.get()).max(0) as usize;
        let mut rng = self.rng.get();
        let budget = Budget {
            cpu: limits.cpu,
            memory: left,
        };
        let (r, delta) = self.shard.call(&mut rng, budget, f);
        self.rng.set(rng);
        self.charge.set((self.charge.get() + delta).max(0));
        r
    }

    /// Records the fault (once), logs and counts it, and frees the table's
    /// state in its shard: the engine closes the table.
    fn fail(&self, f: Fault) {
        if self.fault.borrow().is_some() {
            return;
        }
        tracing::error!(
            game = self.script.name(),
            module = self.script.path(),
            version = self.script.version(),
            table = self.id,
            kind = f.kind(),
            "game module failed: {f}"
        );
        self.script.faults.count(&f);
        *self.fault.borrow_mut() = Some(f);
        self.forget();
    }

    fn forget(&self) {
        let h = self.handle;
        self.shard.upkeep(true, |_, herald| {
            if let Ok(drop) = herald.get::<_, Function>("drop") {
                let _: rquickjs::Result<()> = drop.call((h,));
            }
        });
    }

    /// Reads the prelude's flat effects array, checking every message.
    fn effects(&self, fx: &Fx) -> Result<Vec<Effect>, Fault> {
        let max = self.script.limits.max_message;
        let bytes = |s: &String| -> Result<Bytes, Fault> {
            if s.len() > max {
                return Err(Fault::Output(format!(
                    "a message of {} bytes (max_message is {max})",
                    s.len()
                )));
            }
            Ok(Bytes::copy_from_slice(s.as_bytes()))
        };
        let mut out = Vec::with_capacity(fx.len());
        for (kind, a, b) in fx {
            let seat = || match a.as_u64() {
                Some(s) if s < u64::from(self.seats) => Ok(s as u32),
                _ => Err(Fault::Output(format!(
                    "seat {a} is not one of the table's {} seats",
                    self.seats
                ))),
            };
            out.push(match kind {
                0 => Effect::Send(seat()?, bytes(b)?),
                1 => Effect::Table(bytes(b)?),
                2 => Effect::Players(bytes(b)?),
                3 => Effect::Watchers(bytes(b)?),
                4 => Effect::SetTimer(b.clone(), a.as_u64().unwrap_or(0)),
                5 => Effect::CancelTimer(b.clone()),
                6 => Effect::Every(a.as_u64().unwrap_or(0)),
                7 => {
                    let key = a.as_str().unwrap_or_default().to_string();
                    let v = serde_json::from_str(b)
                        .map_err(|e| Fault::Output(format!("lobby attribute {key}: {e}")))?;
                    Effect::Attr(key, v)
                }
                8 => Effect::HandEnded,
                9 => Effect::Unseat(seat()?, b.clone()),
                k => return Err(Fault::Output(format!("unknown effect {k}"))),
            });
        }
        Ok(out)
    }

    /// Applies checked effects to the engine's context.
    fn apply(&mut self, ctx: &mut Ctx, effects: Vec<Effect>) -> Result<(), Fault> {
        for e in effects {
            match e {
                Effect::Send(seat, b) => ctx.send_to(seat, b),
                Effect::Table(b) => ctx.send_table(b),
                Effect::Players(b) => ctx.send_players(b),
                Effect::Watchers(b) => ctx.send_watchers(b),
                Effect::SetTimer(name, ms) => {
                    let key = match self.names.get(&name) {
                        Some(k) => *k,
                        None => {
                            if self.names.len() >= MAX_TIMERS {
                                return Err(Fault::Output(format!(
                                    "more than {MAX_TIMERS} timers pending"
                                )));
                            }
                            let k = self.next_key;
                            self.next_key += 1;
                            self.names.insert(name.clone(), k);
                            self.keys.insert(k, name);
                            k
                        }
                    };
                    ctx.set_timer(key, Duration::from_millis(ms));
                }
                Effect::CancelTimer(name) => {
                    if let Some(k) = self.names.remove(&name) {
                        self.keys.remove(&k);
                        ctx.cancel_timer(k);
                    }
                }
                Effect::Every(0) => {
                    self.every = None;
                    ctx.cancel_timer(TICK);
                }
                Effect::Every(ms) => {
                    if self.every != Some(ms) {
                        self.every = Some(ms);
                        ctx.set_timer(TICK, Duration::from_millis(ms));
                    }
                }
                Effect::Attr(k, v) => ctx.set_attr(k, v),
                Effect::HandEnded => ctx.hand_finished(),
                Effect::Unseat(seat, reason) => ctx.unseat(seat, reason),
            }
        }
        Ok(())
    }

    /// Calls the prelude's `name` with `args`, expecting effects, and
    /// applies them; a failure is recorded as the table's fault.
    fn step<A>(&mut self, ctx: &mut Ctx, name: &str, args: A)
    where
        A: for<'js> rquickjs::function::IntoArgs<'js>,
    {
        let r = self
            .run(|_, herald| read_fx(herald.get::<_, Function>(name)?.call(args)?))
            .and_then(|fx| self.effects(&fx));
        match r.and_then(|e| self.apply(ctx, e)) {
            Ok(()) => {}
            Err(f) => self.fail(f),
        }
    }
}

/// Effects as read from the prelude: (kind, a, b).
type Fx = Vec<(i32, serde_json::Value, String)>;

fn read_fx(v: Value<'_>) -> rquickjs::Result<Fx> {
    let Some(arr) = v.as_array() else {
        return Err(rquickjs::Error::new_from_js("value", "effects array"));
    };
    read_array(arr)
}

fn read_array(arr: &Array<'_>) -> rquickjs::Result<Fx> {
    let n = arr.len();
    let mut out = Vec::with_capacity(n / 3);
    let mut i = 0;
    while i + 2 < n {
        let kind: i32 = arr.get(i)?;
        let a: Value = arr.get(i + 1)?;
        let a = if let Some(s) = a.as_string() {
            serde_json::Value::String(s.to_string()?)
        } else if let Some(x) = a.as_number() {
            serde_json::Value::from(x as u64)
        } else {
            serde_json::Value::Null
        };
        let b: String = arr.get(i + 2)?;
        out.push((kind, a, b));
        i += 3;
    }
    Ok(out)
}

impl Drop for ScriptTable {
    fn drop(&mut self) {
        if self.fault.borrow().is_none() {
            self.forget();
        }
    }
}

impl Game for ScriptTable {
    fn created(&mut self, ctx: &mut Ctx) {
        let pending = std::mem::take(&mut self.pending);
        if let Err(f) = self.apply(ctx, pending) {
            self.fail(f);
        }
    }

    fn can_sit(&self, seat: Seat, user: &str, data: &[u8]) -> Result<(), String> {
        let h = self.handle;
        let data = String::from_utf8_lossy(data).into_owned();
        let user = user.to_string();
        let r = self.run(|_, herald| {
            herald
                .get::<_, Function>("canSit")?
                .call::<_, String>((h, seat, user, data))
        });
        match r {
            Ok(reason) if reason.is_empty() => Ok(()),
            Ok(reason) => Err(reason),
            Err(f) => {
                self.fail(f);
                Err("the table failed".into())
            }
        }
    }

    fn sat(&mut self, ctx: &mut Ctx, seat: Seat, user: &str, data: &[u8]) {
        let data = String::from_utf8_lossy(data).into_owned();
        self.step(ctx, "sat", (self.handle, seat, user.to_string(), data));
    }

    fn left(&mut self, ctx: &mut Ctx, seat: Seat) {
        self.step(ctx, "left", (self.handle, seat));
    }

    fn dropped(&mut self, ctx: &mut Ctx, seat: Seat) {
        self.step(ctx, "dropped", (self.handle, seat));
    }

    fn returned(&mut self, ctx: &mut Ctx, seat: Seat) {
        self.step(ctx, "returned", (self.handle, seat));
    }

    fn act(&mut self, ctx: &mut Ctx, seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        let Ok(data) = std::str::from_utf8(data) else {
            return Err(ActionError::Malformed("the action is not JSON".into()));
        };
        let (h, data) = (self.handle, data.to_string());
        // A refused action changes nothing, its random draws included.
        let rng = self.rng.get();
        let r = self.run(|_, herald| {
            let v: Value = herald.get::<_, Function>("act")?.call((h, seat, data))?;
            if let Some(o) = v.as_object().filter(|_| !v.is_array()) {
                let kind: String = o.get("refuse")?;
                let message: String = o.get("message")?;
                return Ok(Err((kind, message)));
            }
            read_fx(v).map(Ok)
        });
        match r {
            Ok(Err((kind, message))) => Err({
                self.rng.set(rng);
                match kind.as_str() {
                    "out_of_turn" => ActionError::OutOfTurn(message),
                    "illegal" => ActionError::Illegal(message),
                    _ => ActionError::Malformed(message),
                }
            }),
            Ok(Ok(fx)) => {
                match self.effects(&fx).and_then(|e| self.apply(ctx, e)) {
                    Ok(()) => {}
                    Err(f) => self.fail(f),
                }
                Ok(())
            }
            Err(f) => {
                self.fail(f);
                Ok(())
            }
        }
    }

    fn timer(&mut self, ctx: &mut Ctx, key: u64) {
        if key == TICK {
            let Some(ms) = self.every else { return };
            // Re-armed before the module's effects, so `every(0)` in them
            // stops it.
            ctx.set_timer(TICK, Duration::from_millis(ms));
            self.step(ctx, "tick", (self.handle,));
            return;
        }
        let Some(name) = self.keys.remove(&key) else {
            return;
        };
        self.names.remove(&name);
        self.step(ctx, "timer", (self.handle, name));
    }

    fn snapshot(&self, seat: Option<Seat>) -> Bytes {
        let h = self.handle;
        let seat = seat.map_or(-1, i64::from);
        let max = self.script.limits.max_message;
        let r = self
            .run(|_, herald| {
                herald
                    .get::<_, Function>("snapshot")?
                    .call::<_, String>((h, seat))
            })
            .and_then(|s| {
                if s.len() > max {
                    Err(Fault::Output(format!(
                        "a snapshot of {} bytes (max_message is {max})",
                        s.len()
                    )))
                } else {
                    Ok(Bytes::from(s))
                }
            });
        r.unwrap_or_else(|f| {
            self.fail(f);
            Bytes::new()
        })
    }

    fn save(&self) -> Option<Vec<u8>> {
        let h = self.handle;
        let max = self.script.limits.max_state;
        let r = self
            .run(|_, herald| herald.get::<_, Function>("save")?.call::<_, String>((h,)))
            .and_then(|state| {
                if state.len() > max {
                    return Err(Fault::Output(format!(
                        "a state of {} bytes (max_state is {max})",
                        state.len()
                    )));
                }
                let state = RawValue::from_string(state)
                    .map_err(|e| Fault::Output(format!("the state is not JSON: {e}")))?;
                let saved = Saved {
                    v: SAVE_VERSION,
                    state: &state,
                    rng: format!("{:x}", self.rng.get()),
                    timers: self.names.clone(),
                    next: self.next_key,
                    every: self.every,
                };
                serde_json::to_vec(&saved).map_err(|e| Fault::Output(e.to_string()))
            });
        match r {
            Ok(v) => Some(v),
            Err(f) => {
                self.fail(f);
                None
            }
        }
    }

    fn fault(&self) -> Option<String> {
        self.fault
            .borrow()
            .as_ref()
            .map(|f| format!("{} ({}): {f}", self.script.name(), f.kind()))
    }
}
