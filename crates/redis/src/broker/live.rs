//! Live delivery: what the subscriber link receives, handed to the hub in
//! each channel's offset order. A publication that continues the channel's
//! sequence goes out as it arrives (one batch per read); a duplicate is
//! skipped; a gap or another epoch starts the channel's sync task, which
//! reads the stream after the last offset delivered, delivers what was
//! missed and then what was buffered meanwhile, and goes live again, or
//! closes the channel's subscribers with 3004 when the stream cannot fill
//! the gap. After a reconnect every followed channel syncs again.
//!
//! It is apart from attaching (the parent module) because this is the code
//! that moves a channel's delivered position forward; attaching only reads
//! it, under the channel's lock.

use super::{lock, Chan, ChanRef, Inner};
use crate::member::{self, Message};
use crate::pubsub::{Incoming, Sink};
use bytes::Bytes;
use herald_core::{Deliver, Publication};
use herald_proto::{DisconnectCode, Position};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Publications buffered per channel while the node catches up with its
/// stream; beyond this the buffer is dropped and read again from the stream.
const BUFFER_MAX: usize = 10_000;

impl Inner {
    /// Delivers a publication to the hub and records it.
    fn deliver(&self, c: &mut Chan, offset: u64, data: Bytes) {
        self.hub.deliver(&Publication {
            channel: c.name.clone(),
            offset,
            data,
            json: false,
        });
        if let Some((_, last)) = &mut c.known {
            *last = offset;
        }
    }

    /// The channel's stream is not the one its subscribers have been
    /// following: close them so they reconnect and learn what was lost.
    fn lose(&self, c: &mut Chan, epoch: Bytes, top: u64) {
        let n = self
            .hub
            .close_subscribers(&c.name, DisconnectCode::BrokerStateLost.code());
        self.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(channel = %c.name, closed = n, "channel stream lost or out of retention; subscribers closed with 3004");
        c.known = Some((epoch, top));
    }

    /// Starts the channel's sync task unless one runs.
    pub(super) fn start_sync(self: &Arc<Self>, c: &mut Chan, chan: &ChanRef) {
        c.live = false;
        if c.syncing {
            return;
        }
        c.syncing = true;
        tokio::spawn(sync(self.clone(), chan.clone()));
    }

    /// A channel topic's messages of one read, in order: under one lock of
    /// the channel, the publications that continue its sequence are
    /// gathered and fanned out as one batch ([`Deliver::deliver_batch`]);
    /// a presence message first delivers what was gathered, so the order
    /// between them is kept. A gap or another epoch starts the sync as
    /// before, after what precedes it is delivered.
    fn channel_messages<'a>(&self, topic: &[u8], payloads: impl Iterator<Item = &'a Bytes>) {
        let Some(name) = self.channel_of(topic, self.clustered()) else {
            return;
        };
        let Some(chan) = self.chan(name) else { return };
        let mut c = lock(&chan);
        let mut ready: Vec<Publication> = Vec::new();
        for payload in payloads {
            let Some(msg) = member::parse(payload) else {
                tracing::debug!(channel = name, "malformed message on a channel topic");
                continue;
            };
            match msg {
                Message::Presence {
                    join,
                    edge,
                    node,
                    info,
                } => {
                    self.deliver_ready(&mut ready);
                    let own = node == self.node_id.as_bytes();
                    self.hub.announce(&c.name, info, join, edge, own);
                }
                Message::Publication {
                    epoch,
                    offset,
                    data,
                } => {
                    if !c.live {
                        if c.buffer.len() >= BUFFER_MAX {
                            c.buffer.clear(); // read from the stream instead
                        }
                        c.buffer.push((epoch, offset, data));
                        continue;
                    }
                    let Some((known, last)) = &mut c.known else {
                        continue;
                    };
                    if epoch == *known && offset == *last + 1 {
                        *last = offset;
                        ready.push(Publication {
                            channel: c.name.clone(),
                            offset,
                            data,
                            json: false,
                        });
                    } else if epoch == *known && offset <= *last {
                        // Already delivered (from the stream).
                    } else {
                        // What came before the gap goes out first; the sync
                        // (which needs this lock) delivers what follows.
                        self.deliver_ready(&mut ready);
                        c.buffer.push((epoch, offset, data));
                        // A gap or another epoch: the sync decides which.
                        if let Some(me) = self.me() {
                            me.start_sync(&mut c, &chan);
                        }
                    }
                }
            }
        }
        self.deliver_ready(&mut ready);
    }

    /// Fans out the publications gathered for one channel, as one batch.
    fn deliver_ready(&self, ready: &mut Vec<Publication>) {
        if !ready.is_empty() {
            self.hub.deliver_batch(ready);
            ready.clear();
        }
    }

    /// Publications of channels the node does not follow, received through
    /// a pattern subscription (live only).
    fn pattern_messages<'a>(&self, topic: &[u8], payloads: impl Iterator<Item = &'a Bytes>) {
        let Some(name) = self.channel_of(topic, false) else {
            return;
        };
        // A channel followed here arrives as a plain message too, and its
        // link delivers it to pattern subscribers as well, in order.
        if self.chan(name).is_some() {
            return;
        }
        let channel: Arc<str> = Arc::from(name);
        let pubs: Vec<Publication> = payloads
            .filter_map(|payload| match member::parse(payload) {
                Some(Message::Publication { offset, data, .. }) => Some(Publication {
                    channel: channel.clone(),
                    offset,
                    data,
                    json: false,
                }),
                _ => None,
            })
            .collect();
        if !pubs.is_empty() {
            self.hub.deliver_batch(&pubs);
        }
    }
}

/// Brings a channel's link in sync with its stream: (re)subscribes if needed,
/// reads what it missed, delivers it in order, then goes live.
async fn sync(inner: Arc<Inner>, chan: ChanRef) {
    let mut pause = Duration::from_millis(50);
    loop {
        let (name, topic, resubscribe, since) = {
            let mut c = lock(&chan);
            if c.removed {
                c.syncing = false;
                return;
            }
            let r = c.resubscribe;
            c.resubscribe = false;
            let since = c.known.as_ref().map(|(e, o)| Position {
                epoch: String::from_utf8_lossy(e).into_owned(),
                offset: *o,
            });
            (c.name.clone(), c.topic.clone(), r, since)
        };
        if resubscribe {
            let Some(ps) = inner.pubsub() else { return };
            let (link, confirmed) = ps.subscribe_channel(topic);
            lock(&chan).link = link;
            if confirmed.await.is_err() {
                // The subscriber link went down under us. If it is still
                // down, `reconnected` starts a sync when it comes back; but
                // it may already have come back (and seen this sync still
                // running, so started none): then go on here. Both read
                // under the channel's lock, which `reconnected` takes too,
                // so one of the two always resubscribes.
                let back = {
                    let mut c = lock(&chan);
                    c.resubscribe = true;
                    let back = ps.link_up(link);
                    if !back {
                        c.syncing = false;
                    }
                    back
                };
                if !back {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        }
        let read = inner
            .read(&name, true, since.as_ref(), since.is_some(), 0)
            .await;
        let (epoch, top, pubs) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(channel = %name, error = %e, "sync: cannot read the stream; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let mut c = lock(&chan);
        if c.removed {
            c.syncing = false;
            return;
        }
        match c.known.clone() {
            None => c.known = Some((epoch.clone(), top)),
            Some((known, _)) if known != epoch => inner.lose(&mut c, epoch.clone(), top),
            Some((_, last)) => {
                if top > last {
                    if pubs.first().map(|p| p.offset) != Some(last + 1) {
                        inner.lose(&mut c, epoch.clone(), top);
                    } else {
                        inner.filled.fetch_add(1, Ordering::Relaxed);
                        for p in pubs {
                            if p.offset > last {
                                inner.deliver(&mut c, p.offset, p.data);
                            }
                        }
                    }
                }
            }
        }
        // Then what arrived meanwhile, as long as it continues the sequence.
        let buffered = std::mem::take(&mut c.buffer);
        let mut gap = false;
        for (e, offset, data) in buffered {
            let Some((known, last)) = c.known.clone() else {
                break;
            };
            if gap {
                c.buffer.push((e, offset, data));
                continue;
            }
            if e != known || offset <= last {
                continue; // another epoch's, or already delivered
            }
            if offset == last + 1 {
                inner.deliver(&mut c, offset, data);
            } else {
                gap = true;
                c.buffer.push((e, offset, data));
            }
        }
        if gap {
            drop(c);
            continue; // read again from the last delivered offset
        }
        c.live = true;
        c.syncing = false;
        for w in c.waiters.drain(..) {
            let _ = w.send(());
        }
        return;
    }
}

impl Sink for Inner {
    fn messages(&self, batch: &[Incoming]) {
        if let [m] = batch {
            let one = std::iter::once(&m.payload);
            return if m.pattern {
                self.pattern_messages(&m.topic, one)
            } else if !self.node_wide(&m.topic, one.clone()) {
                self.channel_messages(&m.topic, one)
            };
        }
        // Grouped by topic, each topic's messages in the order they came
        // (a stable sort): one channel's order is all that is promised.
        let mut order: Vec<&Incoming> = batch.iter().collect();
        order.sort_by(|a, b| (a.pattern, &a.topic).cmp(&(b.pattern, &b.topic)));
        for run in order.chunk_by(|a, b| a.pattern == b.pattern && a.topic == b.topic) {
            let Some(first) = run.first() else { continue };
            let payloads = run.iter().map(|m| &m.payload);
            if first.pattern {
                self.pattern_messages(&first.topic, payloads);
            } else if !self.node_wide(&first.topic, payloads.clone()) {
                self.channel_messages(&first.topic, payloads);
            }
        }
    }

    fn reconnected(&self, link: u64) {
        if link != crate::pubsub::CLASSIC {
            return self.resync_link(link);
        }
        if let Some(ps) = self.pubsub() {
            // Confirmation not awaited: requests sent before it are missed,
            // as by a node whose link is down.
            drop(ps.subscribe(self.control.clone()));
            if self.node_msgs.get().is_some() {
                drop(ps.subscribe(self.own_topic.clone())); // confirmation not awaited
            }
            if self.lobby_msgs.get().is_some() {
                let confirmed = ps.subscribe(self.lobby_topic.clone());
                self.lobby_subscribed(confirmed);
            }
            // Every glob again; their new subscribers wait for this.
            let mut p = lock(&self.patterns);
            let p = &mut *p;
            for (glob, g) in p.globs.iter_mut() {
                p.attempts += 1;
                g.attempt = p.attempts;
                let confirmed = ps.psubscribe(glob.clone());
                if let Some(me) = self.me() {
                    tokio::spawn(me.pattern_confirmed(glob.clone(), g.attempt, confirmed));
                }
            }
        }
        if self.clustered() {
            // A node's announcement of its first wildcard subscription may
            // have been missed meanwhile: publish on pattern topics until
            // the next heartbeat tells.
            self.patterns_heard.fetch_add(1, Ordering::SeqCst);
            self.patterns_anywhere.store(true, Ordering::SeqCst);
        }
        self.resync_link(link);
    }

    fn disconnected(&self, link: u64) {
        if link == crate::pubsub::CLASSIC {
            // Patterns are lost with the connection: new subscribers wait
            // for their confirmation on the next one.
            let mut p = lock(&self.patterns);
            let p = &mut *p;
            for g in p.globs.values_mut() {
                p.attempts += 1;
                g.attempt = p.attempts;
                g.confirmed = false;
            }
        } else {
            // A sharded connection drops when its master lost a slot
            // (`sunsubscribe`, `-MOVED`) or died: learn the new owners
            // now, not at the next periodic refresh, so that the channels
            // resubscribe where their slots went.
            if let Some(r) = self.link.router() {
                r.refresh_soon();
            }
        }
        for chan in lock(&self.chans).values() {
            let mut c = lock(chan);
            if c.link == link {
                c.live = false;
                c.resubscribe = true;
            }
        }
    }
}

impl Inner {
    /// Link `link` is back (or gone from the map): the channels that were
    /// subscribed on it, and those whose slot had no master when they
    /// tried, subscribe again and fill their gaps from their streams. The
    /// channels of other links are not touched (their delivery goes on).
    fn resync_link(&self, link: u64) {
        let chans: Vec<ChanRef> = lock(&self.chans).values().cloned().collect();
        let Some(me) = self.me() else { return };
        for chan in chans {
            let mut c = lock(&chan);
            if c.link == link || c.link == crate::shards::NO_LINK {
                c.resubscribe = true;
                me.start_sync(&mut c, &chan);
            }
        }
    }
}
