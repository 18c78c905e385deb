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

use super::session::{self, BayeuxSession, Connect};
use super::Bayeux;
use crate::conn::Handler;
use bytes::Bytes;
use herald_bayeux::reply::{self, Reply};
use herald_bayeux::{decode_batch, BayeuxError};
use herald_core::{Client, Frame, Node};
use herald_proto::Encoding;
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
}

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
    bayeux: Arc<Bayeux>,
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
    });
    tokio::spawn(pump(link.clone(), bayeux.clone()));
    BayeuxWs {
        link,
        bayeux: bayeux.clone(),
        node,
    }
}

impl Handler for BayeuxWs {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        let b = &self.bayeux;
        let batch = if binary {
            Err(BayeuxError::bad("a batch is a text frame"))
        } else {
            decode_batch(payload, b.config.max_batch).map_err(|e| BayeuxError::bad(e.to_string()))
        };
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) => {
                let r = Reply::failed("/meta/unsuccessful", None, &e);
                self.link.send(&[r.to_json()]);
                return;
            }
        };
        let p = session::process(b, batch, "websocket", None);
        self.link.send(&p.replies);
        if let Some(s) = &p.opened {
            self.link.set_session(s);
        }
        if let Some(c) = p.connect {
            self.link.set_session(&c.session);
            c.session.hold();
            let deadline = Instant::now() + c.hold;
            let prev = self
                .link
                .connect
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .replace((c, deadline));
            if let Some((prev, _)) = prev {
                let mut out = Vec::new();
                session::answer_connect(b, &prev, &mut out);
                self.link.send(&out);
                prev.session.release(self.node.now_ms());
            }
        } else if let Some(s) = p.waiting.first() {
            if self.link.session().is_none() {
                self.link.set_session(s);
            }
        }
        self.link.notify.notify_waiters();
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
            s.drain(&mut out);
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
            Some(s) => s.wait(deadline, Some(notified.as_mut())).await,
            None => {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(deadline) => {}
                }
            }
        }
    }
}
