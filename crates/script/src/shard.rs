//! A shard: one QuickJS runtime and context running one version of one
//! module for many tables (decision 0014).
//!
//! Why shards and not a runtime per table: a runtime with its context costs
//! about 73 KiB even with few intrinsics, a table's state in a shared
//! context about 1 KiB. Each table is a handle into the prelude's `Map`;
//! every call takes the shard's lock, so a table's calls never overlap and
//! tables of one shard take turns (a module has as many shards as the
//! machine has cores, tables spread over them by id).
//!
//! Isolation within a shard, per call: the CPU budget is an interrupt
//! handler that stops the call at its deadline; the memory cap is the
//! runtime's memory limit, set before each call to what is live now plus
//! what the table may still allocate, so a table that allocates past its
//! cap fails inside its own call. What a call leaves allocated is charged
//! to its table (see [`crate::alloc`]); a table's charge is forgotten
//! when it closes. A cycle freed by the collector during another table's
//! call is credited to that call: the accounting errs towards lenience for
//! the table that made the garbage, never towards blaming another beyond
//! what it allocated itself.

use crate::alloc::{Counter, Counting};
use crate::rng::SplitMix;
use crate::Fault;
use rquickjs::context::intrinsic;
use rquickjs::{Context, Ctx, Function, Module, Object, Runtime, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const PRELUDE: &str = include_str!("prelude.js");
/// JavaScript stack a call may use (QuickJS checks it; a deeper recursion
/// is a `RangeError`, a fault like any other).
const STACK: usize = 256 * 1024;

/// The interrupt handler's view of the current call.
#[derive(Default)]
struct Clock {
    /// Nanoseconds after `epoch` at which the call is stopped; 0: none.
    deadline: AtomicU64,
    /// Set by the handler when it stopped a call.
    fired: AtomicBool,
    /// A promise rejected with no handler during the call: what it said.
    rejected: Mutex<Option<String>>,
}

struct Inner {
    // Field order matters: the context is dropped before its runtime.
    cx: Context,
    rt: Runtime,
}

/// See the module's doc.
pub(crate) struct Shard {
    inner: Mutex<Inner>,
    counter: Arc<Counter>,
    clock: Arc<Clock>,
    epoch: Instant,
    /// The generator of the table being called (set before, read after).
    rng: Arc<AtomicU64>,
}

/// How much a call may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) cpu: Duration,
    /// Bytes the call may leave allocated beyond what is live now.
    pub(crate) memory: usize,
}

impl Shard {
    /// A runtime with the prelude and `source` evaluated as the module
    /// `name`; `Err` says what is wrong with the module.
    pub(crate) fn load(name: &str, source: &str) -> Result<Shard, String> {
        let counter = Arc::new(Counter::default());
        let rt = Runtime::new_with_alloc(Counting(counter.clone()))
            .map_err(|e| format!("cannot start a JavaScript runtime: {e}"))?;
        rt.set_max_stack_size(STACK);
        let clock = Arc::new(Clock::default());
        let epoch = Instant::now();
        let handler_clock = clock.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            let at = handler_clock.deadline.load(Ordering::Relaxed);
            let late = at != 0 && epoch.elapsed().as_nanos() as u64 >= at;
            if late {
                handler_clock.fired.store(true, Ordering::Relaxed);
            }
            late
        })));
        let tracker_clock = clock.clone();
        rt.set_host_promise_rejection_tracker(Some(Box::new(
            move |cx, _promise, reason, handled| {
                if !handled {
                    let why = match reason.as_exception() {
                        Some(e) => e.message().unwrap_or_default(),
                        None => cx
                            .json_stringify(reason)
                            .ok()
                            .flatten()
                            .and_then(|s| s.to_string().ok())
                            .unwrap_or_default(),
                    };
                    let mut r = tracker_clock
                        .rejected
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    r.get_or_insert(why);
                }
            },
        )));
        // No Date, Performance or WeakRef: nothing that reads a clock or
        // the collector's timing (docs/games.md, "Deterministic").
        let cx = Context::builder()
            .with::<intrinsic::Eval>()
            .with::<intrinsic::Json>()
            .with::<intrinsic::MapSet>()
            .with::<intrinsic::RegExp>()
            .with::<intrinsic::RegExpCompiler>()
            .with::<intrinsic::Promise>()
            .with::<intrinsic::TypedArrays>()
            .with::<intrinsic::BigInt>()
            .with::<intrinsic::Proxy>()
            .build(&rt)
            .map_err(|e| format!("cannot start a JavaScript context: {e}"))?;
        let rng = Arc::new(AtomicU64::new(0));
        let draw = rng.clone();
        cx.with(|cx| -> Result<(), String> {
            let random = Function::new(cx.clone(), move || -> f64 {
                let mut g = SplitMix(draw.load(Ordering::Relaxed));
                let x = g.next_f64();
                draw.store(g.0, Ordering::Relaxed);
                x
            })
            .map_err(|e| e.to_string())?;
            cx.globals()
                .set("__herald_random", random)
                .map_err(|e| e.to_string())?;
            cx.eval::<(), _>(PRELUDE)
                .map_err(|e| format!("the prelude failed: {}", describe(&cx, e)))?;
            let (module, done) = Module::declare(cx.clone(), name, source)
                .and_then(Module::eval)
                .map_err(|e| describe(&cx, e))?;
            done.finish::<()>().map_err(|e| describe(&cx, e))?;
            let game: Value = module.get("game").map_err(|e| describe(&cx, e))?;
            let bot: Value = module.get("bot").map_err(|e| describe(&cx, e))?;
            let herald: Object = cx.globals().get("__herald").map_err(|e| e.to_string())?;
            let install: Function = herald.get("install").map_err(|e| e.to_string())?;
            let problem: String = install.call((game, bot)).map_err(|e| describe(&cx, e))?;
            if problem.is_empty() {
                Ok(())
            } else {
                Err(problem)
            }
        })?;
        Ok(Shard {
            inner: Mutex::new(Inner { cx, rt }),
            counter,
            clock,
            epoch,
            rng,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while locked (none is expected: calls catch everything)
        // leaves nothing half-done that the next call could trip on.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `f` with the prelude's `__herald` object under `budget`, with
    /// `rng` as the generator `ctx.random()` draws from. Returns what `f`
    /// returned (or why the call failed) and the bytes the call left
    /// allocated (negative if it freed more).
    pub(crate) fn call<T>(
        &self,
        rng: &mut u64,
        budget: Budget,
        f: impl for<'js> FnOnce(&Ctx<'js>, &Object<'js>) -> rquickjs::Result<T>,
    ) -> (Result<T, Fault>, i64) {
        let inner = self.lock();
        let before = self.counter.live();
        inner
            .rt
            .set_memory_limit(before.saturating_add(budget.memory).max(1));
        self.rng.store(*rng, Ordering::Relaxed);
        self.clock.fired.store(false, Ordering::Relaxed);
        let deadline = (self.epoch.elapsed() + budget.cpu).as_nanos() as u64;
        self.clock
            .deadline
            .store(deadline.max(1), Ordering::Relaxed);
        let mut result = inner.cx.with(|cx| {
            let herald: Object = cx.globals().get("__herald")?;
            f(&cx, &herald)
        });
        // Promise jobs the call queued run now, under its budget (as a
        // microtask queue drains before the event loop goes on); left
        // queued they would pile up in the shard. One that throws fails
        // the call.
        loop {
            match inner.rt.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) if result.is_err() => break,
                Err(_) => {
                    result = Err(rquickjs::Error::Exception);
                    break;
                }
            }
        }
        self.clock.deadline.store(0, Ordering::Relaxed);
        let rejected = self
            .clock
            .rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let (Some(why), Ok(_)) = (rejected, &result) {
            inner.rt.set_memory_limit(0);
            *rng = self.rng.load(Ordering::Relaxed);
            let delta = self.counter.live() as i64 - before as i64;
            return (
                Err(Fault::Exception(format!("a promise was rejected: {why}"))),
                delta,
            );
        }
        let result = result.map_err(|e| {
            if self.clock.fired.load(Ordering::Relaxed) {
                // Clear the uncatchable exception the interrupt left.
                inner.cx.with(|cx| drop(cx.catch()));
                return Fault::Timeout(budget.cpu);
            }
            inner.cx.with(|cx| {
                let text = describe(&cx, e);
                if text.contains("out of memory") {
                    Fault::Memory(budget.memory)
                } else {
                    Fault::Exception(text)
                }
            })
        });
        inner.rt.set_memory_limit(0);
        *rng = self.rng.load(Ordering::Relaxed);
        let after = self.counter.live();
        (result, after as i64 - before as i64)
    }

    /// Runs `f` without a budget (the engine's own upkeep: dropping a
    /// table's state), then collects garbage if `gc`.
    pub(crate) fn upkeep(&self, gc: bool, f: impl for<'js> FnOnce(&Ctx<'js>, &Object<'js>)) {
        let inner = self.lock();
        inner.cx.with(|cx| {
            if let Ok(herald) = cx.globals().get::<_, Object>("__herald") {
                f(&cx, &herald);
            }
        });
        if gc {
            inner.rt.run_gc();
        }
    }
}

/// What an error from QuickJS says: the exception's message and stack
/// (with the module's name and line), or rquickjs's own error.
pub(crate) fn describe(cx: &Ctx<'_>, e: rquickjs::Error) -> String {
    if !matches!(e, rquickjs::Error::Exception) {
        return e.to_string();
    }
    let v = cx.catch();
    if let Some(ex) = v
        .as_object()
        .and_then(|o| rquickjs::Exception::from_object(o.clone()))
    {
        let message = ex.message().unwrap_or_default();
        let stack = ex.stack().unwrap_or_default();
        let kind: String = ex
            .get::<_, Object>("constructor")
            .and_then(|c| c.get::<_, String>("name"))
            .unwrap_or_else(|_| "Error".into());
        let first = stack.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return format!("{kind}: {message} {}", first.trim())
            .trim()
            .to_string();
    }
    // A thrown non-Error value.
    let shown = cx
        .json_stringify(v)
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| "a value that is not JSON".into());
    format!("threw {shown}")
}
