//! `ack` sessions on WebSocket resumed on another node after this one's
//! loss (docs/decisions/0016-bayeux.md, "Resuming on WebSocket").
//!
//! Long-polling sessions carry their acknowledged positions in the
//! `BAYEUX_ACKED` cookie (herald_bayeux::resume); a WebSocket cannot be
//! given a cookie once open, and CometD's Node client sends none on its
//! upgrade. What links a lost websocket session to its successor is the
//! client itself: when its socket dies, an unchanged CometD client (the
//! JavaScript one in browsers and Node, as its `Client.js` reads) sends
//! its next `/meta/connect` with the old `clientId` on a new socket, gets
//! `402::Unknown client` with `reconnect: handshake` from whichever node
//! took the socket, and handshakes *on that same socket*. So:
//!
//! - each node writes the acknowledged positions of its websocket `ack`
//!   sessions to a store every node reads ([`Positions`]: Redis, keyed by
//!   `clientId`), coalesced: at most once a second per session, only when
//!   they moved or the last write is [`REFRESH_SECS`] old ([`Dirty`]);
//! - a socket on which a message with an unknown `clientId` arrives starts
//!   fetching that session's positions ([`Fetch`]); an `ack` handshake on
//!   the same socket resumes from them as a long-polling handshake resumes
//!   from the cookie. If the fetch has not answered yet, the handshake (and
//!   whatever the socket brings after it) waits for it, at most
//!   [`FETCH_WAIT`].
//!
//! The positions are acknowledged ones, so a write lost or late brings
//! duplicates, never a gap; a `clientId` is 128 random bits, and resuming
//! only chooses where the client's own subscriptions (authorised as any)
//! start. With the memory broker there is no store and nothing to resume:
//! a single node's loss loses its history anyway.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// How long stored positions live after their last write.
pub const TTL: Duration = Duration::from_secs(15 * 60);

/// Positions that did not move are written again after this long, so that
/// a quiet session's stay within [`TTL`].
pub const REFRESH_SECS: u64 = 5 * 60;

/// How long a handshake waits for the positions of the session lost on
/// its socket before it goes on without them.
pub const FETCH_WAIT: Duration = Duration::from_secs(2);

/// Where websocket `ack` sessions' positions are kept for other nodes.
///
/// Contract: `save` and `forget` do not wait and may drop the write (the
/// positions are acknowledged ones: losing a write only brings
/// duplicates); `load` gives what the last surviving `save` stored for the
/// session, or `None` when nothing is stored or the store cannot say.
pub trait Positions: Send + Sync + std::fmt::Debug {
    /// Stores `value` (the resume codec's form) for session `client_id`,
    /// to live `ttl`.
    fn save(&self, client_id: &str, value: &str, ttl: Duration);
    /// Forgets session `client_id` (it disconnected).
    fn forget(&self, client_id: &str);
    /// What is stored for `client_id`.
    fn load(&self, client_id: &str) -> Pin<Box<dyn Future<Output = Option<String>> + Send>>;
}

impl Positions for herald_redis::acked::AckedStore {
    fn save(&self, client_id: &str, value: &str, ttl: Duration) {
        herald_redis::acked::AckedStore::save(self, client_id, value, ttl);
    }

    fn forget(&self, client_id: &str) {
        herald_redis::acked::AckedStore::forget(self, client_id);
    }

    fn load(&self, client_id: &str) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> {
        let store = self.clone();
        let id = client_id.to_string();
        Box::pin(async move { store.load(&id).await })
    }
}

/// The `clientId`s of websocket `ack` sessions whose connect acknowledged
/// something since the last flush. At most one entry per open session.
#[derive(Debug, Default)]
pub struct Dirty(Mutex<HashSet<String>>);

impl Dirty {
    /// Marks session `client_id`.
    pub fn mark(&self, client_id: &str) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !set.contains(client_id) {
            set.insert(client_id.to_string());
        }
    }

    /// Takes every mark.
    pub fn take(&self) -> Vec<String> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        set.drain().collect()
    }
}

/// The positions of a session lost elsewhere, being read from the store.
#[derive(Debug)]
pub struct Fetch {
    /// Whose.
    pub client_id: String,
    /// `Some` once the store answered.
    rx: watch::Receiver<Option<Option<String>>>,
}

impl Fetch {
    /// Starts reading `client_id`'s positions from `store`.
    pub fn start(store: &dyn Positions, client_id: String) -> Fetch {
        let (tx, rx) = watch::channel(None);
        let load = store.load(&client_id);
        tokio::spawn(async move {
            let v = load.await;
            let _ = tx.send(Some(v));
        });
        Fetch { client_id, rx }
    }

    /// The answer, if it came: `Some(None)` means nothing stored.
    pub fn ready(&self) -> Option<Option<String>> {
        self.rx.borrow().clone()
    }

    /// Waits for the answer, at most `limit` (then: nothing).
    pub async fn wait(&self, limit: Duration) -> Option<String> {
        let mut rx = self.rx.clone();
        let answer = match tokio::time::timeout(limit, rx.wait_for(Option::is_some)).await {
            Ok(Ok(v)) => v.clone().flatten(),
            _ => None,
        };
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Debug)]
    struct Slow(Arc<tokio::sync::Notify>);

    impl Positions for Slow {
        fn save(&self, _: &str, _: &str, _: Duration) {}
        fn forget(&self, _: &str) {}
        fn load(&self, id: &str) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> {
            let go = self.0.clone();
            let v = (id == "known").then(|| "value".to_string());
            Box::pin(async move {
                go.notified().await;
                v
            })
        }
    }

    #[tokio::test]
    async fn a_fetch_is_ready_only_once_the_store_answered() {
        let go = Arc::new(tokio::sync::Notify::new());
        let store = Slow(go.clone());
        let f = Fetch::start(&store, "known".into());
        tokio::task::yield_now().await;
        assert_eq!(f.ready(), None);
        go.notify_one();
        assert_eq!(
            f.wait(Duration::from_secs(5)).await.as_deref(),
            Some("value")
        );
        assert_eq!(f.ready(), Some(Some("value".into())));
        let g = Fetch::start(&store, "other".into());
        tokio::task::yield_now().await;
        go.notify_one();
        assert_eq!(g.wait(Duration::from_secs(5)).await, None);
        assert_eq!(g.ready(), Some(None));
    }

    #[tokio::test]
    async fn a_store_that_never_answers_gives_nothing_after_the_limit() {
        let store = Slow(Arc::new(tokio::sync::Notify::new()));
        let f = Fetch::start(&store, "known".into());
        assert_eq!(f.wait(Duration::from_millis(50)).await, None);
        assert_eq!(f.ready(), None);
    }

    #[test]
    fn marks_are_taken_once() {
        let d = Dirty::default();
        d.mark("a");
        d.mark("a");
        d.mark("b");
        let mut t = d.take();
        t.sort();
        assert_eq!(t, ["a", "b"]);
        assert!(d.take().is_empty());
    }
}
