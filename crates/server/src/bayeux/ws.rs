//! The `websocket` transport: each text frame is a batch; replies and
//! deliveries go out as JSON arrays, several messages per frame.
//!
//! The socket is driven by the shared connection driver
//! ([`crate::conn`]) with a handler that serves each batch at once. A
//! small pump task per socket (the [`Link`]) moves what Herald queues for the
//! socket's Bayeux session (deliveries, and replies to commands that Herald
//! answers later) onto the socket as it comes, and answers the held
//! `/meta/connect` when its time is up: on WebSocket a held connect is only
//! the session's heartbeat, since deliveries do not wait for it. When the
//! socket closes the session stays, without a held connect, so it expires
//! after `max_interval` unless the client comes back (on a new socket or by
//! long-polling) with its `clientId`. With the `ack` extension deliveries
//! wait for a connect and go out with its reply ([`super::session`]).
//!
//! In a cluster an `ack` session lost with its node resumes on the node
//! its client's next socket reaches: a message on the socket with a
//! `clientId` this node does not know starts fetching that session's
//! positions, and an `ack` handshake on the socket waits for them
//! ([`super::positions`]). While it waits, later batches of the socket
//! queue behind it, in order.

use super::positions::{self, Fetch};
use super::session::{self, BayeuxSession, Connect};
use super::Bayeux;
use crate::conn::Handler;
use bytes::Bytes;
use herald_bayeux::channel::{Channel, Meta};
use herald_bayeux::message::{self, Invalid, Message};
use herald_bayeux::reply::{self, Reply};
use herald_bayeux::{decode_batch, BayeuxError};
use herald_core::{Client, Frame, Node};
use herald_proto::Encoding;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a socket and its pump share.
#[derive(Debug)]
struct Link {
    /// The socket's own client: its outbox is what the driver writes.
    wire: Arc<Client>,
    /// The Bayeux session the socket carries (the last handshake or
    /// connect on it).
    session: Mutex<Option<Arc<BayeuxSession>>>,
    /// The held connect and when to answer it.
    connect: Mutex<Option<(Connect, Instant)>>,
    /// Wakes the pump: a new session or connect, or the socket's end.
    notify: Notify,
    /// The socket is gone.
    closed: AtomicBool,
    /// The endpoint (for the `timestamp` extension's stamps).
    bayeux: Arc<Bayeux>,
    /// The positions of the last unknown session seen on the socket, being
    /// fetched for a handshake that may resume it.
    lost: Mutex<Option<Arc<Fetch>>>,
    /// `Some` while a handshake waits for [`Link::lost`]: the batches that
    /// came after it, served in order once it is answered.
    deferred: Mutex<Option<VecDeque<Kept>>>,
}

/// A frame kept for later: its payload, and whether it was binary.
type Kept = (Vec<u8>, bool);

/// Batches a socket may send while its handshake waits for the store;
/// beyond them the socket is closed (a CometD client sends nothing before
/// its handshake is answered).
const MAX_DEFERRED: usize = 64;

impl Link {
    fn session(&self) -> Option<Arc<BayeuxSession>> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_session(&self, s: &Arc<BayeuxSession>) {
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.clone());
    }

    fn send(&self, messages: &[Vec<u8>]) {
        if !messages.is_empty() {
            let mut stamped;
            let messages = if self.bayeux.config.timestamp {
                stamped = messages.to_vec();
                self.bayeux.stamp(&mut stamped);
                &stamped[..]
            } else {
                messages
            };
            let frame = reply::batch(messages.iter().map(Vec::as_slice));
            self.wire.outbox.push(Frame::Text(Bytes::from(frame)));
        }
    }

    /// Takes the held connect, if any.
    fn take_connect(&self) -> Option<(Connect, Instant)> {
        self.connect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// One Bayeux WebSocket connection's handler.
#[derive(Debug)]
pub struct BayeuxWs {
    link: Arc<Link>,
    node: Arc<Node>,
}

/// The handler of a new socket, and its pump started.
pub fn open(bayeux: &Arc<Bayeux>) -> BayeuxWs {
    let node = bayeux.node.clone();
    let link = Arc::new(Link {
        wire: node.new_client(Encoding::Json),
        session: Mutex::new(None),
        connect: Mutex::new(None),
        notify: Notify::new(),
        closed: AtomicBool::new(false),
        bayeux: bayeux.clone(),
        lost: Mutex::new(None),
        deferred: Mutex::new(None),
    });
    tokio::spawn(pump(link.clone(), bayeux.clone()));
    BayeuxWs { link, node }
}

impl Handler for BayeuxWs {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        {
            let mut deferred = self.link.deferred.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(q) = deferred.as_mut() {
                if q.len() >= MAX_DEFERRED {
                    drop(deferred);
                    let e = BayeuxError::bad("too many batches before the handshake's answer");
                    let r = Reply::failed("/meta/unsuccessful", None, &e);
                    self.link.send(&[r.to_json()]);
                    self.link.wire.outbox.close(1008, false);
                    return;
                }
                q.push_back((payload.to_vec(), binary));
                return;
            }
        }
        serve(&self.link, payload, binary);
    }

    fn client(&self) -> &Arc<Client> {
        &self.link.wire
    }

    fn node(&self) -> &Arc<Node> {
        &self.node
    }
}

impl Drop for BayeuxWs {
    fn drop(&mut self) {
        self.link.closed.store(true, Ordering::Release);
        if let Some((c, _)) = self.link.take_connect() {
            c.session.release(self.node.now_ms());
        }
        self.link.notify.notify_waiters();
        self.node.remove_client(self.link.wire.id);
    }
}

/// Serves one frame of the socket, unless it holds an `ack` handshake that
/// must wait for the positions of a session lost elsewhere: then it is
/// served later, with what comes after it (true).
fn serve(link: &Arc<Link>, payload: &[u8], binary: bool) -> bool {
    let b = &link.bayeux;
    let batch = if binary {
        Err(BayeuxError::bad("a batch is a text frame"))
    } else {
        decode_batch(payload, b.config.max_batch).map_err(|e| BayeuxError::bad(e.to_string()))
    };
    let batch = match batch {
        Ok(batch) => batch,
        Err(e) => {
            let r = Reply::failed("/meta/unsuccessful", None, &e);
            link.send(&[r.to_json()]);
            return false;
        }
    };
    let lost = if batch.iter().any(is_ack_handshake) {
        link.lost.lock().unwrap_or_else(|p| p.into_inner()).take()
    } else {
        None
    };
    let Some(lost) = lost else {
        finish(link, batch, None);
        return false;
    };
    if let Some(acked) = lost.ready() {
        finish(link, batch, acked.as_deref());
        return false;
    }
    link.deferred
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(VecDeque::new);
    tokio::spawn(resume_then_drain(link.clone(), batch, lost));
    true
}

fn is_ack_handshake(m: &Result<Message, Invalid>) -> bool {
    matches!(m, Ok(m) if Channel::of(&m.channel) == Channel::Meta(Meta::Handshake)
        && message::ack(m.ext.as_deref()) == Some(serde_json::Value::Bool(true)))
}

/// Serves a handshake once the positions it resumes from are read (or the
/// store took too long), then the frames that queued behind it.
async fn resume_then_drain(
    link: Arc<Link>,
    batch: Vec<Result<Message, Invalid>>,
    lost: Arc<Fetch>,
) {
    let acked = lost.wait(positions::FETCH_WAIT).await;
    if link.closed.load(Ordering::Acquire) {
        return;
    }
    finish(&link, batch, acked.as_deref());
    loop {
        let next = {
            let mut deferred = link.deferred.lock().unwrap_or_else(|p| p.into_inner());
            match deferred.as_mut().and_then(VecDeque::pop_front) {
                Some(frame) => frame,
                None => {
                    *deferred = None;
                    return;
                }
            }
        };
        if serve(&link, &next.0, next.1) {
            // Waiting again: that task serves the rest.
            return;
        }
    }
}

/// Serves a decoded batch (`acked`: the positions its `ack` handshake
/// resumes from).
fn finish(link: &Arc<Link>, batch: Vec<Result<Message, Invalid>>, acked: Option<&str>) {
    let b = &link.bayeux;
    let p = session::process(b, batch, "websocket", acked);
    link.send(&p.replies);
    if let Some(id) = p.unknown {
        // Perhaps a session lost with another node: its client handshakes
        // on this socket next, and may resume from where it had got to.
        if let Some(store) = b.positions() {
            let mut lost = link.lost.lock().unwrap_or_else(|p| p.into_inner());
            if lost.as_ref().is_none_or(|f| f.client_id != id) {
                *lost = Some(Arc::new(Fetch::start(store, id)));
            }
        }
    }
    if let Some(s) = &p.opened {
        link.set_session(s);
    }
    if let Some(c) = p.connect {
        link.set_session(&c.session);
        if c.session.acks() {
            b.positions_moved(&c.session.id);
        }
        c.session.hold();
        let deadline = Instant::now() + c.hold;
        let prev = link
            .connect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace((c, deadline));
        if let Some((prev, _)) = prev {
            let mut out = Vec::new();
            session::answer_connect(b, &prev, &mut out);
            link.send(&out);
            prev.session.release(b.node.now_ms());
        }
    } else if let Some(s) = p.waiting.first() {
        if link.session().is_none() {
            link.set_session(s);
        }
    }
    link.notify.notify_waiters();
}

/// Moves the session's queue onto the socket and answers the held connect
/// (see the module docs), until the socket is gone.
async fn pump(link: Arc<Link>, b: Arc<Bayeux>) {
    loop {
        let notified = link.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if link.closed.load(Ordering::Acquire) || link.wire.outbox.is_closing() {
            return;
        }
        let session = link.session();
        let mut out = Vec::new();
        if let Some(s) = &session {
            s.drain(&mut out, None);
        }
        let mut deadline = Instant::now() + Duration::from_secs(3600);
        {
            let mut held = link.connect.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((c, at)) = held.as_ref() {
                // With the `ack` extension deliveries go out with connect
                // replies only: one waiting answers the connect now.
                let due = c.session.is_gone() || c.session.has_undelivered();
                if due || Instant::now() >= *at {
                    session::answer_connect(&b, c, &mut out);
                    c.session.release(b.node.now_ms());
                    *held = None;
                } else {
                    deadline = *at;
                }
            }
        }
        link.send(&out);
        // A session that ended has nothing more to queue: wait for the link.
        let session = session.filter(|s| !s.is_gone());
        match &session {
            Some(s) => s.wait(deadline, Some(notified.as_mut()), None).await,
            None => {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(deadline) => {}
                }
            }
        }
    }
}
