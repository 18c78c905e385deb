//! One Bayeux session: the protocol's state machine over a Herald
//! [`Session`], shared by both transports.
//!
//! [`process`] serves one batch: the handshake opens a session (its `ext`
//! may carry Herald's JWT), `/meta/subscribe`, `/meta/unsubscribe` and
//! publications become Herald commands (encoded and handed to
//! [`Session::on_message`], so that they count against Herald's rate limit
//! and metrics as any command does), `/meta/disconnect` ends the session,
//! and `/meta/connect` is returned to the transport, which holds it.
//! Herald answers its commands through the client's queue; [`BayeuxSession::drain`]
//! takes everything queued, keeps deliveries as they are
//! ([`herald_bayeux::reply::is_delivery`]) and turns each Herald reply into
//! the Bayeux reply of the message it was for (the `pending` map).
//!
//! `/service/**`: Herald has no services. A publication to a service
//! channel is acknowledged (`successful: true`) and goes nowhere, a
//! subscription to one succeeds and never receives anything, as on a CometD
//! server with no service listener (docs/bayeux.md).
//!
//! The `ack` extension (a client that sends `ext.ack: true` in its
//! handshake): deliveries then go out only with `/meta/connect` replies, each
//! reply numbered (`ext.ack`, a batch number), and every delivery stays in
//! the session until a later connect acknowledges its batch (`ext.ack: N`
//! confirms batches up to N). A connect that does not acknowledge the last
//! batch (its reply was lost: a dropped long-poll, a closed socket) is
//! answered at once with every unacknowledged delivery again, in order:
//! at-least-once delivery for as long as the session lives. What waits is
//! bounded like the client's queue (`client_queue_bytes`); beyond it the
//! session ends (402 next).
//!
//! Waiting: the queue wakes one waker; a [`Relay`] registered as that waker
//! wakes every task waiting on the session (a held connect, a batch waiting
//! for its replies, the WebSocket pump), so none of them steals the other's
//! wake-up. Whichever drains the queue first, a long-polling request's
//! replies go in its own response ([`Processed::batch`]): CometD fails a
//! subscription whose request is answered without its reply, and the
//! held connect that used to take it (found by the outside Bayeux test,
//! about one run in three) left the client with no listener. No lock is
//! held across an `.await`.

use super::Bayeux;
use bytes::BytesMut;
use herald_bayeux::channel::{self, Channel, Meta};
use herald_bayeux::message::{self, Invalid, Message};
use herald_bayeux::reply::{self, Advice, Reconnect, Reply};
use herald_bayeux::resume;
use herald_bayeux::BayeuxError;
use herald_core::metrics::Transport;
use herald_core::outbox::Frame;
use herald_core::{Client, Node, Session};
use herald_proto::{Command, Encoding, Push, Request, ServerMsg};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Wakes every task waiting on a session (see the module docs).
#[derive(Debug, Default)]
pub struct Relay {
    /// The waiters.
    pub notify: Notify,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.notify.notify_waiters();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.notify.notify_waiters();
    }
}

/// A Herald command waiting for its reply.
#[derive(Debug)]
struct Pending {
    /// The Bayeux channel of the message (`/meta/subscribe`, or where it
    /// published).
    channel: String,
    /// The message's id.
    id: Option<Box<RawValue>>,
    /// Subscribe and unsubscribe: the Bayeux channel.
    subscription: Option<String>,
    /// An `ack` session's subscription to an exact channel: the Herald
    /// channel, and whether it asked to recover from the cookie's position.
    tracked: Option<(String, bool)>,
    /// The long-polling request whose response must carry the reply
    /// ([`Processed::batch`]); `None`: whoever drains first (a websocket,
    /// where every reply goes on the one socket).
    batch: Option<u64>,
}

/// The `ack` extension's state of a session (see the module docs).
#[derive(Debug)]
struct Acks {
    /// The number of the last batch sent (0: none yet).
    batch: u64,
    /// Deliveries not sent yet.
    queued: Vec<Vec<u8>>,
    /// Deliveries sent in a batch not acknowledged yet, oldest first.
    unacked: std::collections::VecDeque<(u64, Vec<u8>)>,
    /// Bytes in `queued` and `unacked`.
    bytes: usize,
    /// Renders what a subscription recovers.
    render: Arc<super::BayeuxRender>,
    /// Exact channels subscribed (Herald names): their epoch.
    epochs: HashMap<String, String>,
    /// What the client acknowledged, by exact channel: the offset of the
    /// last publication (or, before any, of the channel when subscribed).
    acked: HashMap<String, u64>,
    /// The live entries of the `BAYEUX_ACKED` cookie the handshake brought,
    /// positions to subscribe from (herald_bayeux::resume).
    resume: Vec<resume::Entry>,
    /// What was last written to the shared store for this session (its
    /// entries without their time) and when (Unix seconds): websocket
    /// sessions only ([`super::positions`]).
    stored: Option<(String, u64)>,
}

impl Acks {
    /// Queues `m` to go with the next connect reply; false when that makes
    /// more than `limit` bytes wait.
    fn queue(&mut self, m: Vec<u8>, limit: usize) -> bool {
        self.bytes += m.len();
        self.queued.push(m);
        self.bytes <= limit
    }
}

#[derive(Debug)]
struct State {
    herald: Option<Session>,
    next_id: u32,
    pending: HashMap<u32, Pending>,
    /// Set when the client speaks the `ack` extension.
    acks: Option<Acks>,
    /// Replies drained by another request than the one they belong to (a
    /// held connect woke first): each waits for its own request's
    /// [`collect`], by [`Processed::batch`].
    answered: Vec<(u64, Vec<u8>)>,
}

/// One Bayeux client.
#[derive(Debug)]
pub struct BayeuxSession {
    /// Its `clientId`: 128 random bits as 32 hex digits, its only credential.
    pub id: String,
    client: Arc<Client>,
    state: Mutex<State>,
    relay: Arc<Relay>,
    waker: Waker,
    /// Node milliseconds of its last message or connect reply.
    last_seen: AtomicU64,
    /// Connects being held now.
    held: AtomicU32,
    /// Counts connects held: a long-poll connect whose number is no longer
    /// the latest was superseded and answers at once, so one session holds
    /// at most one long-poll however many connects it sends.
    generation: AtomicU64,
    /// Ended (disconnect, expiry, Herald closed it).
    gone: AtomicBool,
    /// Ended by the client's `/meta/disconnect`.
    disconnected: AtomicBool,
}

fn client_id() -> Option<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    Some(format!("{:032x}", u128::from_be_bytes(b)))
}

impl BayeuxSession {
    /// A session of `client` (a rendered client of `node`), authenticated
    /// with `token`.
    pub fn open(
        node: Arc<Node>,
        client: Arc<Client>,
        token: Option<&str>,
    ) -> Result<BayeuxSession, herald_core::AuthError> {
        let mut herald =
            Session::new(node.clone(), client.clone()).with_transport(Transport::Bayeux);
        herald.authenticate(token)?;
        let relay = Arc::new(Relay::default());
        let id = client_id().unwrap_or_else(|| format!("{:032x}", client.id));
        Ok(BayeuxSession {
            id,
            client,
            state: Mutex::new(State {
                herald: Some(herald),
                next_id: 1,
                pending: HashMap::new(),
                acks: None,
                answered: Vec::new(),
            }),
            waker: Waker::from(relay.clone()),
            relay,
            last_seen: AtomicU64::new(node.now_ms()),
            held: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            gone: AtomicBool::new(false),
            disconnected: AtomicBool::new(false),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The waiters of this session.
    pub fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// Records activity at node millisecond `now`, for the session's expiry
    /// and for Herald's heartbeat sweep (which would otherwise close the
    /// client as silent: its requests are its heartbeats).
    pub fn touch(&self, now: u64) {
        self.last_seen.store(now, Ordering::Relaxed);
        self.client.touch((now / 1000) as u32);
    }

    /// Keeps the session's client alive for Herald's heartbeat sweep (node
    /// second `now`), which would otherwise ping it (into a queue no socket
    /// reads) and close it as silent: a Bayeux session's life is decided by
    /// `max_interval` alone ([`super::Bayeux::reap`]).
    pub fn keep_alive(&self, now: u32) {
        self.client.touch(now);
    }

    /// Whether the session has ended.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire) || self.client.outbox.is_closing()
    }

    /// Whether the client ended it with `/meta/disconnect`.
    pub fn was_disconnected(&self) -> bool {
        self.disconnected.load(Ordering::Acquire)
    }

    /// A connect is held from now on (until [`BayeuxSession::release`]);
    /// returns its number, and wakes the connect it supersedes.
    pub fn hold(&self) -> u64 {
        self.held.fetch_add(1, Ordering::AcqRel);
        let n = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.relay.notify.notify_waiters();
        n
    }

    /// Whether the connect numbered `n` was superseded by a later one.
    pub fn superseded(&self, n: u64) -> bool {
        self.generation.load(Ordering::Acquire) != n
    }

    /// A held connect was answered at node millisecond `now`.
    pub fn release(&self, now: u64) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        self.touch(now);
    }

    /// Whether [`Bayeux::reap`] should forget it at node millisecond `now`.
    pub fn expired(&self, now: u64, max_interval: u64) -> bool {
        if self.held.load(Ordering::Acquire) > 0 {
            return false;
        }
        self.is_gone() || now.saturating_sub(self.last_seen.load(Ordering::Relaxed)) > max_interval
    }

    /// Ends the Herald session (its subscriptions go) and wakes every waiter.
    pub fn end(&self) {
        self.gone.store(true, Ordering::Release);
        let herald = self.state().herald.take();
        drop(herald);
        self.relay.notify.notify_waiters();
    }

    /// Hands one Herald command to the Herald session; its reply will be
    /// translated into the Bayeux reply `pending` describes.
    fn command(&self, cmd: Command, pending: Pending) {
        let mut st = self.state();
        let id = st.next_id;
        st.next_id = st.next_id.wrapping_add(1).max(1);
        st.pending.insert(id, pending);
        let mut buf = BytesMut::with_capacity(128);
        Encoding::Json.encode_request(&Request { id, cmd }, &mut buf);
        if let Some(h) = st.herald.as_mut() {
            h.on_message(&buf, false);
        }
    }

    /// Turns the `ack` extension on (the handshake asked for it):
    /// deliveries rendered by `render` (with their offsets), exact channels
    /// subscribed from the positions `resume` gives.
    pub fn enable_acks(&self, render: Arc<super::BayeuxRender>, resume: Vec<resume::Entry>) {
        self.state().acks = Some(Acks {
            batch: 0,
            queued: Vec::new(),
            unacked: std::collections::VecDeque::new(),
            bytes: 0,
            render,
            epochs: HashMap::new(),
            acked: HashMap::new(),
            resume,
            stored: None,
        });
    }

    /// A connect acknowledged every batch up to `batch`: what they carried
    /// is forgotten, and the acknowledged position of each exact channel
    /// moves to its last publication among them.
    pub fn acknowledge(&self, batch: u64) {
        if let Some(a) = self.state().acks.as_mut() {
            while a.unacked.front().is_some_and(|(n, _)| *n <= batch) {
                if let Some((_, m)) = a.unacked.pop_front() {
                    a.bytes = a.bytes.saturating_sub(m.len());
                    let Some((name, offset)) = reply::offset_of(&m) else {
                        continue;
                    };
                    let Ok(herald) = channel::to_herald(&name) else {
                        continue;
                    };
                    if a.epochs.contains_key(&herald) {
                        let at = a.acked.entry(herald).or_insert(0);
                        *at = (*at).max(offset);
                    }
                }
            }
        }
    }

    /// The tag this session's entries carry in the `BAYEUX_ACKED` cookie.
    fn tag(&self) -> &str {
        self.id.get(..12).unwrap_or(&self.id)
    }

    /// With the `ack` extension, the `BAYEUX_ACKED` cookie value a connect
    /// reply sets at Unix second `now`: this session's acknowledged
    /// positions, then the live entries of other sessions of the browser
    /// from the request's `cookie`. `None` without the extension.
    pub fn acked_cookie(&self, cookie: Option<&str>, now: u64) -> Option<String> {
        let st = self.state();
        let a = st.acks.as_ref()?;
        let tag = self.tag();
        let mut entries = own_entries(a, tag, now);
        let others = cookie.map(resume::decode).unwrap_or_default();
        entries.extend(
            resume::live(others, Some(now))
                .into_iter()
                .filter(|e| e.tag != tag),
        );
        Some(resume::encode(&entries))
    }

    /// With the `ack` extension, the value to write to the shared store at
    /// Unix second `now` ([`super::positions`]): this session's
    /// acknowledged positions, when they moved since the last write or that
    /// write is `refresh` seconds old; `None` otherwise (nothing to write).
    pub fn positions_to_store(&self, now: u64, refresh: u64) -> Option<String> {
        if self.disconnected.load(Ordering::Acquire) {
            return None;
        }
        let mut st = self.state();
        let a = st.acks.as_mut()?;
        let tag = self.tag();
        let timeless = resume::encode(&own_entries(a, tag, 0));
        if let Some((last, at)) = &a.stored {
            if *last == timeless && now < at.saturating_add(refresh) {
                return None;
            }
        }
        a.stored = Some((timeless, now));
        Some(resume::encode(&own_entries(a, tag, now)))
    }

    /// With the `ack` extension, the position to subscribe exact Herald
    /// channel `channel` from: the cookie's, once.
    fn take_resume(&self, channel: &str) -> Option<herald_proto::Position> {
        let mut st = self.state();
        let a = st.acks.as_mut()?;
        let (epoch, offset) = resume::resume_from(&a.resume, channel)?;
        let p = herald_proto::Position {
            epoch: epoch.to_string(),
            offset,
        };
        a.resume.retain(|e| e.channel != channel);
        Some(p)
    }

    /// An `ack` session unsubscribed from exact Herald channel `channel`:
    /// its position is no longer kept.
    fn untrack(&self, channel: &str) {
        if let Some(a) = self.state().acks.as_mut() {
            a.epochs.remove(channel);
            a.acked.remove(channel);
        }
    }

    /// Whether the `ack` extension is on.
    pub fn acks(&self) -> bool {
        self.state().acks.is_some()
    }

    /// With the `ack` extension: deliveries wait to be sent or acknowledged,
    /// so a held connect must be answered now.
    pub fn has_undelivered(&self) -> bool {
        self.state()
            .acks
            .as_ref()
            .is_some_and(|a| !a.queued.is_empty() || !a.unacked.is_empty())
    }

    /// With the `ack` extension, what a connect reply carries: every
    /// unacknowledged delivery (the queued ones now numbered as a new
    /// batch), added to `out`, and the batch number for `ext.ack`.
    fn batch_for_connect(&self, out: &mut Vec<Vec<u8>>) -> Option<u64> {
        let mut st = self.state();
        let a = st.acks.as_mut()?;
        a.batch += 1;
        let n = a.batch;
        for m in a.queued.drain(..) {
            a.unacked.push_back((n, m));
        }
        out.extend(a.unacked.iter().map(|(_, m)| m.clone()));
        Some(n)
    }

    /// Whether Herald commands of request `batch` are still unanswered.
    fn has_pending(&self, batch: Option<u64>) -> bool {
        self.state().pending.values().any(|p| p.batch == batch)
    }

    /// Request `batch` is being answered: the replies kept for it go into
    /// `out`, and those of its commands still unanswered (its wait ran
    /// out) will go with whatever drains next.
    fn finish(&self, batch: u64, out: &mut Vec<Vec<u8>>) {
        let mut st = self.state();
        for p in st.pending.values_mut() {
            if p.batch == Some(batch) {
                p.batch = None;
            }
        }
        let (own, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut st.answered)
            .into_iter()
            .partition(|(b, _)| *b == batch);
        st.answered = keep;
        out.extend(own.into_iter().map(|(_, r)| r));
    }

    /// Takes everything queued: deliveries as they are, Herald replies
    /// turned into Bayeux replies. A reply that belongs to another
    /// long-polling request than `mine` is kept for that request's
    /// [`collect`] (CometD fails a subscription whose request's response
    /// lacks its reply, even if the reply comes in another response).
    /// Returns how many deliveries it took.
    pub fn drain(&self, out: &mut Vec<Vec<u8>>, mine: Option<u64>) -> usize {
        let mut st = self.state();
        if let Some(m) = mine {
            if st.answered.iter().any(|(b, _)| *b == m) {
                let (own, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut st.answered)
                    .into_iter()
                    .partition(|(b, _)| *b == m);
                st.answered = keep;
                out.extend(own.into_iter().map(|(_, r)| r));
            }
        }
        let mut parked = false;
        let frames: Vec<Vec<u8>> = self.client.outbox.with_queue(|q| {
            let taken = q
                .frames
                .iter()
                .filter(|f| matches!(f, Frame::Text(_) | Frame::Spliced(_)))
                .map(|f| f.payload().into_owned())
                .collect();
            let n = q.frames.len();
            q.advance(n, 0);
            taken
        });
        let mut deliveries = 0;
        let limit = self.client.outbox.max_bytes();
        for f in frames {
            if reply::is_delivery(&f) {
                deliveries += 1;
                match st.acks.as_mut() {
                    Some(a) => {
                        if !a.queue(f, limit) {
                            // A slow consumer, as Herald's queue would say.
                            self.gone.store(true, Ordering::Release);
                        }
                    }
                    None => out.push(f),
                }
                continue;
            }
            let Ok(msg) = Encoding::Json.decode_server(&f) else {
                continue;
            };
            let mut subscribed = None;
            let (id, error) = match msg {
                ServerMsg::Reply { id, reply } => {
                    if let herald_proto::Reply::Subscribe { .. } = reply {
                        subscribed = Some(reply);
                    }
                    (id, None)
                }
                ServerMsg::Error { id, code, message } => (id, Some((code, message))),
                ServerMsg::Push(Push::Disconnect { .. }) => {
                    // Herald ended the session (slow consumer, token
                    // expired, shutdown): the next connect learns it.
                    self.gone.store(true, Ordering::Release);
                    continue;
                }
                ServerMsg::Push(_) => continue,
            };
            let Some(p) = st.pending.remove(&id) else {
                continue;
            };
            let about = p.subscription.as_deref().unwrap_or(&p.channel);
            let error = match error {
                // Already subscribed, or not subscribed when unsubscribing:
                // the client's wish holds, as CometD answers it.
                Some((105 | 106, _)) => None,
                Some((code, message)) => Some(BayeuxError::of_herald(code, about, message)),
                None => None,
            };
            let mut lost = false;
            if let (Some((herald, asked)), Some(a), Some(reply)) =
                (&p.tracked, st.acks.as_mut(), subscribed)
            {
                lost = self.subscribed(a, herald, *asked, reply, limit);
            }
            let mut r = match &error {
                Some(e) => Reply::failed(&p.channel, p.id.as_deref(), e),
                None => Reply::ok(&p.channel, p.id.as_deref()),
            };
            r.client_id = Some(&self.id);
            r.subscription = p.subscription.as_deref();
            let ext = lost
                .then(|| RawValue::from_string(r#"{"herald":{"recovered":false}}"#.into()).ok())
                .flatten();
            r.ext = ext.as_deref();
            match p.batch {
                Some(b) if Some(b) != mine => {
                    st.answered.push((b, r.to_json()));
                    parked = true;
                }
                _ => out.push(r.to_json()),
            }
        }
        drop(st);
        if parked {
            // The request it belongs to may be waiting for it.
            self.relay.notify.notify_waiters();
        }
        deliveries
    }

    /// An `ack` session's subscription to exact Herald channel `herald`
    /// succeeded with `reply`: tracks its position and, when it `asked` to
    /// recover, queues what was recovered. True when recovery was asked and
    /// impossible (the client is told: `ext.herald.recovered: false`).
    fn subscribed(
        &self,
        a: &mut Acks,
        herald: &str,
        asked: bool,
        reply: herald_proto::Reply,
        limit: usize,
    ) -> bool {
        let herald_proto::Reply::Subscribe {
            epoch,
            offset,
            recovered,
            publications,
        } = reply
        else {
            return false;
        };
        a.epochs.insert(herald.to_string(), epoch);
        if !(asked && recovered) {
            a.acked.insert(herald.to_string(), offset);
            return asked;
        }
        let mut from = offset;
        for item in publications {
            from = from.min(item.offset.saturating_sub(1));
            let Some(d) = a.render.render(herald, &item.data, false, item.offset) else {
                continue;
            };
            if !a.queue(d, limit) {
                self.gone.store(true, Ordering::Release);
            }
        }
        a.acked.insert(herald.to_string(), from);
        false
    }

    /// Waits until something is queued (or, with `mine`, a reply of that
    /// request was kept for it), the session ends, `also` (an enabled wait
    /// on another [`Notify`]: the WebSocket link's events) fires, or
    /// `deadline` passes.
    pub async fn wait(
        &self,
        deadline: Instant,
        also: Option<std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>>,
        mine: Option<u64>,
    ) {
        let notified = self.relay.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let ready = self.client.outbox.with_queue(|q| {
            while matches!(q.frames.front(), Some(Frame::Ping | Frame::Pong(_))) {
                q.advance(1, 0);
            }
            if q.frames.is_empty() && q.closing().is_none() {
                q.set_waker(&self.waker);
                false
            } else {
                true
            }
        });
        let kept = mine.is_some_and(|m| self.state().answered.iter().any(|(b, _)| *b == m));
        if ready || kept || self.is_gone() {
            return;
        }
        let extra = async {
            match also {
                Some(e) => e.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = notified => {}
            () = extra => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// A `/meta/connect` the transport must hold and answer.
#[derive(Debug)]
pub struct Connect {
    /// Its session.
    pub session: Arc<BayeuxSession>,
    /// Its id.
    pub id: Option<Box<RawValue>>,
    /// How long it may be held: the server's timeout, or less when the
    /// client's advice says so (CometD's first connect says 0).
    pub hold: std::time::Duration,
}

/// What [`process`] made of a batch.
#[derive(Debug, Default)]
pub struct Processed {
    /// Replies ready now.
    pub replies: Vec<Vec<u8>>,
    /// The sessions whose Herald commands are unanswered yet.
    pub waiting: Vec<Arc<BayeuxSession>>,
    /// A connect to hold.
    pub connect: Option<Connect>,
    /// A session opened by a handshake in this batch.
    pub opened: Option<Arc<BayeuxSession>>,
    /// The last `clientId` of the batch that this node does not know (its
    /// messages got 402): a session lost with another node, perhaps, whose
    /// handshake may follow on the same socket ([`super::positions`]).
    pub unknown: Option<String>,
    /// Long-polling: this request's number, which its commands' replies
    /// carry, so that they go in its response (as CometD requires) even
    /// when a held connect of the session drains them first. `None` on a
    /// websocket, where every reply goes on the one socket.
    pub batch: Option<u64>,
}

/// Numbers long-polling requests ([`Processed::batch`]).
static BATCHES: AtomicU64 = AtomicU64::new(1);

/// The entries of a session's acknowledged positions (tag `tag`, written
/// at `now`), by channel.
fn own_entries(a: &Acks, tag: &str, now: u64) -> Vec<resume::Entry> {
    let mut entries: Vec<resume::Entry> = a
        .acked
        .iter()
        .filter_map(|(channel, &offset)| {
            Some(resume::Entry {
                tag: tag.to_string(),
                channel: channel.clone(),
                epoch: a.epochs.get(channel)?.clone(),
                offset,
                written: now,
            })
        })
        .collect();
    entries.sort_by(|x, y| x.channel.cmp(&y.channel));
    entries
}

/// The advice of a successful connect or handshake.
pub fn retry_advice(b: &Bayeux) -> Advice {
    Advice {
        reconnect: Reconnect::Retry,
        interval: Some(b.config.interval.as_millis() as u64),
        timeout: Some(b.config.timeout.as_millis() as u64),
        max_interval: Some(b.config.max_interval.as_millis() as u64),
        multiple_clients: false,
    }
}

/// The reply to a connect of a session that is gone.
pub fn gone_reply(s: &BayeuxSession, id: Option<&RawValue>) -> Vec<u8> {
    let (e, advice) = if s.was_disconnected() {
        (BayeuxError::new(402, "", "Disconnected"), Advice::none())
    } else {
        (BayeuxError::unknown_client(), Advice::handshake())
    };
    let mut r = Reply::failed(Meta::Connect.name(), id, &e);
    r.advice = Some(advice);
    r.to_json()
}

/// Answers a held connect now: adds to `out` what it carries (with the
/// `ack` extension, every unacknowledged delivery) and its reply.
pub fn answer_connect(b: &Bayeux, c: &Connect, out: &mut Vec<Vec<u8>>) {
    answer_connect_with(c, out, retry_advice(b));
}

/// [`answer_connect`] with `advice` in its reply.
pub fn answer_connect_with(c: &Connect, out: &mut Vec<Vec<u8>>, advice: Advice) {
    if c.session.is_gone() {
        out.push(gone_reply(&c.session, c.id.as_deref()));
        return;
    }
    let batch = c.session.batch_for_connect(out);
    let ext = batch.and_then(|n| RawValue::from_string(format!("{{\"ack\":{n}}}")).ok());
    let mut r = Reply::ok(Meta::Connect.name(), c.id.as_deref());
    r.client_id = Some(&c.session.id);
    r.advice = Some(advice);
    r.ext = ext.as_deref();
    out.push(r.to_json());
}

fn unknown_client(channel: &str, id: Option<&RawValue>) -> Vec<u8> {
    let mut r = Reply::failed(channel, id, &BayeuxError::unknown_client());
    r.advice = Some(Advice::handshake());
    r.to_json()
}

fn invalid(i: &Invalid) -> Vec<u8> {
    let channel = i.channel.as_deref().unwrap_or("/meta/unsuccessful");
    Reply::failed(channel, i.id.as_deref(), &BayeuxError::bad(&i.reason)).to_json()
}

/// Serves one decoded batch (see the module docs); `transport` is the
/// connection type it came on.
///
/// `acked` is the request's `BAYEUX_ACKED` cookie (long-polling only): an
/// `ack` handshake resumes from its positions (herald_bayeux::resume).
pub fn process(
    b: &Bayeux,
    batch: Vec<Result<Message, Invalid>>,
    transport: &str,
    acked: Option<&str>,
) -> Processed {
    let mut out = Processed {
        batch: (transport == "long-polling").then(|| BATCHES.fetch_add(1, Ordering::Relaxed)),
        ..Processed::default()
    };
    for m in batch {
        let m = match m {
            Ok(m) => m,
            Err(i) => {
                out.replies.push(invalid(&i));
                continue;
            }
        };
        let kind = Channel::of(&m.channel);
        if kind == Channel::Meta(Meta::Handshake) {
            out.replies.push(handshake(b, &m, acked, &mut out.opened));
            continue;
        }
        let Some(s) = m.client_id.as_deref().and_then(|c| b.find(c)) else {
            out.replies
                .push(unknown_client(&m.channel, m.id.as_deref()));
            out.unknown = m.client_id.clone().or(out.unknown.take());
            continue;
        };
        if s.is_gone() {
            // Dead but not reaped yet: as good as unknown.
            b.remove(&s.id);
            out.replies
                .push(unknown_client(&m.channel, m.id.as_deref()));
            continue;
        }
        s.touch(b.node.now_ms());
        let id = m.id.as_deref();
        match kind {
            Channel::Meta(Meta::Connect) => {
                let asked = m.connection_type.as_deref().unwrap_or(transport);
                if asked != transport {
                    let e = BayeuxError::new(400, asked, "connectionType is not this transport's");
                    out.replies
                        .push(Reply::failed(&m.channel, id, &e).to_json());
                    continue;
                }
                let server = b.config.timeout;
                let hold = match m.advice.as_ref().and_then(|a| a.timeout) {
                    Some(ms) => server.min(std::time::Duration::from_millis(ms)),
                    None => server,
                };
                if let Some(n) = message::ack(m.ext.as_deref()).and_then(|v| v.as_u64()) {
                    s.acknowledge(n);
                }
                // A second connect in one batch replaces the first, answered now.
                if let Some(prev) = out.connect.take() {
                    answer_connect(b, &prev, &mut out.replies);
                }
                out.connect = Some(Connect {
                    session: s,
                    id: m.id,
                    hold,
                });
            }
            Channel::Meta(Meta::Disconnect) => {
                s.disconnected.store(true, Ordering::Release);
                if s.acks() {
                    b.forget_positions(&s.id);
                }
                b.remove(&s.id);
                let mut r = Reply::ok(&m.channel, id);
                r.client_id = Some(&s.id);
                out.replies.push(r.to_json());
            }
            Channel::Meta(Meta::Subscribe | Meta::Unsubscribe) => {
                let subscribe = kind == Channel::Meta(Meta::Subscribe);
                if subscriptions(&s, &m, subscribe, out.batch, &mut out.replies) {
                    push_waiting(&mut out.waiting, &s);
                }
            }
            Channel::Meta(_) => {
                let e = BayeuxError::new(400, m.channel.as_str(), "unknown meta channel");
                out.replies
                    .push(Reply::failed(&m.channel, id, &e).to_json());
            }
            Channel::Service => {
                // No services: acknowledged, delivered nowhere.
                out.replies.push(Reply::ok(&m.channel, id).to_json());
            }
            Channel::Broadcast => {
                if publish(&s, &m, out.batch, &mut out.replies) {
                    push_waiting(&mut out.waiting, &s);
                }
            }
        }
    }
    out
}

/// `/meta/subscribe` or `/meta/unsubscribe`: a Herald command per channel
/// (true: some were sent), or the replies refusing them.
fn subscriptions(
    s: &BayeuxSession,
    m: &Message,
    subscribe: bool,
    batch: Option<u64>,
    replies: &mut Vec<Vec<u8>>,
) -> bool {
    let id = m.id.as_deref();
    let subs = m
        .subscription
        .as_ref()
        .map(message::Subscription::channels)
        .unwrap_or(&[]);
    if subs.is_empty() {
        let e = BayeuxError::new(400, "subscription", "missing subscription");
        replies.push(Reply::failed(&m.channel, id, &e).to_json());
        return false;
    }
    let token = message::herald_token(m.ext.as_deref());
    let mut sent = false;
    for sub in subs {
        if Channel::of(sub) == Channel::Service {
            let mut r = Reply::ok(&m.channel, id);
            r.client_id = Some(&s.id);
            r.subscription = Some(sub);
            replies.push(r.to_json());
            continue;
        }
        let herald = match channel::pattern_to_herald(sub) {
            Ok(h) => h,
            Err(e) => {
                let e = BayeuxError::new(400, sub.as_str(), e.to_string());
                let mut r = Reply::failed(&m.channel, id, &e);
                r.subscription = Some(sub);
                replies.push(r.to_json());
                continue;
            }
        };
        let exact = !sub.ends_with("/*") && !sub.ends_with("/**");
        let tracked = (exact && s.acks()).then(|| herald.clone());
        let recover = if subscribe {
            tracked.as_deref().and_then(|h| s.take_resume(h))
        } else {
            if let Some(h) = &tracked {
                s.untrack(h);
            }
            None
        };
        let asked = recover.is_some();
        let cmd = if subscribe {
            Command::Subscribe {
                channel: herald,
                recover,
                join_leave: false,
                token: token.clone(),
            }
        } else {
            Command::Unsubscribe { channel: herald }
        };
        s.command(
            cmd,
            Pending {
                channel: m.channel.clone(),
                id: m.id.clone(),
                subscription: Some(sub.clone()),
                tracked: tracked.filter(|_| subscribe).map(|h| (h, asked)),
                batch,
            },
        );
        sent = true;
    }
    sent
}

/// A publication: a Herald `publish` (true), or the reply refusing it.
fn publish(s: &BayeuxSession, m: &Message, batch: Option<u64>, replies: &mut Vec<Vec<u8>>) -> bool {
    let id = m.id.as_deref();
    let Some(data) = &m.data else {
        let e = BayeuxError::new(400, "data", "a publication needs data");
        replies.push(Reply::failed(&m.channel, id, &e).to_json());
        return false;
    };
    let herald = match channel::to_herald(&m.channel) {
        Ok(h) => h,
        Err(e) => {
            let e = BayeuxError::new(400, m.channel.as_str(), e.to_string());
            replies.push(Reply::failed(&m.channel, id, &e).to_json());
            return false;
        }
    };
    s.command(
        Command::Publish {
            channel: herald,
            data: bytes::Bytes::copy_from_slice(data.get().as_bytes()),
        },
        Pending {
            channel: m.channel.clone(),
            id: m.id.clone(),
            subscription: None,
            tracked: None,
            batch,
        },
    );
    true
}

fn push_waiting(w: &mut Vec<Arc<BayeuxSession>>, s: &Arc<BayeuxSession>) {
    if !w.iter().any(|x| Arc::ptr_eq(x, s)) {
        w.push(s.clone());
    }
}

fn handshake(
    b: &Bayeux,
    m: &Message,
    acked: Option<&str>,
    opened: &mut Option<Arc<BayeuxSession>>,
) -> Vec<u8> {
    let id = m.id.as_deref();
    let offered = m.supported_connection_types.as_deref().unwrap_or(&[]);
    if !offered
        .iter()
        .any(|t| herald_bayeux::CONNECTION_TYPES.contains(&t.as_str()))
    {
        let e = BayeuxError::new(
            400,
            "supportedConnectionTypes",
            "no connection type in common",
        );
        let mut r = Reply::failed(&m.channel, id, &e);
        r.supported_connection_types = Some(&herald_bayeux::CONNECTION_TYPES);
        r.version = Some(herald_bayeux::VERSION);
        r.advice = Some(Advice::none());
        return r.to_json();
    }
    let token = message::herald_token(m.ext.as_deref());
    let acks = message::ack(m.ext.as_deref()) == Some(serde_json::Value::Bool(true));
    let ext = acks
        .then(|| RawValue::from_string(r#"{"ack":{"enabled":true,"batch":0}}"#.into()).ok())
        .flatten();
    let resume = acks.then(|| resume::live(acked.map(resume::decode).unwrap_or_default(), None));
    match b.open(token.as_deref(), resume) {
        Ok(s) => {
            let mut r = Reply::ok(&m.channel, id);
            r.ext = ext.as_deref();
            r.client_id = Some(&s.id);
            r.version = Some(herald_bayeux::VERSION);
            r.supported_connection_types = Some(&herald_bayeux::CONNECTION_TYPES);
            r.advice = Some(retry_advice(b));
            let json = r.to_json();
            *opened = Some(s);
            json
        }
        Err(e) => {
            b.node
                .metrics
                .dropped(herald_core::metrics::Drop::Denied, 1);
            let e = BayeuxError::new(401, "", e.to_string());
            let mut r = Reply::failed(&m.channel, id, &e);
            r.advice = Some(Advice::none());
            r.to_json()
        }
    }
}

/// Waits (until `deadline`) for the Herald replies of request `batch`'s
/// commands and adds them, and whatever else is queued for its sessions, to
/// `replies`.
pub async fn collect(
    waiting: &[Arc<BayeuxSession>],
    replies: &mut Vec<Vec<u8>>,
    deadline: Instant,
    batch: Option<u64>,
) {
    for s in waiting {
        loop {
            s.drain(replies, batch);
            if !s.has_pending(batch) || s.is_gone() || Instant::now() >= deadline {
                break;
            }
            s.wait(deadline, None, batch).await;
        }
        if let Some(b) = batch {
            s.finish(b, replies);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_bayeux::decode_batch;
    use std::time::Duration;

    fn bayeux() -> Bayeux {
        let hub = Arc::new(herald_core::Hub::new());
        let broker = herald_core::MemoryBroker::new(10, Duration::ZERO, hub.clone());
        let presence = Arc::new(herald_core::presence::LocalPresence::new(hub.clone()));
        let node = Node::new(
            herald_core::NodeConfig::default(),
            hub,
            Arc::new(broker),
            presence,
            Arc::new(|_| {}),
        );
        Bayeux::new(
            super::super::BayeuxConfig::default(),
            node,
            65_536,
            Duration::from_secs(5),
        )
    }

    fn batch(b: &Bayeux, json: &str) -> Processed {
        let batch = decode_batch(json.as_bytes(), 100).expect("a batch");
        process(b, batch, "long-polling", None)
    }

    /// A session's handshake, then its subscribe request to `/a` (id `s`).
    fn subscribing(b: &Bayeux) -> (Arc<BayeuxSession>, Processed) {
        let p = batch(
            b,
            r#"[{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"]}]"#,
        );
        let s = p.opened.expect("a session");
        let sub = batch(
            b,
            &format!(
                r#"[{{"channel":"/meta/subscribe","clientId":"{}","subscription":"/a","id":"s"}}]"#,
                s.id
            ),
        );
        (s, sub)
    }

    fn channels(replies: &[Vec<u8>]) -> Vec<String> {
        replies
            .iter()
            .map(|r| {
                let v: serde_json::Value = serde_json::from_slice(r).expect("json");
                v["channel"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    }

    /// A held connect that drains the session's queue before a subscribe
    /// request does leaves it the subscribe's reply: CometD fails a
    /// subscription whose request's response lacks its reply (an empty
    /// `[]`), even when the reply comes in a connect's response.
    #[tokio::test]
    async fn a_reply_goes_in_its_own_requests_response() {
        let b = bayeux();
        let (s, sub) = subscribing(&b);
        assert!(sub.batch.is_some());
        // The held connect wakes first and drains.
        let mut connect = Vec::new();
        s.drain(&mut connect, None);
        assert!(connect.is_empty(), "{:?}", channels(&connect));
        let mut replies = sub.replies;
        let deadline = Instant::now() + Duration::from_secs(1);
        collect(&sub.waiting, &mut replies, deadline, sub.batch).await;
        assert_eq!(channels(&replies), ["/meta/subscribe"]);
        // A websocket's drain (no request) takes every reply.
        let p = process(
            &b,
            decode_batch(
                format!(
                    r#"[{{"channel":"/meta/unsubscribe","clientId":"{}","subscription":"/a"}}]"#,
                    s.id
                )
                .as_bytes(),
                100,
            )
            .expect("a batch"),
            "websocket",
            None,
        );
        assert!(p.batch.is_none());
        let mut out = Vec::new();
        s.drain(&mut out, None);
        assert_eq!(channels(&out), ["/meta/unsubscribe"]);
    }

    /// A reply kept for a request goes into its response even when its
    /// wait has run out, and nothing stays kept after it.
    #[tokio::test]
    async fn a_kept_reply_goes_out_when_the_wait_runs_out() {
        let b = bayeux();
        let (s, sub) = subscribing(&b);
        let mut connect = Vec::new();
        s.drain(&mut connect, None);
        assert!(connect.is_empty());
        // Its response went without waiting (deadline passed): the kept
        // reply goes into it all the same.
        let mut replies = Vec::new();
        collect(&sub.waiting, &mut replies, Instant::now(), sub.batch).await;
        assert_eq!(channels(&replies), ["/meta/subscribe"]);
        assert!(s.state().answered.is_empty());
    }
}
