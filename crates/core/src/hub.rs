//! The hub: which clients are subscribed to which channels, and the fan-out.
//!
//! Channels are spread over shards (a mutex-protected map each) so that
//! subscribe/unsubscribe on unrelated channels do not contend; each channel's
//! subscriber set has its own mutex, so a large fan-out holds only that
//! channel. Subscribers are kept in an `IndexMap` for dense iteration and O(1)
//! removal.
//!
//! Fan-out encodes a publication at most once per encoding (JSON, binary) and
//! pushes the same reference-counted bytes to every subscriber's outbox; it
//! never blocks on a socket. A subscriber whose outbox overflows is closed as a
//! slow consumer by its outbox (see [`crate::outbox`]), not waited for.

use crate::broker::{Deliver, Publication};
use crate::client::Client;
use crate::outbox::Frame;
use herald_proto::{ClientInfo, Encoding, Push, ServerMsg};
use indexmap::IndexMap;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

const SHARDS: usize = 64;

type Subscribers = Mutex<IndexMap<u64, Arc<Client>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The subscription index of one node.
pub struct Hub {
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<Arc<str>, Arc<Subscribers>>>]>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

impl Hub {
    /// An empty hub.
    pub fn new() -> Hub {
        Hub {
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, channel: &str) -> &Mutex<HashMap<Arc<str>, Arc<Subscribers>>> {
        &self.shards[(self.hasher.hash_one(channel) as usize) % SHARDS]
    }

    fn subscribers(&self, channel: &str) -> Option<Arc<Subscribers>> {
        lock(self.shard(channel)).get(channel).cloned()
    }

    /// Adds `client` to `channel`. Returns false if it was already there.
    pub fn subscribe(&self, channel: &str, client: &Arc<Client>) -> bool {
        let mut shard = lock(self.shard(channel));
        let subs = shard
            .entry(Arc::from(channel))
            .or_insert_with(|| Arc::new(Mutex::new(IndexMap::new())));
        let added = lock(subs).insert(client.id, client.clone()).is_none();
        added
    }

    /// Removes client `id` from `channel`; drops the channel when it empties.
    /// Returns false if it was not subscribed.
    pub fn unsubscribe(&self, channel: &str, id: u64) -> bool {
        let mut shard = lock(self.shard(channel));
        let Some(subs) = shard.get(channel) else {
            return false;
        };
        let (removed, empty) = {
            let mut s = lock(subs);
            let removed = s.swap_remove(&id).is_some();
            (removed, s.is_empty())
        };
        if empty {
            shard.remove(channel);
        }
        removed
    }

    /// How many clients are subscribed to `channel`.
    pub fn subscriber_count(&self, channel: &str) -> usize {
        self.subscribers(channel).map_or(0, |s| lock(&s).len())
    }

    /// Who is subscribed to `channel`.
    pub fn presence(&self, channel: &str) -> Vec<ClientInfo> {
        self.subscribers(channel).map_or_else(Vec::new, |s| {
            lock(&s)
                .values()
                .map(|c| ClientInfo {
                    client: c.wire_id(),
                    user: String::new(),
                })
                .collect()
        })
    }

    /// Number of channels with at least one subscriber.
    pub fn channel_count(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}

/// Encodes a publication push for one encoding, as the frame type it travels in.
fn encode_push(p: &Publication, encoding: Encoding) -> Frame {
    let msg = ServerMsg::Push(Push::Publication {
        channel: p.channel.to_string(),
        offset: p.offset,
        data: p.data.clone(),
    });
    let bytes = encoding.encode_server_bytes(&msg);
    match encoding {
        Encoding::Json => Frame::Text(bytes),
        Encoding::Binary => Frame::Binary(bytes),
    }
}

impl Deliver for Hub {
    fn deliver(&self, p: &Publication) {
        let Some(subs) = self.subscribers(&p.channel) else {
            return;
        };
        let subs = lock(&subs);
        let mut json: Option<Frame> = None;
        let mut binary: Option<Frame> = None;
        for client in subs.values() {
            let frame = match client.encoding {
                Encoding::Json => json.get_or_insert_with(|| encode_push(p, Encoding::Json)),
                Encoding::Binary => binary.get_or_insert_with(|| encode_push(p, Encoding::Binary)),
            };
            client.outbox.push(frame.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn client(id: u64, enc: Encoding) -> Arc<Client> {
        Arc::new(Client::new(id, enc, 1 << 20, 0))
    }

    #[test]
    fn fanout_shares_one_encoding_per_format() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        let b = client(2, Encoding::Json);
        let c = client(3, Encoding::Binary);
        for x in [&a, &b, &c] {
            assert!(hub.subscribe("news", x));
        }
        assert!(!hub.subscribe("news", &a));
        hub.deliver(&Publication {
            channel: "news".into(),
            offset: 1,
            data: Bytes::from_static(b"{\"x\":1}"),
        });
        let ptr = |cl: &Arc<Client>| {
            cl.outbox
                .with_queue(|q| q.frames.front().map(|f| f.payload().as_ptr() as usize))
        };
        assert_eq!(ptr(&a), ptr(&b), "JSON subscribers share the same bytes");
        assert_ne!(ptr(&a), ptr(&c));
        assert!(matches!(
            c.outbox.with_queue(|q| q.frames.front().cloned()),
            Some(Frame::Binary(_))
        ));
    }

    #[test]
    fn unsubscribe_drops_empty_channels() {
        let hub = Hub::new();
        let a = client(1, Encoding::Json);
        hub.subscribe("x", &a);
        assert_eq!(hub.channel_count(), 1);
        assert!(hub.unsubscribe("x", 1));
        assert!(!hub.unsubscribe("x", 1));
        assert_eq!(hub.channel_count(), 0);
        hub.deliver(&Publication {
            channel: "x".into(),
            offset: 2,
            data: Bytes::new(),
        });
        assert!(a.outbox.is_empty());
    }
}
