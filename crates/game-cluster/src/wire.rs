//! The node topics' wire format: the helpers every message of
//! `table_routes` is written and read with (bounds-checked: a truncated or
//! malformed message is refused, never a panic), and the owner → edge
//! [`DELIVER_MANY`] message, its encoder and its parser.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use herald_core::outbox::Frame;
use std::collections::HashMap;
use std::sync::Arc;

/// What an owner's tables queued for some of an edge's players, frames
/// shared by several of them sent once ([`DeliverMany`]).
pub(crate) const DELIVER_MANY: u8 = 7;

/// A [`DELIVER_MANY`] message is flushed once it would grow past this (a
/// larger one only holds a single frame larger than this).
pub(crate) const DELIVER_MAX: usize = 256 * 1024;

/// The [`DELIVER_MANY`] message: what an owner's tables queued for some of
/// an edge's players.
///
/// ```text
/// u8  DELIVER_MANY
/// u16 len, owner node id
/// u32 frame count, then per frame: u32 len, payload   (the frame table)
/// u32 proxy count, then per proxy:
///     u64 the edge's client id, u64 the proxy's sequence number,
///     u32 n, n × u32 indexes into the frame table, in order
/// ```
///
/// A frame the table encoded once for several players (the same bytes, by
/// pointer and length) is in the table once.
pub(crate) struct DeliverMany {
    pub(crate) owner: String,
    pub(crate) frames: Vec<Bytes>,
    pub(crate) proxies: Vec<Delivered>,
    order: Vec<u32>,
}

/// One proxy's part of a [`DeliverMany`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivered {
    pub(crate) client: u64,
    pub(crate) seq: u64,
    /// Its frames' indexes, as a range of [`DeliverMany::order`].
    at: std::ops::Range<usize>,
}

/// Builds [`DELIVER_MANY`] messages into one buffer, handed to a sender
/// when full or flushed (the broker copies it into its link's buffer).
pub(crate) struct DeliverManyEncoder {
    limit: usize,
    buf: BytesMut,
    /// Where the frame count is, and the frame table's size so far.
    frames_at: usize,
    frames: u32,
    /// The per-proxy part, appended to `buf` when the message is sent.
    entries: BytesMut,
    proxies: u32,
    /// Where the open entry's count is, and how many it has.
    open: Option<(usize, u32)>,
    /// Frames in the table: (kind, pointer, length) → index.
    index: HashMap<(u8, usize, usize), u32>,
    head: usize,
}

impl DeliverMany {
    pub(crate) fn encoder(limit: usize) -> DeliverManyEncoder {
        DeliverManyEncoder {
            limit,
            buf: BytesMut::new(),
            frames_at: 0,
            frames: 0,
            entries: BytesMut::new(),
            proxies: 0,
            open: None,
            index: HashMap::new(),
            head: 0,
        }
    }

    /// Parses a message (after its kind byte). `None` unless it is whole
    /// and well formed: every index within the frame table, nothing after
    /// the last proxy.
    pub(crate) fn decode(mut p: Bytes) -> Option<DeliverMany> {
        let owner = get_str(&mut p)?;
        let n = get_u32(&mut p)? as usize;
        let mut frames = Vec::with_capacity(n.min(p.remaining() / 4));
        for _ in 0..n {
            let len = get_u32(&mut p)? as usize;
            if p.remaining() < len {
                return None;
            }
            frames.push(p.split_to(len));
        }
        let n = get_u32(&mut p)? as usize;
        let mut proxies = Vec::with_capacity(n.min(p.remaining() / 20));
        let mut order = Vec::new();
        for _ in 0..n {
            let client = get_u64(&mut p)?;
            let seq = get_u64(&mut p)?;
            let count = get_u32(&mut p)? as usize;
            if p.remaining() < count.checked_mul(4)? {
                return None;
            }
            let start = order.len();
            for _ in 0..count {
                let i = p.get_u32();
                if i as usize >= frames.len() {
                    return None;
                }
                order.push(i);
            }
            proxies.push(Delivered {
                client,
                seq,
                at: start..order.len(),
            });
        }
        if p.has_remaining() {
            return None;
        }
        Some(DeliverMany {
            owner,
            frames,
            proxies,
            order,
        })
    }

    /// `d`'s frames, in order.
    pub(crate) fn frames_of<'a>(&'a self, d: &Delivered) -> impl Iterator<Item = &'a Bytes> + 'a {
        self.order[d.at.clone()]
            .iter()
            .map(|i| &self.frames[*i as usize])
    }
}

impl DeliverManyEncoder {
    /// Starts the messages of `owner` (after a flush).
    pub(crate) fn start(&mut self, owner: &str) {
        self.buf.clear();
        self.buf.put_u8(DELIVER_MANY);
        put_str(&mut self.buf, owner);
        self.head = self.buf.len();
        self.reset();
    }

    fn reset(&mut self) {
        self.buf.truncate(self.head);
        self.frames_at = self.buf.len();
        self.buf.put_u32(0);
        self.frames = 0;
        self.entries.clear();
        self.proxies = 0;
        self.open = None;
        self.index.clear();
    }

    /// The message's size so far.
    fn size(&self) -> usize {
        self.buf.len() + 4 + self.entries.len()
    }

    /// Adds `frames` of the edge's `client`, numbered from `seq` (one
    /// number per message they are in: more than one if they fill it).
    pub(crate) fn add(
        &mut self,
        client: u64,
        seq: &mut u64,
        frames: &[Frame],
        send: &mut impl FnMut(&[u8]),
    ) {
        for f in frames {
            let key = match f {
                Frame::Text(b) => (0, b.as_ptr() as usize, b.len()),
                Frame::Binary(b) => (1, b.as_ptr() as usize, b.len()),
                Frame::Spliced(s) => (2, Arc::as_ptr(s) as usize, s.len()),
                _ => continue,
            };
            let mut known = self.index.get(&key).copied();
            let grow = 4
                + known.map_or(4 + f.payload_len(), |_| 0)
                + if self.open.is_some() { 0 } else { 20 };
            if (self.open.is_some() || self.proxies > 0) && self.size() + grow > self.limit {
                if self.open.is_some() {
                    self.close_entry();
                    *seq += 1;
                }
                self.flush(send);
                known = None;
            }
            if self.open.is_none() {
                self.entries.put_u64(client);
                self.entries.put_u64(*seq);
                self.open = Some((self.entries.len(), 0));
                self.entries.put_u32(0);
            }
            let i = match known {
                Some(i) => i,
                None => {
                    let i = self.frames;
                    self.buf.put_u32(f.payload_len() as u32);
                    for piece in f.pieces() {
                        self.buf.put_slice(piece);
                    }
                    self.frames += 1;
                    self.index.insert(key, i);
                    i
                }
            };
            self.entries.put_u32(i);
            if let Some((_, n)) = &mut self.open {
                *n += 1;
            }
        }
        if self.open.is_some() {
            self.close_entry();
            *seq += 1;
        }
    }

    fn close_entry(&mut self) {
        if let Some((at, n)) = self.open.take() {
            self.entries[at..at + 4].copy_from_slice(&n.to_be_bytes());
            self.proxies += 1;
        }
    }

    /// Sends the message, if it has anything, and starts the next one.
    pub(crate) fn flush(&mut self, send: &mut impl FnMut(&[u8])) {
        self.close_entry();
        if self.proxies == 0 {
            return;
        }
        let at = self.frames_at;
        self.buf[at..at + 4].copy_from_slice(&self.frames.to_be_bytes());
        self.buf.put_u32(self.proxies);
        self.buf.extend_from_slice(&self.entries);
        send(&self.buf);
        self.reset();
    }
}

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    b.put_u16(s.len() as u16);
    b.put_slice(s);
}

pub(crate) fn get_str(p: &mut Bytes) -> Option<String> {
    if p.remaining() < 2 {
        return None;
    }
    let n = p.get_u16() as usize;
    if p.remaining() < n {
        return None;
    }
    String::from_utf8(p.split_to(n).to_vec()).ok()
}

pub(crate) fn get_u8(p: &mut Bytes) -> Option<u8> {
    p.has_remaining().then(|| p.get_u8())
}

pub(crate) fn get_u32(p: &mut Bytes) -> Option<u32> {
    (p.remaining() >= 4).then(|| p.get_u32())
}

pub(crate) fn get_u64(p: &mut Bytes) -> Option<u64> {
    (p.remaining() >= 8).then(|| p.get_u64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn truncated_input_is_refused_not_a_panic() {
        let mut b = BytesMut::new();
        put_str(&mut b, "node");
        b.put_u64(7);
        let full = b.freeze();
        for n in 0..full.len() {
            let mut p = full.slice(..n);
            let parsed = get_str(&mut p).and_then(|_| get_u64(&mut p));
            assert!(parsed.is_none(), "{n} bytes parsed");
        }
        let mut p = full.clone();
        assert_eq!(get_str(&mut p).as_deref(), Some("node"));
        assert_eq!(get_u64(&mut p), Some(7));
    }

    /// Encodes `proxies` (client, first seq, frames) with `limit`: the
    /// messages (after their kind byte) and each proxy's next seq.
    fn encode(limit: usize, proxies: &[(u64, u64, Vec<Frame>)]) -> (Vec<Bytes>, Vec<u64>) {
        let mut enc = DeliverMany::encoder(limit);
        enc.start("owner-1");
        let mut out = Vec::new();
        let mut send = |m: &[u8]| out.push(Bytes::copy_from_slice(m));
        let mut next = Vec::new();
        for (client, seq, frames) in proxies {
            let mut seq = *seq;
            enc.add(*client, &mut seq, frames, &mut send);
            next.push(seq);
        }
        enc.flush(&mut send);
        let out = out
            .into_iter()
            .map(|mut m| {
                assert_eq!(m.get_u8(), DELIVER_MANY);
                m
            })
            .collect();
        (out, next)
    }

    fn text(s: &str) -> Frame {
        Frame::Text(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Three proxies, each a reply of its own then the same broadcast: the
    /// broadcast is in the frame table once, every proxy gets its frames
    /// in order with its own sequence number, and the broadcast's three
    /// copies are one slice of the message.
    fn three_with_a_broadcast() -> Vec<(u64, u64, Vec<Frame>)> {
        let event = Frame::Text(Bytes::from(b"{\"game\":\"flop\"}".to_vec()));
        vec![
            (11, 0, vec![text("reply-a"), event.clone()]),
            (12, 7, vec![text("reply-b"), event.clone()]),
            (13, 42, vec![event.clone(), text("reply-c")]),
        ]
    }

    #[test]
    fn deliver_many_round_trip_shares_a_broadcast() {
        let proxies = three_with_a_broadcast();
        let (msgs, next) = encode(DELIVER_MAX, &proxies);
        assert_eq!(msgs.len(), 1);
        assert_eq!(next, [1, 8, 43]);
        let msg = DeliverMany::decode(msgs[0].clone()).expect("a valid message");
        assert_eq!(msg.owner, "owner-1");
        assert_eq!(msg.frames.len(), 4, "the broadcast once, three replies");
        let shared = msg
            .frames
            .iter()
            .filter(|f| f.as_ref() == b"{\"game\":\"flop\"}")
            .count();
        assert_eq!(shared, 1);
        assert_eq!(msg.proxies.len(), 3);
        let mut event_ptrs = HashSet::new();
        for (d, (client, seq, frames)) in msg.proxies.iter().zip(&proxies) {
            assert_eq!((d.client, d.seq), (*client, *seq));
            let got: Vec<&Bytes> = msg.frames_of(d).collect();
            let want: Vec<Vec<u8>> = frames.iter().map(|f| f.payload().to_vec()).collect();
            assert_eq!(got.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), want);
            for b in got {
                if b.as_ref() == b"{\"game\":\"flop\"}" {
                    event_ptrs.insert(b.as_ptr() as usize);
                }
            }
        }
        assert_eq!(event_ptrs.len(), 1, "one slice of the message, not copies");
        // The same bytes in two buffers are two frames (no content
        // comparison): correct, only larger.
        let (msgs, _) = encode(
            DELIVER_MAX,
            &[(1, 0, vec![text("x")]), (2, 0, vec![text("x")])],
        );
        let msg = DeliverMany::decode(msgs[0].clone()).expect("valid");
        assert_eq!(msg.frames.len(), 2);
    }

    #[test]
    fn deliver_many_truncated_or_extended_is_refused_not_a_panic() {
        let (msgs, _) = encode(DELIVER_MAX, &three_with_a_broadcast());
        let full = &msgs[0];
        for n in 0..full.len() {
            assert!(
                DeliverMany::decode(full.slice(..n)).is_none(),
                "{n} bytes parsed"
            );
        }
        let mut longer = BytesMut::from(full.as_ref());
        longer.put_u8(0);
        assert!(DeliverMany::decode(longer.freeze()).is_none());
        // Counts far larger than the message: refused, nothing huge
        // allocated.
        let mut b = BytesMut::new();
        put_str(&mut b, "o");
        b.put_u32(u32::MAX);
        assert!(DeliverMany::decode(b.clone().freeze()).is_none());
        let mut b = BytesMut::new();
        put_str(&mut b, "o");
        b.put_u32(0);
        b.put_u32(u32::MAX);
        b.put_u64(1);
        b.put_u64(0);
        b.put_u32(u32::MAX);
        assert!(DeliverMany::decode(b.freeze()).is_none());
    }

    #[test]
    fn deliver_many_index_past_the_frame_table_is_refused() {
        let (msgs, _) = encode(DELIVER_MAX, &three_with_a_broadcast());
        let full = &msgs[0];
        let frames = DeliverMany::decode(full.clone())
            .expect("valid")
            .frames
            .len() as u32;
        // The last four bytes are the last proxy's last index.
        let at = full.len() - 4;
        let with = |i: u32| {
            let mut b = BytesMut::from(full.as_ref());
            b[at..].copy_from_slice(&i.to_be_bytes());
            DeliverMany::decode(b.freeze())
        };
        assert!(with(frames - 1).is_some());
        assert!(with(frames).is_none());
        assert!(with(u32::MAX).is_none());
    }

    #[test]
    fn deliver_many_past_its_bound_goes_out_in_several_numbered_messages() {
        let event = Frame::Binary(Bytes::from(vec![7u8; 300]));
        let mut proxies = Vec::new();
        for c in 0..4u64 {
            let frames: Vec<Frame> = (0..10)
                .map(|i| Frame::Binary(Bytes::from(vec![c as u8 * 10 + i; 100])))
                .chain([event.clone()])
                .collect();
            proxies.push((c, c * 100, frames));
        }
        let (msgs, next) = encode(1024, &proxies);
        assert!(msgs.len() > 3, "{} messages", msgs.len());
        let mut seen: HashMap<u64, (u64, Vec<Vec<u8>>)> = HashMap::new();
        for m in &msgs {
            assert!(m.len() < 1024, "{} bytes", m.len());
            let msg = DeliverMany::decode(m.clone()).expect("valid");
            for d in &msg.proxies {
                let (c, s) = (d.client, d.seq);
                let e = seen.entry(c).or_insert((c * 100, Vec::new()));
                assert_eq!(s, e.0, "proxy {c}: consecutive numbers");
                e.0 += 1;
                e.1.extend(msg.frames_of(d).map(|b| b.to_vec()));
            }
        }
        for (i, (c, _, frames)) in proxies.iter().enumerate() {
            let (after, got) = &seen[c];
            assert_eq!(*after, next[i]);
            let want: Vec<Vec<u8>> = frames.iter().map(|f| f.payload().to_vec()).collect();
            assert_eq!(got, &want, "proxy {c}: every frame, in order");
        }
        // A frame larger than the bound still goes, alone.
        let big = Frame::Binary(Bytes::from(vec![1u8; 5000]));
        let (msgs, next) = encode(1024, &[(1, 0, vec![text("a"), big.clone(), text("b")])]);
        assert_eq!(msgs.len(), 3);
        assert_eq!(next, [3]);
    }
}
