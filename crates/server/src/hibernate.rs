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
//! - its socket becomes readable or hangs up (the epoll thread sees it);
//! - anything is pushed to its outbox, or a close is asked (heartbeat pings,
//!   publications, missing pongs, shutdown's 1001): while parked, the outbox's
//!   waker is a plain value (server, slot, generation) whose wake resumes it;
//! - shutdown ([`Parker::resume_all`]).
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

use herald_core::Client;
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};
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
}

/// A slot of the slab: 24 bytes.
struct Entry {
    dormant: Option<Box<dyn Dormant>>,
    stream: Option<std::net::TcpStream>,
    gen: u16,
    state: State,
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
                self.request(t as u32, (t >> 32) as u16);
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
                    });
                    (s.entries.len() - 1) as u32
                }
            };
            let e = &mut s.entries[key as usize];
            e.dormant = Some(dormant);
            e.stream = Some(stream);
            e.state = State::Parking;
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

    /// A parked connection that only records its resumes.
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

    #[test]
    fn wakers_carry_id_generation_and_key() {
        let w = waker(7, 0xdead_beef, 0x1234);
        let v = w.data() as usize as u64;
        assert_eq!(
            ((v >> 48) as u16, (v >> 32) as u16, v as u32),
            (7, 0x1234, 0xdead_beef)
        );
        // Waking a parker that does not exist does nothing.
        w.wake();
    }
}
