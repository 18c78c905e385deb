//! Hibernation: an idle plain-TCP WebSocket or raw TCP connection leaves tokio.
//!
//! Why: with one tokio task per connection, an idle connection costs its task
//! cell (384 bytes) and its I/O registration (`ScheduledIo`, 256 bytes) on top
//! of its client: 0.90 KiB, over uWebSockets' 0.37 (decision 0010). A
//! connection that has had nothing to do for `--hibernate-after` milliseconds
//! (no partial frame, outbox empty, nothing being written) ends its driver
//! future instead: its socket is taken out of tokio's reactor
//! (`TcpStream::into_std`) and registered in one epoll set shared by every
//! parked connection of the server, watched by one thread. What the
//! connection still needs — its handler (the session), its wire decoder and
//! its per-IP slot — is boxed in a [`Dormant`] and kept in a slab of small
//! entries, with the socket.
//!
//! A parked connection is resumed — a new driver task with a fresh
//! registration — when:
//! - its socket becomes readable with anything but a heartbeat answer, or
//!   hangs up (the epoll thread sees it);
//! - anything is pushed to its outbox, or a close is asked (publications,
//!   missing pongs, shutdown's 1001): while parked, the outbox's waker is a
//!   plain value (server, slot, generation) whose wake resumes it;
//! - shutdown ([`Parker::resume_all`]).
//!
//! Heartbeats do not resume it (decision 0010, "Heartbeats and
//! hibernation"): resuming for each ping allocated a task, a registration
//! and a timer, and parking again allocated the parked state, at other
//! addresses each time, so the allocator's pages of those sizes stayed
//! partly used (0.48 KiB per idle WebSocket with the default 25 s pings
//! against 0.33 with pings far apart). Instead the heartbeat sweep writes
//! the ping frame straight to a parked connection's socket
//! ([`ping_parked`]: a non-blocking write of 2 or 4 bytes), and the epoll
//! thread reads the answer there: on input to a connection pinged since it
//! parked, it peeks at what arrived and, if it is only whole heartbeat
//! answers ([`Wire::heartbeat_answer`]), consumes them, records the
//! client's activity and leaves it parked (input to a connection not
//! pinged resumes it at once, as before). Anything
//! else — a message, a partial or bad frame, a close, end of stream — is
//! left in the socket and the connection resumes to handle it as before;
//! so does a ping the socket would not take at once (it is then queued
//! as for a running connection, or, if only part of it went out, queued
//! as partly written).
//!
//! [`Wire::heartbeat_answer`]: crate::conn::Wire::heartbeat_answer
//!
//! Races: parking sets that waker under the outbox's lock, after checking the
//! queue is empty (a push before it is seen by the check, a push after it
//! wakes the new waker), then registers the socket with epoll (which reports
//! data that was already there). A resume asked while parking is under way is
//! only noted, and carried out by the parking thread once it is done, so the
//! resumed driver's waker can never be overwritten by the parked one. A
//! stale wake (an old waker, an old epoll event) finds another generation, or
//! an empty slot, and does nothing; at worst it resumes a connection early,
//! which only costs a park later.
//!
//! The tracker (shutdown's "one thing to wait on") holds one token while any
//! connection is parked, so `drain` waits for them as for running drivers.

use herald_core::outbox::Frame;
use herald_core::Client;
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{RawWaker, RawWakerVTable, Waker};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;

/// What a parked connection keeps, besides its socket: resumed with a new
/// registration as a new driver task.
pub trait Dormant: Send + 'static {
    /// Starts a driver for this connection again on `stream`.
    fn resume(self: Box<Self>, stream: TcpStream, parker: &Arc<Parker>);
    /// The client whose outbox wakes it.
    fn client(&self) -> &Arc<Client>;
    /// Renders its transport's heartbeat ping (a whole frame) into `out`;
    /// returns its length.
    fn ping(&self, out: &mut [u8; 14]) -> usize;
    /// The length of the whole heartbeat answer at the front of `buf`, if
    /// that is what it starts with ([`crate::conn::Wire::heartbeat_answer`]).
    fn heartbeat_answer(&self, buf: &[u8]) -> Option<usize>;
    /// Records that the peer was heard from (its answers were read here).
    fn heard(&self);
    /// Counts `bytes` written here, `whole` if they end a frame (metrics).
    fn wrote(&self, bytes: usize, whole: bool);
}

/// A slot of the slab: 24 bytes.
struct Entry {
    dormant: Option<Box<dyn Dormant>>,
    stream: Option<std::net::TcpStream>,
    gen: u16,
    state: State,
    /// A ping was written here since it parked: input is looked at for
    /// its answer. Until then any input resumes it at once, as it always
    /// did (no peek: a connection woken by its messages pays nothing for
    /// heartbeats). In the entry's padding.
    pinged: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Being parked: a resume asked now is noted, not carried out.
    Parking,
    /// Parking was under way when a resume was asked.
    Requested,
    /// Parked: the first resume asked takes it.
    Armed,
}

#[derive(Default)]
struct Slots {
    entries: Vec<Entry>,
    free: Vec<u32>,
    parked: usize,
    /// Held while anything is parked, so that shutdown waits for it.
    token: Option<TaskTrackerToken>,
}

/// What a resume takes out of the slab.
type Taken = (
    Box<dyn Dormant>,
    std::net::TcpStream,
    Option<TaskTrackerToken>,
);

impl Slots {
    fn take(&mut self, key: u32) -> Option<Taken> {
        let e = self.entries.get_mut(key as usize)?;
        let (Some(d), Some(s)) = (e.dormant.take(), e.stream.take()) else {
            return None;
        };
        e.gen = e.gen.wrapping_add(1);
        self.free.push(key);
        self.parked -= 1;
        let token = if self.parked == 0 {
            self.token.take()
        } else {
            None
        };
        Some((d, s, token))
    }
}

/// The parking place of one server: the slab, the epoll set and its thread.
pub struct Parker {
    id: u16,
    after: Duration,
    handle: tokio::runtime::Handle,
    tracker: TaskTracker,
    registry: mio::Registry,
    stop: mio::Waker,
    /// Set by [`Parker::resume_all`]: nothing parks any more.
    stopping: AtomicBool,
    /// Times a connection parked (metrics).
    parks: AtomicU64,
    /// Heartbeat pings written to parked connections (metrics).
    pings: AtomicU64,
    /// Heartbeat answers read from parked connections (metrics).
    pongs: AtomicU64,
    slots: Mutex<Slots>,
}

impl std::fmt::Debug for Parker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parker")
            .field("after", &self.after)
            .field("parked", &self.parked())
            .finish_non_exhaustive()
    }
}

/// The epoll token that stops the thread.
const STOP: Token = Token(usize::MAX);

/// Every running parker, by id: a parked connection's waker is three numbers
/// (no allocation), so it finds its parker here.
static PARKERS: RwLock<Vec<Option<Arc<Parker>>>> = RwLock::new(Vec::new());

impl Parker {
    /// Starts the parking place of a server whose idle connections park after
    /// `after`, on the current runtime; its drivers are tracked by `tracker`.
    pub fn start(after: Duration, tracker: TaskTracker) -> std::io::Result<Arc<Parker>> {
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let stop = mio::Waker::new(poll.registry(), STOP)?;
        let mut table = PARKERS.write().unwrap_or_else(|p| p.into_inner());
        let id = match table.iter().position(Option::is_none) {
            Some(i) => i,
            None if table.len() < usize::from(u16::MAX) => {
                table.push(None);
                table.len() - 1
            }
            None => return Err(std::io::Error::other("too many parkers")),
        };
        let parker = Arc::new(Parker {
            id: id as u16,
            after,
            handle: tokio::runtime::Handle::current(),
            tracker,
            registry,
            stop,
            stopping: AtomicBool::new(false),
            parks: AtomicU64::new(0),
            pings: AtomicU64::new(0),
            pongs: AtomicU64::new(0),
            slots: Mutex::new(Slots::default()),
        });
        table[id] = Some(parker.clone());
        drop(table);
        let p = parker.clone();
        std::thread::Builder::new()
            .name("herald-parker".into())
            .spawn(move || p.watch(poll))?;
        Ok(parker)
    }

    /// How long a connection stays idle before it parks.
    pub fn after(&self) -> Duration {
        self.after
    }

    /// Runs a resumed connection's driver on the runtime the parker was
    /// started on, tracked for shutdown like every driver.
    pub fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(&self, driver: F) {
        self.tracker.spawn_on(driver, &self.handle);
    }

    /// How many connections are parked now.
    pub fn parked(&self) -> usize {
        self.lock().parked
    }

    /// How many times a connection parked.
    pub fn parks(&self) -> u64 {
        self.parks.load(Ordering::Relaxed)
    }

    /// Heartbeat pings written and answers read while parked, so far.
    pub fn heartbeats(&self) -> (u64, u64) {
        (
            self.pings.load(Ordering::Relaxed),
            self.pongs.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // Every mutation of the slab is complete before anything can panic.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The epoll thread: resumes connections whose sockets became readable.
    fn watch(self: Arc<Self>, mut poll: mio::Poll) {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = poll.poll(&mut events, None) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "parked connections: epoll failed");
                return;
            }
            for ev in events.iter() {
                if ev.token() == STOP {
                    return;
                }
                let t = ev.token().0 as u64;
                self.readable(t as u32, (t >> 32) as u16);
            }
        }
    }

    /// Stops the epoll thread and forgets this parker (after shutdown).
    /// Connections still parked are dropped with it.
    pub fn stop(&self) {
        let _ = self.stop.wake();
        let mut table = PARKERS.write().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = table.get_mut(usize::from(self.id)) {
            *slot = None;
        }
    }

    /// Parks a connection whose driver just ended: `stream` is its socket,
    /// already out of tokio's reactor. If anything is queued for it by now,
    /// or the socket cannot be watched, it is resumed at once.
    pub fn park(self: &Arc<Self>, stream: std::net::TcpStream, dormant: Box<dyn Dormant>) {
        let fd = stream.as_raw_fd();
        let client = dormant.client().clone();
        let (key, gen) = {
            let mut s = self.lock();
            let key = match s.free.pop() {
                Some(k) => k,
                None => {
                    s.entries.push(Entry {
                        dormant: None,
                        stream: None,
                        gen: 0,
                        state: State::Armed,
                        pinged: false,
                    });
                    (s.entries.len() - 1) as u32
                }
            };
            let e = &mut s.entries[key as usize];
            e.dormant = Some(dormant);
            e.stream = Some(stream);
            e.state = State::Parking;
            e.pinged = false;
            let gen = e.gen;
            s.parked += 1;
            if s.token.is_none() {
                s.token = Some(self.tracker.token());
            }
            (key, gen)
        };
        // Check-after-register: the waker is set under the queue's lock only
        // if nothing is queued; any later push or close wakes it.
        let waker = waker(self.id, key, gen);
        let idle = client.outbox.with_queue(|q| {
            if q.frames.is_empty() && q.closing().is_none() {
                q.set_waker(&waker);
                q.release_buffer();
                true
            } else {
                false
            }
        });
        drop(client);
        let token = Token(key as usize | (usize::from(gen) << 32));
        let watched = idle
            && self
                .registry
                .register(&mut SourceFd(&fd), token, Interest::READABLE)
                .is_ok();
        let mut s = self.lock();
        let e = &mut s.entries[key as usize];
        if watched && e.state == State::Parking && !self.stopping.load(Ordering::SeqCst) {
            e.state = State::Armed;
            self.parks.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let taken = s.take(key);
        drop(s);
        if let Some(t) = taken {
            self.resume(t);
        }
    }

    /// The socket of slot `key` (of generation `gen`) reported input or a
    /// hang-up: if it was pinged here, heartbeat answers are read here and
    /// the connection stays parked; anything else resumes it, with those
    /// bytes still unread.
    fn readable(self: &Arc<Self>, key: u32, gen: u16) {
        let s = self.lock();
        if let Some(Entry {
            dormant: Some(d),
            stream: Some(stream),
            gen: g,
            state: State::Armed,
            pinged: true,
        }) = s.entries.get(key as usize)
        {
            if *g == gen {
                let (answers, stay) = read_answers(&**d, stream);
                if answers > 0 {
                    d.heard();
                    self.pongs.fetch_add(answers, Ordering::Relaxed);
                }
                if stay {
                    return;
                }
            }
        }
        drop(s);
        self.request(key, gen);
    }

    /// Writes the heartbeat ping of slot `key` (generation `gen`) to its
    /// socket if it is parked. Called under its outbox's lock, with nothing
    /// queued (see [`ping_parked`]).
    fn write_ping(&self, key: u32, gen: u16) -> Wrote {
        let mut s = self.lock();
        let Some(Entry {
            dormant: Some(d),
            stream: Some(stream),
            gen: g,
            state: State::Armed,
            pinged,
        }) = s.entries.get_mut(key as usize)
        else {
            return Wrote::Nothing;
        };
        if *g != gen {
            return Wrote::Nothing;
        }
        let mut frame = [0u8; 14];
        let len = d.ping(&mut frame);
        let mut out: &std::net::TcpStream = &*stream;
        match out.write(&frame[..len]) {
            Ok(n) if n == len => {
                d.wrote(n, true);
                *pinged = true;
                self.pings.fetch_add(1, Ordering::Relaxed);
                Wrote::All
            }
            Ok(n) if n > 0 => {
                d.wrote(n, false);
                Wrote::Part(n as u32)
            }
            // Would block, failed, or took nothing: the connection resumes
            // to write it (or to find the socket gone).
            _ => Wrote::Nothing,
        }
    }

    /// Asks for the connection in slot `key` (of generation `gen`) to resume.
    fn request(self: &Arc<Self>, key: u32, gen: u16) {
        let mut s = self.lock();
        let Some(e) = s.entries.get_mut(key as usize) else {
            return;
        };
        if e.gen != gen || e.dormant.is_none() {
            return;
        }
        match e.state {
            State::Parking => e.state = State::Requested,
            State::Requested => {}
            State::Armed => {
                let taken = s.take(key);
                drop(s);
                if let Some(t) = taken {
                    self.resume(t);
                }
            }
        }
    }

    /// Resumes every parked connection and parks none from now on (shutdown:
    /// each then sends its close).
    pub fn resume_all(self: &Arc<Self>) {
        self.stopping.store(true, Ordering::SeqCst);
        let all: Vec<Taken> = {
            let mut s = self.lock();
            let keys: Vec<u32> = (0..s.entries.len() as u32)
                .filter(|&k| s.entries[k as usize].state == State::Armed)
                .collect();
            keys.into_iter().filter_map(|k| s.take(k)).collect()
        };
        for t in all {
            self.resume(t);
        }
    }

    /// Hands a connection back to tokio as a new driver task. May run under
    /// its outbox's lock (a push's wake): nothing here locks an outbox.
    fn resume(self: &Arc<Self>, (dormant, stream, token): Taken) {
        let fd = stream.as_raw_fd();
        let _ = self.registry.deregister(&mut SourceFd(&fd));
        let _guard = self.handle.enter();
        match TcpStream::from_std(stream) {
            Ok(stream) => dormant.resume(stream, self),
            Err(e) => {
                tracing::debug!(error = %e, "could not resume a parked connection");
                // Dropping the session unregisters the client: not under the
                // lock of its outbox, which a wake may hold.
                self.handle.spawn(async move { drop(dormant) });
            }
        }
        drop(token);
    }
}

/// What [`Parker::write_ping`] managed.
enum Wrote {
    /// The whole ping: the connection stays parked.
    All,
    /// Only this many bytes: the rest must go out before anything else.
    Part(u32),
    /// Nothing (not parked, or the socket would not take it).
    Nothing,
}

/// Reads every whole heartbeat answer waiting in a parked connection's
/// socket: how many it read, and whether it may stay parked (nothing else
/// waits: no other input, no end of stream, no error). What is not an
/// answer is only peeked at, so the resumed driver reads it as before.
fn read_answers(d: &dyn Dormant, stream: &std::net::TcpStream) -> (u64, bool) {
    // Room for a WebSocket pong with the largest payload (131 bytes).
    let mut buf = [0u8; 256];
    let mut answers = 0;
    let mut input: &std::net::TcpStream = stream;
    loop {
        let n = match stream.peek(&mut buf) {
            Ok(0) => return (answers, false),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return (answers, true),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return (answers, false),
        };
        let mut whole = 0;
        let mut count = 0;
        while let Some(len) = buf.get(whole..n).and_then(|b| d.heartbeat_answer(b)) {
            whole += len;
            count += 1;
        }
        if whole == 0 {
            return (answers, false);
        }
        // Consume exactly the answers: the peek showed they are there.
        let mut taken = 0;
        while taken < whole {
            match input.read(&mut buf[taken..whole]) {
                Ok(0) => return (answers, false),
                Ok(m) => taken += m,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return (answers, false),
            }
        }
        answers += count;
    }
}

/// Writes a heartbeat ping to `client` where it is parked, without resuming
/// it: true if that was done (the whole ping went out, or part of it and
/// the rest is queued and resumes it). False if it is not parked, has
/// anything queued, or its socket would take none of it: the caller then
/// pushes the ping to its outbox as for a running connection (which
/// resumes a parked one, as before). Run by the heartbeat sweep.
pub fn ping_parked(client: &Client) -> bool {
    client.outbox.with_queue(|q| {
        if !q.frames.is_empty() || q.closing().is_some() {
            return false;
        }
        let Some((id, key, gen)) = q.waker().and_then(parked_at) else {
            return false;
        };
        let parker = match PARKERS.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            Some(Some(p)) => p.clone(),
            _ => return false,
        };
        // Under the queue's lock (the same order as a push's wake: queue,
        // then slab), so nothing is queued between the check and the write.
        match parker.write_ping(key, gen) {
            Wrote::All => true,
            Wrote::Part(n) => {
                // Wakes the parked waker: the connection resumes and sends
                // the rest first.
                q.push_started(Frame::Ping, n);
                true
            }
            Wrote::Nothing => false,
        }
    })
}

/// Where a parked connection's waker says it is parked: (parker id, slot
/// key, generation); `None` for any other waker.
fn parked_at(w: &Waker) -> Option<(usize, u32, u16)> {
    if !std::ptr::eq(w.vtable(), &VTABLE) {
        return None;
    }
    let v = w.data() as usize as u64;
    Some(((v >> 48) as usize, v as u32, (v >> 32) as u16))
}

/// A parked connection's waker: the parker's id, the slot's generation and
/// its key, packed in the pointer (no allocation, nothing to free).
fn waker(id: u16, key: u32, gen: u16) -> Waker {
    let data = (u64::from(id) << 48) | (u64::from(gen) << 32) | u64::from(key);
    // SAFETY: the vtable's functions never dereference the data pointer: it
    // is only a number, so any value is valid and nothing needs freeing.
    // (The safe way, `Arc<impl Wake>`, costs an allocation per parked
    // connection: 32 bytes of a 0.35 KiB budget.)
    #[allow(unsafe_code)]
    unsafe {
        Waker::from_raw(RawWaker::new(data as usize as *const (), &VTABLE))
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_raw, wake_raw, wake_raw, drop_raw);

fn clone_raw(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}

fn wake_raw(data: *const ()) {
    let v = data as usize as u64;
    let (id, gen, key) = ((v >> 48) as usize, (v >> 32) as u16, v as u32);
    let parker = match PARKERS.read().unwrap_or_else(|p| p.into_inner()).get(id) {
        Some(Some(p)) => p.clone(),
        _ => return,
    };
    parker.request(key, gen);
}

fn drop_raw(_: *const ()) {}

const _: () = assert!(std::mem::size_of::<Entry>() == 24);
const _: () = assert!(std::mem::size_of::<usize>() == 8, "wakers pack 64 bits");

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// A slab entry is 24 bytes (decision 0010's account; the boxed
    /// handler it points to is measured in `conn`'s tests).
    #[test]
    fn a_slab_entry_is_small() {
        println!("Entry: {} bytes", size_of::<Entry>());
        assert_eq!(size_of::<Entry>(), 24);
    }

    /// A parked connection that only records its resumes, with the raw TCP
    /// transport's heartbeat (an empty frame: four zero bytes).
    struct Probe {
        client: Arc<Client>,
        resumed: Arc<AtomicU64>,
    }

    impl Dormant for Probe {
        fn resume(self: Box<Self>, _: TcpStream, _: &Arc<Parker>) {
            self.resumed.fetch_add(1, Ordering::SeqCst);
        }

        fn client(&self) -> &Arc<Client> {
            &self.client
        }

        fn ping(&self, out: &mut [u8; 14]) -> usize {
            out[..4].fill(0);
            4
        }

        fn heartbeat_answer(&self, buf: &[u8]) -> Option<usize> {
            (buf.get(..4)? == [0u8; 4]).then_some(4)
        }

        fn heard(&self) {
            self.client.touch(self.client.last_seen() + 1);
        }

        fn wrote(&self, _: usize, _: bool) {}
    }

    /// A connected pair of real sockets: the server's end (to park) and the
    /// peer's.
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let peer = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (server, _) = l.accept().expect("accept");
        server.set_nonblocking(true).expect("nonblocking");
        (server, peer)
    }

    fn probe() -> (Box<Probe>, Arc<Client>, Arc<AtomicU64>) {
        let client = Arc::new(Client::new(1, herald_proto::Encoding::Json, 1 << 20, 0));
        let resumed = Arc::new(AtomicU64::new(0));
        let p = Box::new(Probe {
            client: client.clone(),
            resumed: resumed.clone(),
        });
        (p, client, resumed)
    }

    #[tokio::test]
    async fn a_push_before_parking_is_seen_and_one_after_resumes() {
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        // Queued before the waker is set (the race's losing order): parking
        // sees it and resumes at once.
        let (p, client, resumed) = probe();
        client.outbox.push(herald_core::outbox::Frame::Ping);
        let (server, _peer) = pair();
        parker.park(server, p);
        assert_eq!(resumed.load(Ordering::SeqCst), 1);
        assert_eq!(parker.parked(), 0);
        // Queued after: the parked waker resumes it, once.
        let (p, client, resumed) = probe();
        let (server, _peer2) = pair();
        parker.park(server, p);
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (0, 1));
        client.outbox.push(herald_core::outbox::Frame::Ping);
        client.outbox.push(herald_core::outbox::Frame::Ping);
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (1, 0));
        parker.stop();
    }

    /// A parked connection's queue holds no buffer: the one left by its
    /// earlier frames (160 bytes after a first reply) is freed when it parks.
    #[tokio::test]
    async fn parking_frees_the_queue_buffer() {
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, client, resumed) = probe();
        client.outbox.push(herald_core::outbox::Frame::Ping);
        client.outbox.with_queue(|q| q.advance(1, 0));
        assert!(client.outbox.with_queue(|q| q.frames.capacity()) > 0);
        let (server, _peer) = pair();
        parker.park(server, p);
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (0, 1));
        assert_eq!(client.outbox.with_queue(|q| q.frames.capacity()), 0);
        // A push still resumes it.
        client.outbox.push(herald_core::outbox::Frame::Ping);
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (1, 0));
        parker.stop();
    }

    #[tokio::test]
    async fn input_resumes_a_parked_connection() {
        use std::io::Write;
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, _client, resumed) = probe();
        let (server, mut peer) = pair();
        parker.park(server, p);
        assert_eq!(parker.parked(), 1);
        peer.write_all(b"x").expect("write");
        // The epoll thread resumes it; bounded wait, no timing asserted.
        for _ in 0..1000 {
            if resumed.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (1, 0));
        parker.stop();
    }

    /// Waits (bounded) until `f` holds; the epoll thread acts on its own.
    async fn until(mut f: impl FnMut() -> bool) {
        for _ in 0..2000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(f(), "never happened");
    }

    /// A heartbeat ping reaches a parked connection's peer without resuming
    /// it, and the peer's answer is read there: still parked, the client's
    /// activity recorded, both counted. Then a half answer resumes it, with
    /// the bytes left for the driver.
    #[tokio::test]
    async fn heartbeats_are_written_and_answered_while_parked() {
        use std::io::{Read, Write};
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, client, resumed) = probe();
        let (server, mut peer) = pair();
        parker.park(server, p);
        assert_eq!(parker.parked(), 1);
        for round in 1..=3u64 {
            assert!(ping_parked(&client));
            let mut ping = [9u8; 4];
            peer.read_exact(&mut ping).expect("ping");
            assert_eq!(ping, [0; 4]);
            let seen = client.last_seen();
            peer.write_all(&[0; 4]).expect("pong");
            until(|| parker.heartbeats() == (round, round)).await;
            assert_eq!(client.last_seen(), seen + 1);
            assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (0, 1));
        }
        // Nothing was queued and no buffer allocated for it.
        assert_eq!(client.outbox.with_queue(|q| q.frames.capacity()), 0);
        // Part of an answer: not an answer yet, so the driver gets it.
        peer.write_all(&[0, 0]).expect("half");
        until(|| resumed.load(Ordering::SeqCst) == 1).await;
        assert_eq!(parker.parked(), 0);
        assert_eq!(parker.heartbeats(), (3, 3));
        parker.stop();
    }

    /// Input that is not only heartbeat answers — a message after an answer,
    /// the end of the stream — resumes the connection; the answers before it
    /// are read, the rest is left unread for the driver.
    #[tokio::test]
    async fn anything_but_an_answer_resumes_and_stays_unread() {
        use std::io::Write;
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, client, resumed) = probe();
        let (server, mut peer) = pair();
        let watch = server.try_clone().expect("clone");
        parker.park(server, p);
        assert!(ping_parked(&client));
        peer.write_all(&[0, 0, 0, 0, 0, 0, 0, 1, b'x'])
            .expect("write");
        until(|| resumed.load(Ordering::SeqCst) == 1).await;
        assert_eq!(parker.heartbeats(), (1, 1));
        let mut left = [0u8; 16];
        assert_eq!(watch.peek(&mut left).expect("peek"), 5);
        assert_eq!(&left[..5], &[0, 0, 0, 1, b'x']);
        // A peer that closes while parked resumes it too (its driver sees
        // the end of the stream and cleans up).
        let (p, _client, resumed) = probe();
        let (server, peer) = pair();
        parker.park(server, p);
        drop(peer);
        until(|| resumed.load(Ordering::SeqCst) == 1).await;
        assert_eq!(parker.parked(), 0);
        parker.stop();
    }

    /// A connection not pinged since it parked is resumed by any input, an
    /// answer too, without its socket being read (as before heartbeats
    /// were answered in place).
    #[tokio::test]
    async fn input_to_a_connection_not_pinged_resumes_it_unread() {
        use std::io::Write;
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, _client, resumed) = probe();
        let (server, mut peer) = pair();
        let watch = server.try_clone().expect("clone");
        parker.park(server, p);
        peer.write_all(&[0, 0, 0, 0]).expect("write");
        until(|| resumed.load(Ordering::SeqCst) == 1).await;
        assert_eq!(parker.heartbeats(), (0, 0));
        let mut left = [0u8; 8];
        assert_eq!(watch.peek(&mut left).expect("peek"), 4);
        parker.stop();
    }

    /// A parked connection whose socket takes no more bytes is not pinged
    /// there: the ping is queued as for a running connection, which resumes
    /// it to write it when it can.
    #[tokio::test]
    async fn a_ping_the_socket_would_block_on_resumes() {
        use std::io::Write;
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        let (p, client, resumed) = probe();
        let (server, _peer) = pair();
        // Fill the socket (the peer reads nothing) before parking.
        let mut fill = server.try_clone().expect("clone");
        let chunk = [7u8; 65536];
        loop {
            match fill.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        parker.park(server, p);
        assert_eq!(parker.parked(), 1);
        assert!(!ping_parked(&client));
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (0, 1));
        // What the heartbeat sweep then does.
        client.outbox.push(herald_core::outbox::Frame::Ping);
        assert_eq!((resumed.load(Ordering::SeqCst), parker.parked()), (1, 0));
        assert_eq!(parker.heartbeats(), (0, 0));
        parker.stop();
    }

    /// Only a parked connection with nothing queued is pinged in place.
    #[tokio::test]
    async fn only_parked_idle_connections_are_pinged_in_place() {
        let parker = Parker::start(Duration::from_millis(1), TaskTracker::new()).expect("start");
        // Not parked: its waker is a running driver's (here: none).
        let (_p, client, _) = probe();
        assert!(!ping_parked(&client));
        // Closing: not pinged.
        let (p, client, _) = probe();
        let (server, _peer) = pair();
        parker.park(server, p);
        client.outbox.with_queue(|q| {
            assert!(parked_at(q.waker().expect("waker")).is_some());
        });
        client.outbox.close(1000, false);
        assert!(!ping_parked(&client));
        assert_eq!(parker.heartbeats(), (0, 0));
        parker.stop();
    }

    #[test]
    fn wakers_carry_id_generation_and_key() {
        let w = waker(7, 0xdead_beef, 0x1234);
        let v = w.data() as usize as u64;
        assert_eq!(
            ((v >> 48) as u16, (v >> 32) as u16, v as u32),
            (7, 0x1234, 0xdead_beef)
        );
        assert_eq!(parked_at(&w), Some((7, 0xdead_beef, 0x1234)));
        assert_eq!(parked_at(std::task::Waker::noop()), None);
        // Waking a parker that does not exist does nothing.
        w.wake();
    }
}
