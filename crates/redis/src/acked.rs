//! Where a Bayeux `ack` session on WebSocket had got to, kept in Redis so
//! that another node can resume it after this one's loss
//! (docs/decisions/0016-bayeux.md, "Resuming on WebSocket").
//!
//! Long-polling sessions carry these positions in a cookie; a cookie cannot
//! be set on an open WebSocket, so for websocket sessions the node writes
//! them here, at most once a second per session and only when they moved
//! (or to keep them from expiring). One string key per session,
//! `P:bayeux:acked:CLIENTID`, holding the resume codec's value
//! (`herald_bayeux::resume`), with a time to live: a session that is gone
//! for good is forgotten without anyone deleting it.
//!
//! Every write is fire-and-forget and every failure reads as "nothing
//! stored": the positions are *acknowledged* ones, so a write lost, late
//! or stale only makes a resumed session receive again what it had — the
//! `ack` extension's at-least-once — never skip anything.

use crate::conn::Link;
use crate::resp::Value;
use std::sync::Arc;
use std::time::Duration;

/// The positions of websocket `ack` sessions (see the module docs).
#[derive(Debug, Clone)]
pub struct AckedStore {
    link: Arc<Link>,
    prefix: String,
}

impl AckedStore {
    /// On `link`, keys under `prefix`.
    pub(crate) fn new(link: Arc<Link>, prefix: String) -> AckedStore {
        AckedStore { link, prefix }
    }

    fn key(&self, client_id: &str) -> String {
        format!("{}:bayeux:acked:{client_id}", self.prefix)
    }

    /// Stores `value` for session `client_id`, kept for `ttl`. Not waited
    /// for; when Redis is away the write is dropped.
    pub fn save(&self, client_id: &str, value: &str, ttl: Duration) {
        let ms = ttl.as_millis().max(1).to_string();
        let key = self.key(client_id);
        let _ = self.link.fire(&[
            b"SET".as_slice(),
            key.as_bytes(),
            value.as_bytes(),
            b"PX",
            ms.as_bytes(),
        ]);
    }

    /// Forgets session `client_id` (it disconnected). Not waited for.
    pub fn forget(&self, client_id: &str) {
        let key = self.key(client_id);
        let _ = self.link.fire(&[b"DEL".as_slice(), key.as_bytes()]);
    }

    /// What is stored for `client_id`: `None` when nothing is, or when
    /// Redis cannot say (both mean "resume from nowhere").
    pub async fn load(&self, client_id: &str) -> Option<String> {
        let key = self.key(client_id);
        match self.link.call(&[b"GET".as_slice(), key.as_bytes()]).await {
            Ok(Value::Bulk(Some(v))) => String::from_utf8(v.to_vec()).ok(),
            _ => None,
        }
    }
}
