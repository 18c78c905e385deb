//! The in-memory broker: one node, no persistence. The default.
//!
//! Each channel has a small state (offset counter and a bounded history ring)
//! behind its own mutex, found through a sharded map; a publication takes only
//! its channel's lock, under which it gets its offset, enters history and is
//! handed to the hub for fan-out — which gives the per-channel ordering and
//! atomicity of the [`Broker`](crate::Broker) contract. The epoch is random per
//! process start, because a restart loses all history.

use crate::broker::{Attach, Broker, BrokerError, Completion, Deliver, History, Publication};
use crate::shard::{lock, Sharded};
use bytes::Bytes;
use herald_proto::{HistoryItem, Position};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

const SHARDS: usize = 64;

#[derive(Debug, Default)]
struct ChannelState {
    offset: u64,
    history: VecDeque<HistoryItem>,
}

/// The in-memory broker.
pub struct MemoryBroker {
    epoch: Arc<str>,
    history_size: usize,
    channels: Sharded<Arc<str>, Arc<Mutex<ChannelState>>>,
    deliver: Arc<dyn Deliver>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("epoch", &self.epoch)
            .field("history_size", &self.history_size)
            .finish_non_exhaustive()
    }
}

impl MemoryBroker {
    /// A broker that keeps the last `history_size` publications per channel and
    /// hands every publication to `deliver`.
    pub fn new(history_size: usize, deliver: Arc<dyn Deliver>) -> MemoryBroker {
        let epoch: String = (0..8).map(|_| fastrand::alphanumeric()).collect::<String>();
        MemoryBroker {
            epoch: epoch.into(),
            history_size,
            channels: Sharded::new(SHARDS),
            deliver,
        }
    }

    /// This broker's epoch.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    fn state(&self, channel: &str, create: bool) -> Option<(Arc<str>, Arc<Mutex<ChannelState>>)> {
        let mut shard = self.channels.lock(channel);
        if let Some((k, v)) = shard.get_key_value(channel) {
            return Some((k.clone(), v.clone()));
        }
        if !create {
            return None;
        }
        let key: Arc<str> = channel.into();
        let st = Arc::new(Mutex::new(ChannelState::default()));
        shard.insert(key.clone(), st.clone());
        Some((key, st))
    }

    fn history_of(&self, st: &ChannelState, since: Option<&Position>, limit: usize) -> History {
        let after = since.map_or(0, |p| p.offset);
        let same_epoch = since.is_none_or(|p| p.epoch == *self.epoch);
        let oldest = st.history.front().map_or(st.offset + 1, |h| h.offset);
        let complete = since.is_none() || (same_epoch && after <= st.offset && after + 1 >= oldest);
        let skip = if same_epoch { after } else { 0 };
        let mut publications: Vec<HistoryItem> = st
            .history
            .iter()
            .filter(|h| h.offset > skip)
            .cloned()
            .collect();
        if limit > 0 && publications.len() > limit {
            publications.truncate(limit);
        }
        History {
            top: self.position_of(st.offset),
            publications,
            complete,
        }
    }

    fn position_of(&self, offset: u64) -> Position {
        Position {
            epoch: self.epoch.to_string(),
            offset,
        }
    }
}

impl Broker for MemoryBroker {
    fn publish(&self, channel: &str, data: Bytes) -> Completion<Result<Position, BrokerError>> {
        let Some((name, state)) = self.state(channel, true) else {
            return Completion::Ready(Err(BrokerError::Unavailable("no channel state".into())));
        };
        let mut st = lock(&state);
        st.offset += 1;
        let offset = st.offset;
        if self.history_size > 0 {
            if st.history.len() == self.history_size {
                st.history.pop_front();
            }
            st.history.push_back(HistoryItem {
                offset,
                data: data.clone(),
            });
        }
        let publication = Publication {
            channel: name,
            offset,
            data,
        };
        // Delivery under the channel lock: the contract's ordering and atomicity.
        self.deliver.deliver(&publication);
        drop(st);
        Completion::Ready(Ok(self.position_of(offset)))
    }

    fn subscribe(&self, channel: &str, since: Option<&Position>, attach: Attach) {
        let Some((_, state)) = self.state(channel, true) else {
            return attach(Err(BrokerError::Unavailable("no channel state".into())));
        };
        let st = lock(&state);
        let history = match since {
            Some(_) => self.history_of(&st, since, 0),
            None => History {
                top: self.position_of(st.offset),
                publications: Vec::new(),
                complete: true,
            },
        };
        // Under the channel lock: no publication can slip between the history
        // read and the hub registration that `attach` performs.
        attach(Ok(history));
    }

    fn position(&self, channel: &str) -> Completion<Result<Position, BrokerError>> {
        let offset = self
            .state(channel, false)
            .map_or(0, |(_, s)| lock(&s).offset);
        Completion::Ready(Ok(self.position_of(offset)))
    }

    fn history(
        &self,
        channel: &str,
        since: Option<&Position>,
        limit: usize,
    ) -> Completion<Result<History, BrokerError>> {
        let found = self.state(channel, false);
        let empty = ChannelState::default();
        let guard;
        let st: &ChannelState = match &found {
            Some((_, state)) => {
                guard = lock(state);
                &guard
            }
            None => &empty,
        };
        Completion::Ready(Ok(self.history_of(st, since, limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(String, u64)>>);
    impl Deliver for Recorder {
        fn deliver(&self, p: &Publication) {
            lock(&self.0).push((p.channel.to_string(), p.offset));
        }
    }

    fn ready<T>(c: Completion<T>) -> T {
        match c {
            Completion::Ready(t) => t,
            Completion::Pending(_) => panic!("memory broker must answer at once"),
        }
    }

    #[test]
    fn offsets_are_per_channel_and_delivered_in_order() {
        let rec = Arc::new(Recorder::default());
        let b = MemoryBroker::new(0, rec.clone());
        for _ in 0..3 {
            ready(b.publish("a", Bytes::from_static(b"1"))).unwrap();
        }
        let p = ready(b.publish("b", Bytes::from_static(b"1"))).unwrap();
        assert_eq!(p.offset, 1);
        assert_eq!(ready(b.position("a")).unwrap().offset, 3);
        assert_eq!(ready(b.position("zzz")).unwrap().offset, 0);
        let got = lock(&rec.0).clone();
        assert_eq!(
            got,
            vec![
                ("a".into(), 1),
                ("a".into(), 2),
                ("a".into(), 3),
                ("b".into(), 1)
            ]
        );
    }

    #[test]
    fn history_is_bounded_and_reports_gaps() {
        let b = MemoryBroker::new(2, Arc::new(Recorder::default()));
        for i in 0..5u8 {
            ready(b.publish("h", Bytes::from(vec![i]))).unwrap();
        }
        let all = ready(b.history("h", None, 0)).unwrap();
        assert_eq!(
            all.publications
                .iter()
                .map(|p| p.offset)
                .collect::<Vec<_>>(),
            vec![4, 5]
        );
        let pos = |offset| Position {
            epoch: b.epoch().to_string(),
            offset,
        };
        assert!(ready(b.history("h", Some(&pos(3)), 0)).unwrap().complete);
        assert!(!ready(b.history("h", Some(&pos(2)), 0)).unwrap().complete);
        let other = Position {
            epoch: "other".into(),
            offset: 4,
        };
        assert!(!ready(b.history("h", Some(&other), 0)).unwrap().complete);
    }
}
