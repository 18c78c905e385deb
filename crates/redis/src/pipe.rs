//! One pipelined, reconnecting TCP connection to one Redis ([`Conn`]).
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
//! itself up again. While it is down, calls fail immediately.
//!
//! [`crate::conn::Link`] is what the rest of the crate uses: one of these,
//! or (Redis Cluster) one per master behind [`crate::cluster::Router`].

use crate::resp::{self, Value};
use crate::sentinel;
use crate::target::Target;
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

/// Completes when `switches` says the master moved away from `addr` (never
/// without Sentinel).
pub(crate) async fn moved_from(
    switches: &mut Option<watch::Receiver<u64>>,
    target: &Target,
    addr: &str,
) {
    let Some(rx) = switches else {
        return std::future::pending().await;
    };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if target.master().as_deref() != Some(addr) {
            return;
        }
    }
}

/// Whether an error reply means this Redis cannot serve as the master now
/// (`-READONLY`: a replica, demoted; `-LOADING`: loading its data): the
/// link reconnects, through Sentinel if it has one, instead of failing
/// every command against it.
pub(crate) fn not_master(e: &[u8]) -> bool {
    e.starts_with(b"READONLY") || e.starts_with(b"LOADING") || e.starts_with(b"MASTERDOWN")
}

/// One queued command.
struct Request {
    command: BytesMut,
    reply: Option<oneshot::Sender<Result<Value, BrokerError>>>,
    /// Replies to skip before this one's (`ASKING` sent in the same write,
    /// [`crate::cluster`]).
    skip: usize,
}

type Inflight = Arc<Mutex<VecDeque<Option<oneshot::Sender<Result<Value, BrokerError>>>>>>;

/// How long a command may wait for its reply by default; beyond it the call
/// fails (the reply, if it ever comes, is discarded).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The error a Redis error reply becomes for callers.
pub(crate) fn error_reply(e: &[u8]) -> BrokerError {
    unavailable(String::from_utf8_lossy(e))
}

/// One pipelined connection to one Redis. Cheap to share (`Arc`).
pub(crate) struct Conn {
    tx: mpsc::Sender<Request>,
    timeout: Duration,
    up: AtomicBool,
    /// Bumped each time the link comes up; watchers resynchronise then.
    generation: watch::Sender<u64>,
    /// Connection attempts that failed, for the logs and metrics.
    pub(crate) failures: AtomicU64,
    /// Why the last connection attempt failed, while not connected: a call
    /// made then fails with it ("not connected: the sentinels refused the
    /// password …") rather than with a bare "not connected".
    last_error: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl std::fmt::Display) -> BrokerError {
    BrokerError::Unavailable(format!("redis: {why}"))
}

impl Conn {
    /// Starts a connection to `target` (a single address or Sentinel) that
    /// runs `setup` on every new connection.
    pub(crate) fn start(target: Target, setup: Vec<Vec<Vec<u8>>>, timeout: Duration) -> Arc<Conn> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let link = Arc::new(Conn {
            tx,
            timeout,
            up: AtomicBool::new(false),
            generation: watch::channel(0).0,
            failures: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        tokio::spawn(run(Arc::downgrade(&link), target, setup, rx));
        link
    }

    /// Whether the connection is up.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// How many times it has connected (0: not yet).
    pub(crate) fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Queues one command now (preceded by `ASKING` in the same write when
    /// `asking`) and returns the future of its reply, error replies
    /// included as `Ok(Value::Error)`.
    pub(crate) fn call_raw<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        asking: bool,
    ) -> Result<
        impl std::future::Future<Output = Result<Value, BrokerError>> + Send + 'static,
        BrokerError,
    > {
        let rx = self.send(args, true, asking)?;
        let timeout = self.timeout;
        Ok(async move {
            let Some(rx) = rx else {
                return Err(unavailable("no reply channel"));
            };
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(unavailable("connection lost")),
                Err(_) => Err(unavailable(format!("no reply within {timeout:?}"))),
            }
        })
    }

    /// Sends one command without waiting for (or reading) its reply.
    pub(crate) fn fire<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<(), BrokerError> {
        self.send(args, false, false).map(|_| ())
    }

    fn send<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        want_reply: bool,
        asking: bool,
    ) -> Result<Option<oneshot::Receiver<Result<Value, BrokerError>>>, BrokerError> {
        if !self.is_up() {
            return Err(match lock(&self.last_error).as_deref() {
                Some(why) => unavailable(format!("not connected: {why}")),
                None => unavailable("not connected"),
            });
        }
        let mut command = BytesMut::new();
        if asking {
            resp::encode(&["ASKING"], &mut command);
        }
        resp::encode(args, &mut command);
        let (reply, rx) = if want_reply {
            let (t, r) = oneshot::channel();
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        self.tx
            .try_send(Request {
                command,
                reply,
                skip: usize::from(asking),
            })
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
    link: std::sync::Weak<Conn>,
    target: Target,
    setup: Vec<Vec<Vec<u8>>>,
    mut rx: mpsc::Receiver<Request>,
) {
    let mut backoff = Duration::from_millis(50);
    let mut generation = 0u64;
    let mut switches = target.switches();
    loop {
        let (stream, addr) = match connect(&target, &setup).await {
            Ok(s) => s,
            Err(e) => {
                let Some(l) = link.upgrade() else { return };
                *lock(&l.last_error) = Some(e.to_string());
                if l.failures.fetch_add(1, Ordering::Relaxed) % 20 == 0 {
                    tracing::warn!(addr = %target.addr, error = %e, "cannot reach redis; retrying");
                }
                drop(l);
                // Fail whatever queued meanwhile instead of letting it wait;
                // a master that moved (Sentinel) is tried at once.
                let sleep = tokio::time::sleep(backoff);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        _ = moved_from(&mut switches, &target, "") => {
                            backoff = Duration::from_millis(25);
                            break;
                        }
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
        tracing::info!(addr = %addr, "connected to redis");
        *lock(&l.last_error) = None;
        l.up.store(true, Ordering::Release);
        generation += 1;
        l.generation.send_replace(generation);
        drop(l);
        let inflight: Inflight = Arc::default();
        let (read, write) = stream.into_split();
        let mut reader = tokio::spawn(read_replies(read, inflight.clone()));
        let stopped = tokio::select! {
            s = write_requests(write, &mut rx, &inflight, &mut reader) => s,
            _ = moved_from(&mut switches, &target, &addr) => {
                tracing::warn!(from = %addr, "the redis master moved; reconnecting");
                false
            }
        };
        reader.abort();
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
        tracing::warn!(addr = %addr, "lost the connection to redis; reconnecting");
    }
}

fn fail(req: Request, why: &str) {
    if let Some(r) = req.reply {
        let _ = r.send(Err(unavailable(why)));
    }
}

/// Opens a connection and runs `setup` on it; returns it with the address
/// it reached. Through Sentinel: asks the sentinels where the master is,
/// checks with `ROLE` that it is one, and raises [`sentinel::EPOCH_KEY`] to
/// the master's config epoch before `setup` (so nothing this connection
/// runs can see an older epoch).
pub(crate) async fn connect(
    target: &Target,
    setup: &[Vec<Vec<u8>>],
) -> Result<(TcpStream, String), BrokerError> {
    if let Some(c) = &target.cluster {
        // The subscriber link: classic pub/sub reaches every node of the
        // cluster, so any node that answers will do.
        let mut errors = Vec::new();
        for i in 0..c.seeds().len().max(3) {
            let addr = c.any_node(i);
            match open(target, &addr, None, setup).await {
                Ok(s) => return Ok((s, addr)),
                Err(e) => errors.push(e.to_string()),
            }
        }
        return Err(unavailable(format!(
            "no cluster node reachable ({})",
            errors.join("; ")
        )));
    }
    let (addr, epoch) = match &target.sentinel {
        None => (target.addr.clone(), None),
        Some(s) => {
            let r = s.resolve().await?;
            (r.addr, Some(r.epoch))
        }
    };
    let result = open(target, &addr, epoch, setup).await;
    if result.is_err() {
        if let Some(s) = &target.sentinel {
            s.distrust();
        }
    }
    result.map(|s| (s, addr))
}

async fn open(
    target: &Target,
    addr: &str,
    epoch: Option<u64>,
    setup: &[Vec<Vec<u8>>],
) -> Result<TcpStream, BrokerError> {
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| unavailable(format!("connect to {addr} timed out")))?
        .map_err(|e| unavailable(format!("{addr}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    if let Some(p) = &target.password {
        commands.push(vec![b"AUTH".to_vec(), p.as_bytes().to_vec()]);
    }
    let role_at = commands.len();
    if epoch.is_some() {
        commands.push(vec![b"ROLE".to_vec()]);
    }
    if target.db != 0 {
        commands.push(vec![b"SELECT".to_vec(), target.db.to_string().into_bytes()]);
    }
    if let Some(e) = epoch {
        commands.push(vec![
            b"EVAL".to_vec(),
            sentinel::RAISE_EPOCH.as_bytes().to_vec(),
            b"1".to_vec(),
            sentinel::EPOCH_KEY.as_bytes().to_vec(),
            e.to_string().into_bytes(),
        ]);
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
                        "{addr}: setup command refused: {}",
                        String::from_utf8_lossy(&e)
                    )))
                }
                Some(v) => {
                    if epoch.is_some() && answered == role_at {
                        let role = v.items().first().and_then(Value::bytes).cloned();
                        if role.as_deref() != Some(b"master".as_slice()) {
                            return Err(unavailable(format!(
                                "{addr} is not a master (ROLE: {})",
                                String::from_utf8_lossy(role.as_deref().unwrap_or(b"?"))
                            )));
                        }
                    }
                    answered += 1;
                }
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
    reader: &mut tokio::task::JoinHandle<()>,
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
                        for _ in 0..req.skip {
                            q.push_back(None);
                        }
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
            _ = &mut *reader => return false,
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
                    let demoted = matches!(&v, Value::Error(e) if not_master(e));
                    if let Some(tx) = slot {
                        let _ = tx.send(Ok(v));
                    }
                    if demoted {
                        tracing::warn!("redis is not (or no longer) a master; reconnecting");
                        return;
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
