//! Redis Cluster as the broker's Redis (decision 0021): the slot map, and
//! routing every command to the master that owns its key's slot.
//!
//! A `redis-cluster://HOST:PORT[,HOST:PORT...]` target names *seed* nodes,
//! not the masters. [`Topology`] learns the slot map with `CLUSTER NODES`
//! (asked of every node it knows, in parallel: for each slot the claim with
//! the highest config epoch wins, which is Redis Cluster's own rule, so a
//! node that has not yet heard of a fail-over cannot undo it). The map
//! records each master's address, its config epoch and its slots.
//!
//! [`Router`] holds one pipelined command link (`pipe.rs`) per master and
//! sends each command to its key's slot owner ([`slot::slot`]; a script's
//! keys must share one slot, which the key layout guarantees, and a script
//! whose keys do not is refused before it is sent). Replies that say the
//! map is wrong are followed:
//!
//! - `-MOVED SLOT HOST:PORT`: the slot has a new owner for good; the map
//!   is corrected at once, refreshed in the background, and the command
//!   sent again there.
//! - `-ASK SLOT HOST:PORT`: the slot is being migrated and this key
//!   already moved; the command is sent once to that node preceded by
//!   `ASKING`, both in one write so nothing comes between them.
//! - `-TRYAGAIN` (a multi-key command during a migration): sent again after
//!   a short wait.
//! - `-CLUSTERDOWN`, `-LOADING`, `-READONLY`, a lost connection: the error
//!   goes to the caller (error 114 to clients) and the map is refreshed, so
//!   that the next command finds the new owner.
//! - `-NOSCRIPT` (a master that lost its scripts: a promoted replica loads
//!   them on our connection, but a `SCRIPT FLUSH` would not): the scripts
//!   are loaded again on that link and the command sent again.
//!
//! The map is also refreshed every [`REFRESH_EVERY`], so a fail-over or a
//! resharding is noticed even on a quiet node.
//!
//! The fail-over epoch: each slot's owner has a *config epoch*, raised by
//! every fail-over (the promoted replica takes a new, unique, highest one)
//! and by the end of a resharding. Commands may carry the marker
//! [`SHARD_EPOCH`] as an argument; the router replaces it with the config
//! epoch of the master it sends the command to, at each attempt. The
//! channel and table scripts compare it with the epoch their data was
//! written under (decision 0021, as Sentinel's epoch in decision 0020).

use crate::pipe::{error_reply, Conn};
use crate::resp::Value;
use crate::slot;
use crate::target::Target;
use bytes::Bytes;
use herald_core::BrokerError;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

pub use crate::topology::{
    Map, Master, Topology, SHARD_EPOCH, SHARD_EPOCH_STR, SHARD_LINEAGE, SHARD_LINEAGE_STR,
};

/// How often the map is refreshed when nothing asks for it sooner.
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Redirections followed for one command before giving up.
const MAX_REDIRECTS: usize = 5;
/// `-TRYAGAIN` answers (a multi-key command while its slot's keys are
/// being moved, [`TRYAGAIN_PAUSE`] apart) waited out for one command:
/// about a second, long enough for a resharding's batch of keys to move.
const MAX_TRYAGAIN: usize = 50;
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(20);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl std::fmt::Display) -> BrokerError {
    BrokerError::Unavailable(format!("redis cluster: {why}"))
}

/// The slot a command is routed by: its first key's (for `EVAL`/`EVALSHA`,
/// the first of its declared keys; every declared key must share it).
/// `None`: a command without keys (any master serves it).
pub fn command_slot<A: AsRef<[u8]>>(args: &[A]) -> Result<Option<u16>, BrokerError> {
    let Some(name) = args.first() else {
        return Ok(None);
    };
    let name = name.as_ref();
    let is_script = name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL");
    if is_script {
        let n: usize = args
            .get(2)
            .and_then(|n| std::str::from_utf8(n.as_ref()).ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let keys = args.get(3..3 + n).unwrap_or_default();
        let mut slots = keys.iter().map(|k| slot::slot(k.as_ref()));
        let Some(first) = slots.next() else {
            return Ok(None);
        };
        if slots.any(|s| s != first) {
            let names: Vec<String> = keys
                .iter()
                .map(|k| String::from_utf8_lossy(k.as_ref()).into_owned())
                .collect();
            return Err(unavailable(format!(
                "a script's keys span slots: {}",
                names.join(", ")
            )));
        }
        return Ok(Some(first));
    }
    let keyless = [
        &b"PING"[..],
        b"SCRIPT",
        b"PUBLISH",
        b"INFO",
        b"TIME",
        b"CLUSTER",
        b"ROLE",
    ];
    if keyless.iter().any(|k| name.eq_ignore_ascii_case(k)) {
        return Ok(None);
    }
    Ok(args.get(1).map(|k| slot::slot(k.as_ref())))
}

/// Corrects `topology` for the slot a `-MOVED` error names (a no-op for
/// any other error): what the subscriber links do with an `SSUBSCRIBE`
/// refused by a master that lost the slot.
pub(crate) fn follow_moved(topology: &Topology, error: &[u8]) {
    if let Some(Redirect::Moved(slot, addr)) = redirect(error) {
        topology.moved(slot, &addr);
    }
}

/// What an error reply asks the router to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Redirect {
    Moved(u16, String),
    Ask(String),
    TryAgain,
    NoScript,
    /// Refresh the map (the caller still gets the error).
    Refresh,
}

fn redirect(e: &[u8]) -> Option<Redirect> {
    let text = std::str::from_utf8(e).ok()?;
    let mut parts = text.split(' ');
    match parts.next()? {
        "MOVED" => {
            let slot = parts.next()?.parse().ok()?;
            Some(Redirect::Moved(slot, parts.next()?.to_string()))
        }
        "ASK" => {
            parts.next()?;
            Some(Redirect::Ask(parts.next()?.to_string()))
        }
        "TRYAGAIN" => Some(Redirect::TryAgain),
        "NOSCRIPT" => Some(Redirect::NoScript),
        "CLUSTERDOWN" | "LOADING" | "READONLY" | "MASTERDOWN" => Some(Redirect::Refresh),
        _ => None,
    }
}

/// The commands a cluster target sends: one pipelined connection per master, routed by
/// slot.
pub struct Router {
    me: Weak<Router>,
    target: Target,
    topology: Arc<Topology>,
    setup: Vec<Vec<Vec<u8>>>,
    timeout: Duration,
    conns: Mutex<HashMap<String, Arc<Conn>>>,
    /// Wakes the refresher now.
    wake: Notify,
    /// Counts connection changes (for [`Router::generation`]).
    generation: Mutex<(Vec<(String, u64)>, u64)>,
    started: AtomicBool,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("seeds", &self.topology.seeds())
            .finish_non_exhaustive()
    }
}

type Reply = Pin<Box<dyn Future<Output = Result<Value, BrokerError>> + Send + 'static>>;

impl Router {
    /// Starts routing for `target` (which must hold a [`Topology`]);
    /// every master's link runs `setup` on each new connection.
    pub(crate) fn start(
        target: Target,
        topology: Arc<Topology>,
        setup: Vec<Vec<Vec<u8>>>,
        timeout: Duration,
    ) -> Arc<Router> {
        let r = Arc::new_cyclic(|me| Router {
            me: me.clone(),
            target,
            topology,
            setup,
            timeout,
            conns: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            generation: Mutex::new((Vec::new(), 0)),
            started: AtomicBool::new(false),
        });
        if !r.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(refresher(Arc::downgrade(&r)));
        }
        r
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// Asks for a refresh of the map soon.
    pub fn refresh_soon(&self) {
        self.wake.notify_one();
    }

    /// Up: the map covers every slot and every master's link is up.
    pub fn is_up(&self) -> bool {
        let Some(map) = self.topology.map() else {
            return false;
        };
        if map.uncovered() > 0 || map.masters().is_empty() {
            return false;
        }
        let conns = lock(&self.conns);
        map.masters()
            .iter()
            .all(|m| conns.get(&m.addr).is_some_and(|c| c.is_up()))
    }

    /// Changes whenever a master's link reconnected or the masters changed
    /// (1 after the first connection of all).
    pub fn generation(&self) -> u64 {
        let mut now: Vec<(String, u64)> = lock(&self.conns)
            .iter()
            .map(|(a, c)| (a.clone(), c.generation()))
            .collect();
        now.sort();
        let mut g = lock(&self.generation);
        if now.iter().all(|(_, n)| *n == 0) {
            return g.1;
        }
        if g.0 != now {
            g.0 = now;
            g.1 += 1;
        }
        g.1
    }

    /// The link to `addr`, made if needed.
    fn conn(&self, addr: &str) -> Arc<Conn> {
        let mut conns = lock(&self.conns);
        conns
            .entry(addr.to_string())
            .or_insert_with(|| {
                let mut t = self.target.clone();
                t.addr = addr.to_string();
                t.cluster = None;
                Conn::start(t, self.setup.clone(), self.timeout)
            })
            .clone()
    }

    /// The master for `slot` (any master for `None`) and what its
    /// commands' [`SHARD_EPOCH`] and [`SHARD_LINEAGE`] become.
    fn route(&self, slot: Option<u16>) -> Result<(Arc<Conn>, Fence), BrokerError> {
        let Some(map) = self.topology.map() else {
            self.refresh_soon();
            return Err(unavailable(match self.topology.last_error() {
                Some(e) => e,
                None => "the slot map is not known yet".to_string(),
            }));
        };
        let m = match slot {
            Some(s) => map.owner(s),
            None => map.masters().first(),
        };
        let Some(m) = m else {
            self.refresh_soon();
            return Err(unavailable(format!(
                "slot {} has no master (CLUSTERDOWN)",
                slot.unwrap_or(0)
            )));
        };
        Ok((self.conn(&m.addr), Fence::of(m)))
    }

    /// Sends a command to its slot's master now (so commands of one slot
    /// keep their order) and returns the future of its reply, following
    /// redirections.
    pub fn call_later<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Reply, BrokerError> {
        self.call_later_at(command_slot(args)?, args)
    }

    /// [`Router::call_later`] for a command that goes to `slot`'s master
    /// whatever its arguments (`WAIT` after a write to that slot).
    pub fn call_later_at<A: AsRef<[u8]>>(
        &self,
        slot: Option<u16>,
        args: &[A],
    ) -> Result<Reply, BrokerError> {
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .collect();
        let (conn, fence) = self.route(slot)?;
        let first = match conn.call_raw(&fence.apply(&args), false) {
            Ok(f) => f,
            Err(e) => {
                self.refresh_soon();
                return Err(e);
            }
        };
        let me = self.me.clone();
        Ok(Box::pin(async move {
            let mut reply = first.await;
            let (mut redirects, mut waits) = (0, 0);
            // Where the last attempt went, if not by the map: `-TRYAGAIN`
            // and `-NOSCRIPT` are answered by the node asked (an importing
            // master after `-ASK`), so the command goes there again.
            let mut at: Option<(String, bool)> = None;
            while redirects < MAX_REDIRECTS && waits < MAX_TRYAGAIN {
                let e = match &reply {
                    Ok(Value::Error(e)) => e.clone(),
                    Ok(_) => return reply,
                    Err(_) => {
                        if let Some(r) = me.upgrade() {
                            r.refresh_soon();
                        }
                        return reply;
                    }
                };
                let Some(r) = me.upgrade() else {
                    return Err(unavailable("stopped"));
                };
                let next = redirect(&e);
                if next == Some(Redirect::TryAgain) {
                    waits += 1;
                } else {
                    redirects += 1;
                }
                let next = match next {
                    None => return Err(error_reply(&e)),
                    Some(Redirect::Refresh) => {
                        r.refresh_soon();
                        return Err(error_reply(&e));
                    }
                    Some(Redirect::Moved(s, addr)) => {
                        let known = r.fence_of(&addr);
                        r.topology.moved(s, &addr);
                        // A master the map does not know yet (a promoted
                        // replica): its epoch and lineage are learned
                        // before a fenced command goes there, since
                        // without them the scripts could not tell that a
                        // fail-over happened.
                        let fence = match known {
                            Some(f) => f,
                            None if fenced(&args) => r.learn(&addr).await,
                            None => Fence::default(),
                        };
                        at = Some((addr.clone(), false));
                        r.conn(&addr).call_raw(&fence.apply(&args), false)
                    }
                    Some(Redirect::Ask(addr)) => {
                        // A migration: keys asked for there came whole
                        // from the live master that is exporting them.
                        let fence = r.fence_of(&addr).unwrap_or_default();
                        at = Some((addr.clone(), true));
                        r.conn(&addr).call_raw(&fence.apply(&args), true)
                    }
                    Some(Redirect::TryAgain) => {
                        tokio::time::sleep(TRYAGAIN_PAUSE).await;
                        let (conn, fence, asking) = r.again(slot, at.as_ref())?;
                        conn.call_raw(&fence.apply(&args), asking)
                    }
                    Some(Redirect::NoScript) => {
                        let (conn, fence, asking) = r.again(slot, at.as_ref())?;
                        for s in &r.setup {
                            let _ = conn.call_raw(s, false)?.await;
                        }
                        conn.call_raw(&fence.apply(&args), asking)
                    }
                };
                drop(r);
                reply = match next {
                    Ok(f) => f.await,
                    Err(e) => Err(e),
                };
            }
            Err(unavailable("too many redirections"))
        }))
    }

    /// Sends a command without waiting for its reply.
    pub fn fire<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<(), BrokerError> {
        let slot = command_slot(args)?;
        let (conn, fence) = self.route(slot)?;
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .collect();
        conn.fire(&fence.apply(&args))
    }

    /// Where a command answered `-TRYAGAIN` or `-NOSCRIPT` goes again: to
    /// the importing master it was asked of (`at` after `-ASK`, with
    /// `ASKING` again), else by the map (which a `-MOVED` corrected).
    fn again(
        &self,
        slot: Option<u16>,
        at: Option<&(String, bool)>,
    ) -> Result<(Arc<Conn>, Fence, bool), BrokerError> {
        match at {
            Some((addr, true)) => Ok((
                self.conn(addr),
                self.fence_of(addr).unwrap_or_default(),
                true,
            )),
            _ => self.route(slot).map(|(c, f)| (c, f, false)),
        }
    }

    /// The fence of the master at `addr` if the map knows its lineage.
    fn fence_of(&self, addr: &str) -> Option<Fence> {
        let map = self.topology.map()?;
        let m = map.masters().iter().find(|m| m.addr == addr)?;
        (!m.lineage.is_empty()).then(|| Fence::of(m))
    }

    /// Waits (at most about a second) for a refresh of the map that knows
    /// the lineage of the master at `addr`; the fence it then has (an
    /// empty lineage if none came).
    async fn learn(&self, addr: &str) -> Fence {
        let seen = self.topology.refreshes();
        self.refresh_soon();
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if self.topology.refreshes() > seen {
                if let Some(f) = self.fence_of(addr) {
                    return f;
                }
            }
        }
        self.topology
            .map()
            .and_then(|m| m.masters().iter().find(|m| m.addr == addr).map(Fence::of))
            .unwrap_or_default()
    }

    /// Learns the map now and starts (or drops) the masters' links.
    async fn refresh(&self) -> Result<(), BrokerError> {
        let map = self
            .topology
            .refresh(self.target.password.as_deref())
            .await?;
        let keep: Vec<&str> = map.masters().iter().map(|m| m.addr.as_str()).collect();
        lock(&self.conns).retain(|a, _| keep.contains(&a.as_str()));
        for m in map.masters() {
            self.conn(&m.addr);
        }
        Ok(())
    }
}

/// What a master's commands carry for the scripts that fence: its config
/// epoch for [`SHARD_EPOCH`], its lineage for [`SHARD_LINEAGE`].
#[derive(Debug, Clone, Default)]
struct Fence {
    epoch: u64,
    lineage: Bytes,
}

impl Fence {
    fn of(m: &Master) -> Fence {
        Fence {
            epoch: m.epoch,
            lineage: m.lineage.clone(),
        }
    }

    /// `args` with the markers replaced.
    fn apply(&self, args: &[Bytes]) -> Vec<Bytes> {
        args.iter()
            .map(|a| {
                if a.as_ref() == SHARD_EPOCH {
                    Bytes::from(self.epoch.to_string())
                } else if a.as_ref() == SHARD_LINEAGE {
                    self.lineage.clone()
                } else {
                    a.clone()
                }
            })
            .collect()
    }
}

/// Whether a command carries a fencing marker.
fn fenced(args: &[Bytes]) -> bool {
    args.iter()
        .any(|a| a.as_ref() == SHARD_EPOCH || a.as_ref() == SHARD_LINEAGE)
}

/// Refreshes the map at once, then when asked (at most every 100 ms) and
/// every [`REFRESH_EVERY`]; until the router is dropped.
async fn refresher(me: Weak<Router>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(r) = me.upgrade() else { return };
        let ok = match r.refresh().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "redis cluster: cannot learn the slot map");
                false
            }
        };
        let wait = if ok {
            backoff = Duration::from_millis(50);
            REFRESH_EVERY
        } else {
            backoff = (backoff * 2).min(REFRESH_EVERY);
            backoff
        };
        let woken = async {
            r.wake.notified().await;
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = woken => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        drop(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_route_by_their_keys() {
        assert_eq!(command_slot(&["GET", "foo"]).ok(), Some(Some(12182)));
        assert_eq!(
            command_slot(&["EVALSHA", "x", "2", "h:{user1000}:m", "h:{user1000}:s", "a"]).ok(),
            Some(Some(3443))
        );
        assert!(command_slot(&["EVALSHA", "x", "2", "foo", "bar"]).is_err());
        assert_eq!(command_slot(&["EVALSHA", "x", "0", "a"]).ok(), Some(None));
        assert_eq!(command_slot(&["PING"]).ok(), Some(None));
        assert_eq!(
            command_slot(&["SCRIPT", "LOAD", "return 1"]).ok(),
            Some(None)
        );
    }

    #[test]
    fn reads_redirections() {
        assert_eq!(
            redirect(b"MOVED 3999 127.0.0.1:6381"),
            Some(Redirect::Moved(3999, "127.0.0.1:6381".into()))
        );
        assert_eq!(
            redirect(b"ASK 3999 127.0.0.1:6381"),
            Some(Redirect::Ask("127.0.0.1:6381".into()))
        );
        assert_eq!(
            redirect(b"CLUSTERDOWN Hash slot not served"),
            Some(Redirect::Refresh)
        );
        assert_eq!(redirect(b"ERR wrong"), None);
        assert_eq!(redirect(b"MOVED x y"), None);
    }
}
