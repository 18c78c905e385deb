//! Finding the Redis master through Redis Sentinel (decision 0020).
//!
//! A `redis-sentinel://` target names sentinels and a master *name*, not an
//! address. Before each connection the links ([`crate::conn`],
//! `pubsub.rs`) ask `Sentinel::resolve` where the master is: each
//! sentinel in turn (starting with the last one that answered) is asked
//! `SENTINEL get-master-addr-by-name` and, in the same round trip,
//! `SENTINEL MASTER` for the master's *config epoch*. The link then checks
//! with `ROLE` that the address really is a master (a sentinel may lag
//! behind a promotion) and records the config epoch in Redis (see
//! [`EPOCH_KEY`]) before it serves anything.
//!
//! Following a promotion promptly: one task per target stays subscribed to
//! a sentinel's `+switch-master` and, when our master moves, bumps
//! `Sentinel::switches`; a link connected elsewhere drops its connection
//! and reconnects at once (skipping its backoff). Without that notice the
//! links still get there: a dead master closes their connections, and a
//! demoted one answers writes with `-READONLY` (or `-LOADING` while it
//! resyncs), on which the command link reconnects and resolves again.
//!
//! The config epoch is Sentinel's fail-over counter: every fail-over is
//! agreed by a majority of sentinels under a new, higher epoch, and one
//! epoch has one master. That makes it the fence against what asynchronous
//! replication loses in a fail-over: the scripts compare it with what a
//! channel or a table counter was written under (decision 0020).
//!
//! Sentinels with a password of their own (`requirepass` in their
//! configuration, `?sentinel_password=` in the URL): every connection to a
//! sentinel, the resolver's and the `+switch-master` subscription's, starts
//! with `AUTH`. A sentinel that refuses it is an error that says so ("the
//! sentinels refused the password"), not "no sentinel knows the master",
//! so an operator looking at a 503 `/readyz` or the logs sees the cause.
//!
//! This module knows the Sentinel protocol and nothing of the broker; its
//! seam with the rest is [`crate::conn::Target`] (which holds one) and
//! `Sentinel::resolve`.

use crate::resp::{self, Value};
use bytes::BytesMut;
use herald_core::BrokerError;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The key holding the highest Sentinel config epoch any node connected
/// under (a string integer; absent = 0, as with a plain `redis://`). One
/// per Redis, shared by every prefix: it describes the Redis deployment,
/// not a Herald cluster.
pub const EPOCH_KEY: &str = "herald:sentinel:epoch";

/// The Lua that raises [`EPOCH_KEY`] to ARGV[1], never lowers it.
pub(crate) const RAISE_EPOCH: &str = "local c = tonumber(redis.call('GET', KEYS[1]) or '0') \
     if c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end return 1";

/// How long one sentinel may take to connect and answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);
/// Default sentinel port.
const DEFAULT_PORT: u16 = 26379;

/// Where the master is, as a sentinel said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// `host:port` of the master.
    pub addr: String,
    /// Its config epoch (0 until the first fail-over).
    pub epoch: u64,
}

/// A set of sentinels watching one master, and what this process learned
/// from them. Shared by the command and subscriber links of a target.
pub struct Sentinel {
    sentinels: Vec<String>,
    name: String,
    /// The sentinels' own password (`AUTH` before anything else), if any.
    password: Option<String>,
    /// The last resolve failed because the sentinels refused the password
    /// (or wanted one): `/readyz` says so.
    refused: AtomicBool,
    /// The sentinel to ask first (the last one that answered).
    next: AtomicUsize,
    state: Mutex<State>,
    failovers: AtomicU64,
    /// Bumped when a `+switch-master` names our master, or a resolve finds
    /// it moved: links connected elsewhere reconnect.
    switched: watch::Sender<u64>,
    following: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// The master's address as last learned (resolve or `+switch-master`).
    master: Option<String>,
    /// The highest config epoch a resolve returned, if any did.
    epoch: Option<u64>,
}

impl std::fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel")
            .field("sentinels", &self.sentinels)
            .field("name", &self.name)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl PartialEq for Sentinel {
    fn eq(&self, other: &Sentinel) -> bool {
        self.sentinels == other.sentinels
            && self.name == other.name
            && self.password == other.password
    }
}
impl Eq for Sentinel {}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl std::fmt::Display) -> BrokerError {
    BrokerError::Unavailable(format!("redis sentinel: {why}"))
}

impl Sentinel {
    /// `HOST[:PORT],HOST[:PORT]...` (port 26379 by default) watching the
    /// master called `name`, asked with `password` if they want one.
    pub(crate) fn parse(
        hosts: &str,
        name: &str,
        password: Option<String>,
    ) -> Result<Sentinel, &'static str> {
        if name.is_empty() {
            return Err("no master name");
        }
        let mut sentinels = Vec::new();
        for h in hosts.split(',') {
            let h = h.trim();
            if h.is_empty() {
                return Err("an empty sentinel address");
            }
            let addr = match h.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && !h.ends_with(']') => {
                    port.parse::<u16>()
                        .map_err(|_| "a sentinel port is not a number")?;
                    h.to_string()
                }
                Some(_) if !h.ends_with(']') => return Err("a sentinel without a host"),
                _ => format!("{h}:{DEFAULT_PORT}"),
            };
            sentinels.push(addr);
        }
        Ok(Sentinel {
            sentinels,
            name: name.to_string(),
            password,
            refused: AtomicBool::new(false),
            next: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            failovers: AtomicU64::new(0),
            switched: watch::channel(0).0,
            following: AtomicBool::new(false),
        })
    }

    /// The sentinels' addresses.
    pub fn sentinels(&self) -> &[String] {
        &self.sentinels
    }

    /// The master's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sentinels' own password, if one was given.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Whether the last resolve failed because the sentinels refused the
    /// password (or required one and none was given).
    pub fn refused_password(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The master's address as last learned, if any.
    pub fn master(&self) -> Option<String> {
        lock(&self.state).master.clone()
    }

    /// The highest config epoch learned (0 before any).
    pub fn epoch(&self) -> u64 {
        lock(&self.state).epoch.unwrap_or(0)
    }

    /// Fail-overs seen: times a resolve found a higher config epoch than
    /// the one before (a fail-over while this process was away from every
    /// sentinel counts once however many happened).
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// Changes whenever the master may have moved.
    pub(crate) fn switches(&self) -> watch::Receiver<u64> {
        self.switched.subscribe()
    }

    /// The sentinel that pointed at `addr` was wrong (`ROLE` said replica, or
    /// nothing answered there): ask the next one first.
    pub(crate) fn distrust(&self) {
        self.next.fetch_add(1, Ordering::Relaxed);
    }

    /// Asks the sentinels, each in turn, where the master is. Also starts
    /// following `+switch-master` (once per target).
    pub(crate) async fn resolve(self: &Arc<Self>) -> Result<Resolved, BrokerError> {
        if !self.following.swap(true, Ordering::AcqRel) {
            tokio::spawn(follow(Arc::downgrade(self)));
        }
        let n = self.sentinels.len();
        let start = self.next.load(Ordering::Relaxed);
        let mut errors = Vec::new();
        for i in 0..n {
            let idx = (start + i) % n;
            let Some(addr) = self.sentinels.get(idx) else {
                continue;
            };
            match ask(addr, &self.name, self.password.as_deref()).await {
                Ok(r) => {
                    self.next.store(idx, Ordering::Relaxed);
                    self.refused.store(false, Ordering::Relaxed);
                    self.learned(&r);
                    return Ok(r);
                }
                Err(e) => errors.push((addr, e)),
            }
        }
        let refused = errors.iter().any(|(_, e)| e.is_refusal());
        self.refused.store(refused, Ordering::Relaxed);
        let list: Vec<String> = errors.iter().map(|(a, e)| format!("{a}: {e}")).collect();
        Err(unavailable(if refused {
            format!(
                "the sentinels refused the password (set it with ?sentinel_password=…) ({})",
                list.join("; ")
            )
        } else {
            format!(
                "no sentinel knows master {:?} ({})",
                self.name,
                list.join("; ")
            )
        }))
    }

    /// Records a resolve's answer; counts a fail-over when the epoch rose.
    fn learned(&self, r: &Resolved) {
        let moved = {
            let mut s = lock(&self.state);
            if let Some(e) = s.epoch {
                if r.epoch > e {
                    self.failovers.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(master = %r.addr, epoch = r.epoch, "redis sentinel: the master failed over");
                }
            }
            s.epoch = Some(s.epoch.unwrap_or(0).max(r.epoch));
            let moved = s.master.as_deref() != Some(r.addr.as_str());
            s.master = Some(r.addr.clone());
            moved
        };
        if moved {
            self.switched.send_modify(|n| *n += 1);
        }
    }

    /// A `+switch-master` for our master: remember where it went.
    fn switched_to(&self, addr: String) {
        tracing::warn!(master = %addr, "redis sentinel: +switch-master");
        lock(&self.state).master = Some(addr);
        self.switched.send_modify(|n| *n += 1);
    }
}

/// Why asking one sentinel failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum AskError {
    /// It refused our `AUTH` (a wrong password), or wants a password and
    /// none was given (`-NOAUTH`).
    #[error("the sentinel refused the password: {0}")]
    Refused(String),
    /// Anything else: not reachable, no answer, an unknown master name.
    #[error("{0}")]
    Other(String),
}

impl AskError {
    fn is_refusal(&self) -> bool {
        matches!(self, AskError::Refused(_))
    }
}

impl From<String> for AskError {
    fn from(e: String) -> AskError {
        AskError::Other(e)
    }
}

/// The error of an `AUTH` reply, or of any reply that says the sentinel
/// wants a password, as a refusal.
fn refusal(v: &Value) -> Option<AskError> {
    let Value::Error(e) = v else { return None };
    let text = String::from_utf8_lossy(e).into_owned();
    let auth = ["WRONGPASS", "NOAUTH", "ERR AUTH", "ERR invalid password"]
        .iter()
        .any(|p| text.starts_with(p));
    auth.then_some(AskError::Refused(text))
}

/// `AUTH password`, to send first on a connection to a sentinel.
fn auth_command(password: &str) -> [&str; 2] {
    ["AUTH", password]
}

/// Connects to `addr` and sends `commands`, returning their replies.
async fn exchange(addr: &str, commands: &[&[&str]]) -> Result<Vec<Value>, String> {
    let work = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let mut out = BytesMut::new();
        for c in commands {
            resp::encode(c, &mut out);
        }
        stream.write_all(&out).await.map_err(|e| e.to_string())?;
        let mut buf = BytesMut::with_capacity(1024);
        let mut replies = Vec::with_capacity(commands.len());
        while replies.len() < commands.len() {
            match resp::decode(&mut buf).map_err(|e| e.to_string())? {
                Some(v) => replies.push(v),
                None => {
                    if buf.len() > 1 << 20 {
                        return Err("reply too long".to_string());
                    }
                    if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                        return Err("connection closed".to_string());
                    }
                }
            }
        }
        Ok(replies)
    };
    tokio::time::timeout(ASK_TIMEOUT, work)
        .await
        .map_err(|_| "no answer in time".to_string())?
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::bytes)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_string)
}

/// Asks one sentinel where master `name` is, and its config epoch (after
/// `AUTH` when the sentinels have a password).
async fn ask(sentinel: &str, name: &str, password: Option<&str>) -> Result<Resolved, AskError> {
    let auth = password.map(auth_command);
    let (addr, master) = (
        ["SENTINEL", "get-master-addr-by-name", name],
        ["SENTINEL", "MASTER", name],
    );
    let mut commands: Vec<&[&str]> = Vec::with_capacity(3);
    if let Some(a) = &auth {
        commands.push(a);
    }
    commands.push(&addr);
    commands.push(&master);
    let replies = exchange(sentinel, &commands).await?;
    if let Some(r) = replies.iter().find_map(refusal) {
        return Err(r);
    }
    Ok(parse_answer(
        replies.get(commands.len() - 2..).unwrap_or_default(),
    )?)
}

/// The replies to `get-master-addr-by-name` and `SENTINEL MASTER`.
fn parse_answer(replies: &[Value]) -> Result<Resolved, String> {
    let (Some(addr), Some(master)) = (replies.first(), replies.get(1)) else {
        return Err("too few replies".into());
    };
    if let Value::Error(e) = addr {
        return Err(String::from_utf8_lossy(e).into_owned());
    }
    let items = addr.items();
    let (Some(host), Some(port)) = (text(items.first()), text(items.get(1))) else {
        return Err("does not know this master name".into());
    };
    if port.parse::<u16>().is_err() || host.is_empty() {
        return Err(format!("answered a bad address {host:?}:{port:?}"));
    }
    // An error here (a sentinel that lost the master meanwhile) only costs
    // the epoch: then it is read as 0, never as higher than it is.
    let fields = master.items();
    let mut epoch = 0;
    for kv in fields.chunks(2) {
        if text(kv.first()).as_deref() == Some("config-epoch") {
            epoch = text(kv.get(1))
                .and_then(|e| e.parse().ok())
                .ok_or("a bad config-epoch")?;
        }
    }
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(Resolved { addr, epoch })
}

/// Follows `+switch-master` on one sentinel at a time, until the target is
/// dropped.
async fn follow(me: Weak<Sentinel>) {
    let mut idx = 0usize;
    loop {
        let (addr, name) = {
            let Some(s) = me.upgrade() else { return };
            let n = s.sentinels.len().max(1);
            let Some(a) = s.sentinels.get(idx % n).cloned() else {
                return;
            };
            (a, s.name.clone())
        };
        let password = me.upgrade().and_then(|s| s.password.clone());
        if let Err(e) = listen(&me, &addr, &name, password.as_deref()).await {
            tracing::debug!(sentinel = %addr, error = %e, "redis sentinel: not following +switch-master here");
        }
        if me.strong_count() == 0 {
            return;
        }
        idx = idx.wrapping_add(1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Subscribes to `+switch-master` on `addr` and reports our master's moves;
/// returns when the connection fails or the target is dropped.
async fn listen(
    me: &Weak<Sentinel>,
    addr: &str,
    name: &str,
    password: Option<&str>,
) -> Result<(), String> {
    let mut stream = tokio::time::timeout(ASK_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let mut out = BytesMut::new();
    if let Some(p) = password {
        // Its `+OK` is skipped below with the subscribe confirmation; a
        // refusal is an error reply, which ends this connection.
        resp::encode(&auth_command(p), &mut out);
    }
    resp::encode(&["SUBSCRIBE", "+switch-master"], &mut out);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        while let Some(v) = resp::decode(&mut buf).map_err(|e| e.to_string())? {
            let items = v.items();
            if text(items.first()).as_deref() != Some("message") {
                if let Some(r) = refusal(&v) {
                    return Err(r.to_string());
                }
                if let Value::Error(e) = v {
                    return Err(String::from_utf8_lossy(&e).into_owned());
                }
                continue;
            }
            if let Some(to) = text(items.get(2)).and_then(|m| switch_target(&m, name)) {
                let Some(s) = me.upgrade() else {
                    return Ok(());
                };
                s.switched_to(to);
            }
        }
        if buf.len() > 1 << 20 {
            return Err("message too long".into());
        }
        // Wake now and then to notice a dropped target.
        match tokio::time::timeout(Duration::from_secs(1), stream.read_buf(&mut buf)).await {
            Ok(Ok(0)) => return Err("connection closed".into()),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => {
                if me.strong_count() == 0 {
                    return Ok(());
                }
            }
        }
    }
}

/// The new address in a `+switch-master` message (`NAME OLDIP OLDPORT
/// NEWIP NEWPORT`) if it is about master `name`.
fn switch_target(msg: &str, name: &str) -> Option<String> {
    let parts: Vec<&str> = msg.split(' ').collect();
    let [n, _, _, ip, port] = parts.as_slice() else {
        return None;
    };
    if *n != name || port.parse::<u16>().is_err() || ip.is_empty() {
        return None;
    }
    Some(if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn bulk(s: &str) -> Value {
        Value::Bulk(Some(Bytes::from(s.to_string())))
    }

    #[test]
    fn parses_sentinel_lists() {
        let s = Sentinel::parse("a:1,b, c:26380", "m", None).expect("list");
        assert_eq!(s.sentinels(), ["a:1", "b:26379", "c:26380"]);
        for bad in ["", "a:x", ":1", "a,,b"] {
            assert!(Sentinel::parse(bad, "m", None).is_err(), "{bad:?}");
        }
        assert!(Sentinel::parse("a", "", None).is_err());
    }

    #[test]
    fn auth_errors_are_refusals() {
        let err = |t: &'static str| Value::Error(Bytes::from_static(t.as_bytes()));
        for refused in [
            "WRONGPASS invalid username-password pair or user is disabled.",
            "NOAUTH Authentication required.",
            "ERR AUTH <password> called without any password configured for the default user.",
        ] {
            assert!(
                refusal(&err(refused)).is_some_and(|e| e.is_refusal()),
                "{refused}"
            );
        }
        assert!(refusal(&err("ERR No such master with that name")).is_none());
        assert!(refusal(&bulk("OK")).is_none());
        assert_eq!(
            AskError::Refused("WRONGPASS x".into()).to_string(),
            "the sentinel refused the password: WRONGPASS x"
        );
    }

    #[test]
    fn reads_switch_master_messages() {
        assert_eq!(
            switch_target("m 127.0.0.1 1 127.0.0.1 2", "m").as_deref(),
            Some("127.0.0.1:2")
        );
        assert_eq!(switch_target("other 127.0.0.1 1 127.0.0.1 2", "m"), None);
        assert_eq!(switch_target("m 127.0.0.1 1 127.0.0.1 x", "m"), None);
        assert_eq!(switch_target("garbage", "m"), None);
    }

    #[test]
    fn reads_sentinel_answers() {
        let addr = Value::Array(Some(vec![bulk("127.0.0.1"), bulk("7000")]));
        let master = Value::Array(Some(vec![
            bulk("name"),
            bulk("m"),
            bulk("config-epoch"),
            bulk("3"),
        ]));
        assert_eq!(
            parse_answer(&[addr.clone(), master]),
            Ok(Resolved {
                addr: "127.0.0.1:7000".into(),
                epoch: 3
            })
        );
        let unknown = Value::Array(None);
        assert!(parse_answer(&[unknown, Value::Array(None)]).is_err());
        let refused = Value::Error(Bytes::from_static(b"ERR no such master"));
        assert!(parse_answer(&[refused, Value::Array(None)]).is_err());
        let bad_epoch = Value::Array(Some(vec![bulk("config-epoch"), bulk("x")]));
        assert!(parse_answer(&[addr.clone(), bad_epoch]).is_err());
        assert!(parse_answer(&[addr]).is_err());
    }
}
