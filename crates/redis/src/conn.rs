//! The command link: one TCP connection to Redis, pipelined, reconnecting.
//!
//! Callers queue requests (an encoded command and where its reply goes) on a
//! bounded queue; a writer task drains whatever has queued since its last
//! write into one buffer and writes it with one call (so commands issued
//! together under load travel together: batching), and a reader task matches
//! replies to requests in order (Redis answers a connection's commands in the
//! order it received them). Nothing waits for a reply before sending the next
//! command.
//!
//! When the connection fails, every request in flight or queued fails with
//! [`BrokerError::Unavailable`] at once — callers are never left hanging on a
//! dead link — and the link reconnects with capped exponential backoff,
//! running the setup commands (AUTH, SELECT, SCRIPT LOAD) before it reports
//! itself up again. While it is down, [`Link::call`] fails immediately.

use crate::resp::{self, Value};
use bytes::BytesMut;
use herald_core::BrokerError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

/// Requests that may wait for the writer; beyond this, calls fail at once
/// (the link is not keeping up, and queueing more would only add latency).
pub(crate) const QUEUE: usize = 65_536;
/// How long a connection attempt may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait between two connection attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Where to find Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port`.
    pub(crate) addr: String,
    /// Database number (`SELECT`), 0 by default.
    pub(crate) db: u32,
    /// Password (`AUTH`), if any.
    pub(crate) password: Option<String>,
}

/// A `redis://` URL could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid redis URL {url:?}: {why} (expected redis://[:PASSWORD@]HOST:PORT[/DB])")]
pub struct UrlError {
    url: String,
    why: &'static str,
}

impl Target {
    /// Parses `redis://[:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by default).
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let err = |why| UrlError {
            url: url.to_string(),
            why,
        };
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| err("not a redis:// URL"))?;
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((a, r)) => (Some(a), r),
            None => (None, rest),
        };
        let password = auth
            .map(|a| a.strip_prefix(':').unwrap_or(a).to_string())
            .filter(|p| !p.is_empty());
        let (hostport, db) = match rest.split_once('/') {
            Some((h, "")) => (h, 0),
            Some((h, d)) => (
                h,
                d.parse().map_err(|_| err("the database is not a number"))?,
            ),
            None => (rest, 0),
        };
        if hostport.is_empty() {
            return Err(err("no host"));
        }
        let addr = if hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            hostport.to_string()
        } else if hostport.contains(':') && !hostport.ends_with(']') {
            return Err(err("the port is not a number"));
        } else {
            format!("{hostport}:6379")
        };
        Ok(Target { addr, db, password })
    }
}

/// One queued command.
struct Request {
    command: BytesMut,
    reply: Option<oneshot::Sender<Result<Value, BrokerError>>>,
}

type Inflight = Arc<Mutex<VecDeque<Option<oneshot::Sender<Result<Value, BrokerError>>>>>>;

/// How long a command may wait for its reply by default; beyond it the call
/// fails (the reply, if it ever comes, is discarded).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The command link. Cheap to share (`Arc`).
pub struct Link {
    tx: mpsc::Sender<Request>,
    timeout: Duration,
    up: AtomicBool,
    /// Bumped each time the link comes up; watchers resynchronise then.
    generation: watch::Sender<u64>,
    /// Connection attempts that failed, for the logs and metrics.
    pub(crate) failures: AtomicU64,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl std::fmt::Display) -> BrokerError {
    BrokerError::Unavailable(format!("redis: {why}"))
}

impl Link {
    /// Starts a link to `target` that runs `setup` (commands whose replies
    /// must not be errors) on every new connection. Must be called within a
    /// tokio runtime; the link lives until the last `Arc` is dropped.
    ///
    /// A call not answered within `timeout` fails with
    /// [`BrokerError::Unavailable`]: a slow Redis delays callers that long
    /// at most.
    pub fn start(target: Target, setup: Vec<Vec<Vec<u8>>>, timeout: Duration) -> Arc<Link> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let link = Arc::new(Link {
            tx,
            timeout,
            up: AtomicBool::new(false),
            generation: watch::channel(0).0,
            failures: AtomicU64::new(0),
        });
        tokio::spawn(run(Arc::downgrade(&link), target, setup, rx));
        link
    }

    /// Whether the connection is up.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// How many times the link has connected (0: not yet): a change means
    /// it reconnected, and what it sent meanwhile may be lost.
    pub(crate) fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Sends one command and waits for its reply. An error reply becomes
    /// `Err` too.
    pub async fn call<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value, BrokerError> {
        self.call_later(args)?.await
    }

    /// Queues one command now and returns the future of its reply: commands
    /// queued one after the other run in that order, whenever their replies
    /// are awaited.
    pub fn call_later<A: AsRef<[u8]>>(
        &self,
        args: &[A],
    ) -> Result<
        impl std::future::Future<Output = Result<Value, BrokerError>> + Send + 'static,
        BrokerError,
    > {
        let rx = self.send(args, true)?;
        let timeout = self.timeout;
        Ok(async move {
            let Some(rx) = rx else {
                return Err(unavailable("no reply channel"));
            };
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(Ok(Value::Error(e)))) => Err(unavailable(String::from_utf8_lossy(&e))),
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(unavailable("connection lost")),
                Err(_) => Err(unavailable(format!("no reply within {timeout:?}"))),
            }
        })
    }

    /// Sends one command without waiting for (or reading) its reply.
    pub(crate) fn fire<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<(), BrokerError> {
        self.send(args, false).map(|_| ())
    }

    fn send<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        want_reply: bool,
    ) -> Result<Option<oneshot::Receiver<Result<Value, BrokerError>>>, BrokerError> {
        if !self.is_up() {
            return Err(unavailable("not connected"));
        }
        let mut command = BytesMut::new();
        resp::encode(args, &mut command);
        let (reply, rx) = if want_reply {
            let (t, r) = oneshot::channel();
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        self.tx
            .try_send(Request { command, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => unavailable("command queue full"),
                mpsc::error::TrySendError::Closed(_) => unavailable("link stopped"),
            })?;
        Ok(rx)
    }
}

/// Connects, runs setup, then serves requests until the connection fails;
/// forever, until the link is dropped.
async fn run(
    link: std::sync::Weak<Link>,
    target: Target,
    setup: Vec<Vec<Vec<u8>>>,
    mut rx: mpsc::Receiver<Request>,
) {
    let mut backoff = Duration::from_millis(50);
    let mut generation = 0u64;
    loop {
        let stream = match connect(&target, &setup).await {
            Ok(s) => s,
            Err(e) => {
                let Some(l) = link.upgrade() else { return };
                if l.failures.fetch_add(1, Ordering::Relaxed) % 20 == 0 {
                    tracing::warn!(addr = %target.addr, error = %e, "cannot reach redis; retrying");
                }
                drop(l);
                // Fail whatever queued meanwhile instead of letting it wait.
                let sleep = tokio::time::sleep(backoff);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        r = rx.recv() => match r {
                            Some(req) => fail(req, "not connected"),
                            None => return,
                        },
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        let Some(l) = link.upgrade() else { return };
        tracing::info!(addr = %target.addr, "connected to redis");
        l.up.store(true, Ordering::Release);
        generation += 1;
        l.generation.send_replace(generation);
        drop(l);
        let inflight: Inflight = Arc::default();
        let (read, write) = stream.into_split();
        let reader = tokio::spawn(read_replies(read, inflight.clone()));
        let stopped = write_requests(write, &mut rx, &inflight, reader).await;
        if let Some(l) = link.upgrade() {
            l.up.store(false, Ordering::Release);
        }
        for reply in lock(&inflight).drain(..).flatten() {
            let _ = reply.send(Err(unavailable("connection lost")));
        }
        while let Ok(req) = rx.try_recv() {
            fail(req, "connection lost");
        }
        if stopped {
            return;
        }
        tracing::warn!(addr = %target.addr, "lost the connection to redis; reconnecting");
    }
}

fn fail(req: Request, why: &str) {
    if let Some(r) = req.reply {
        let _ = r.send(Err(unavailable(why)));
    }
}

/// Opens a connection and runs `setup` on it.
pub(crate) async fn connect(
    target: &Target,
    setup: &[Vec<Vec<u8>>],
) -> Result<TcpStream, BrokerError> {
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.addr))
        .await
        .map_err(|_| unavailable("connect timed out"))?
        .map_err(unavailable)?;
    let _ = stream.set_nodelay(true);
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    if let Some(p) = &target.password {
        commands.push(vec![b"AUTH".to_vec(), p.as_bytes().to_vec()]);
    }
    if target.db != 0 {
        commands.push(vec![b"SELECT".to_vec(), target.db.to_string().into_bytes()]);
    }
    commands.extend(setup.iter().cloned());
    let mut out = BytesMut::new();
    for c in &commands {
        resp::encode(c, &mut out);
    }
    tokio::time::timeout(CONNECT_TIMEOUT, async {
        stream.write_all(&out).await.map_err(unavailable)?;
        let mut buf = BytesMut::with_capacity(4096);
        let mut answered = 0;
        while answered < commands.len() {
            match resp::decode(&mut buf).map_err(unavailable)? {
                Some(Value::Error(e)) => {
                    return Err(unavailable(format!(
                        "setup command refused: {}",
                        String::from_utf8_lossy(&e)
                    )))
                }
                Some(_) => answered += 1,
                None => {
                    if stream.read_buf(&mut buf).await.map_err(unavailable)? == 0 {
                        return Err(unavailable("closed during setup"));
                    }
                }
            }
        }
        Ok(())
    })
    .await
    .map_err(|_| unavailable("setup timed out"))??;
    Ok(stream)
}

/// Writes queued requests in batches until the connection or the queue ends.
/// Returns true when the link itself was dropped (stop for good).
async fn write_requests(
    mut write: tokio::net::tcp::OwnedWriteHalf,
    rx: &mut mpsc::Receiver<Request>,
    inflight: &Inflight,
    mut reader: tokio::task::JoinHandle<()>,
) -> bool {
    let mut batch = Vec::with_capacity(256);
    let mut out = BytesMut::with_capacity(64 * 1024);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, 1024) => {
                if n == 0 {
                    reader.abort();
                    return true;
                }
                out.clear();
                {
                    let mut q = lock(inflight);
                    for req in batch.drain(..) {
                        out.extend_from_slice(&req.command);
                        q.push_back(req.reply);
                    }
                }
                if write.write_all(&out).await.is_err() {
                    reader.abort();
                    return false;
                }
                if out.capacity() > 1 << 20 {
                    out = BytesMut::with_capacity(64 * 1024);
                }
            }
            _ = &mut reader => return false,
        }
    }
}

/// Reads replies and hands each to the oldest request in flight.
async fn read_replies(mut read: tokio::net::tcp::OwnedReadHalf, inflight: Inflight) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            match resp::decode(&mut buf) {
                Ok(Some(v)) => {
                    let Some(slot) = lock(&inflight).pop_front() else {
                        tracing::warn!("redis sent a reply nobody asked for; reconnecting");
                        return;
                    };
                    if let Some(tx) = slot {
                        let _ = tx.send(Ok(v));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "reconnecting");
                    return;
                }
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_urls() {
        let t = Target::parse("redis://127.0.0.1:6380").expect("url");
        assert_eq!(
            (t.addr.as_str(), t.db, t.password),
            ("127.0.0.1:6380", 0, None)
        );
        let t = Target::parse("redis://:s3cret@localhost/2").expect("url");
        assert_eq!(
            (t.addr.as_str(), t.db, t.password.as_deref()),
            ("localhost:6379", 2, Some("s3cret"))
        );
        for bad in ["http://x", "redis://", "redis://h:port", "redis://h:1/x"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
