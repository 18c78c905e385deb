//! The glue between the engine ([`Handler`]) and a scenario built on
//! [`HeraldClients`]: `fanout`, `bots` (and its Hold'em variant), `stream`
//! and `idle`.
//!
//! Why it exists: each of these scenarios used to implement [`Handler`]
//! itself, and each implementation was mostly the same forwarding: find the
//! client set that owns the connection's tag, hand it the open, the close,
//! the frame or the HTTP message, and give it a sink for the [`Event`]s it
//! decodes. Those five copies differed only in which set owns a tag and what
//! the sink does. A scenario now says just that, through [`Scenario`], and
//! [`Adapter`] does the forwarding once.
//!
//! Why it is built this way: it is on the hot path of every received
//! message, so it costs nothing there. [`Adapter`] is generic over the
//! scenario (monomorphised, no `dyn` of its own); a frame and an HTTP message
//! reach the scenario as one [`Arrival`], passed by value, whose two kinds
//! are told apart by one `match`; the sink is the same `&mut dyn FnMut` closure the scenarios built
//! before, and nothing is allocated.

use std::time::Instant;

use herald_ws::Message;

use crate::engine::{unexpected_http, CloseReason, ConnId, Handler, HttpMsg, Io, Tick};
use crate::hclients::{Event, HeraldClients};
use crate::BenchError;

/// A message the engine delivered on connection `tag`: a WebSocket or
/// raw-TCP message, or an HTTP response or SSE event.
pub(crate) struct Arrival<'a> {
    /// The connection's tag.
    pub tag: u64,
    /// The wall clock of its read batch (Unix nanoseconds).
    pub now_ns: i64,
    msg: Msg<'a>,
}

/// Which engine callback an [`Arrival`] came through.
enum Msg<'a> {
    /// [`Handler::on_message`].
    Frame(Message<'a>),
    /// [`Handler::on_http`].
    Http(HttpMsg<'a>),
}

impl Arrival<'_> {
    /// Whether this came from an HTTP connection (SSE, long-polling, the
    /// publish API).
    pub fn is_http(&self) -> bool {
        matches!(self.msg, Msg::Http(_))
    }

    /// Hands the message to `group`, the client set that owns its tag
    /// ([`HeraldClients::on_message`] or [`HeraldClients::on_http`]): setup
    /// traffic is consumed there, every other event goes to `sink`.
    pub fn feed(
        self,
        group: &mut HeraldClients,
        io: &mut Io,
        sink: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), BenchError> {
        match self.msg {
            Msg::Frame(msg) => group.on_message(io, self.tag, msg, sink),
            Msg::Http(msg) => group.on_http(io, self.tag, msg, sink),
        }
    }
}

/// A scenario whose connections all belong to [`HeraldClients`] sets.
///
/// Contract:
/// - [`group`](Scenario::group) returns the set that owns `tag`, the same set
///   for the whole life of the tag; every connection the scenario opens
///   belongs to one of its sets. [`Adapter`] sends the connection's open
///   there.
/// - [`on_arrival`](Scenario::on_arrival) must pass the message on with
///   [`Arrival::feed`] to the set that owns its tag (exactly once), then may do
///   its own follow-up (answer a bot, dispatch what the sink collected). It
///   is called once per message, so it must not allocate in the steady
///   state.
/// - HTTP messages reach it only when [`TAKES_HTTP`](Scenario::TAKES_HTTP)
///   is true; otherwise [`Adapter`] refuses them as the engine's default
///   does.
/// - [`on_close`](Scenario::on_close) defaults to the owning set's
///   [`HeraldClients::on_close`]; an override must still call it.
/// - [`on_tick`](Scenario::on_tick) is [`Handler::on_tick`], unchanged.
///
/// Errors from any of them stop the run, as in [`Handler`].
pub(crate) trait Scenario {
    /// Whether any of the scenario's clients use HTTP (SSE, long-polling,
    /// the publish API). Default: no; an HTTP message is then an error.
    const TAKES_HTTP: bool = false;

    /// The client set that owns connection `tag`.
    fn group(&mut self, tag: u64) -> &mut HeraldClients;

    /// A message arrived: feed it to [`group`](Scenario::group)`(msg.tag)`
    /// with the scenario's sink.
    fn on_arrival(&mut self, io: &mut Io, msg: Arrival<'_>) -> Result<(), BenchError>;

    /// Connection `tag` ended for `why`.
    fn on_close(&mut self, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        self.group(tag).on_close(tag, why)
    }

    /// As [`Handler::on_tick`].
    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError>;
}

/// Runs a [`Scenario`] on the engine: `engine.run(&mut Adapter(&mut s))`.
pub(crate) struct Adapter<'s, S>(pub &'s mut S);

impl<S: Scenario> Handler for Adapter<'_, S> {
    fn on_open(
        &mut self,
        io: &mut Io,
        _: ConnId,
        tag: u64,
        protocol: Option<&str>,
    ) -> Result<(), BenchError> {
        self.0.group(tag).on_open(io, tag, protocol)
    }

    fn on_message(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: Message<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        let msg = Msg::Frame(msg);
        self.0.on_arrival(io, Arrival { tag, now_ns, msg })
    }

    fn on_http(
        &mut self,
        io: &mut Io,
        tag: u64,
        msg: HttpMsg<'_>,
        now_ns: i64,
    ) -> Result<(), BenchError> {
        if !S::TAKES_HTTP {
            return Err(unexpected_http(tag));
        }
        let msg = Msg::Http(msg);
        self.0.on_arrival(io, Arrival { tag, now_ns, msg })
    }

    fn on_close(&mut self, _: &mut Io, tag: u64, why: CloseReason) -> Result<(), BenchError> {
        self.0.on_close(tag, why)
    }

    fn on_tick(&mut self, io: &mut Io, now: Instant) -> Result<Tick, BenchError> {
        self.0.on_tick(io, now)
    }
}

/// What the clients' sink reported for one message, kept until
/// [`Arrival::feed`] returns: the game bots answer through the clients and
/// the engine the sink borrows, so they read their [`Inbox`] afterwards.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Got {
    /// A reply to this command id (the message kept).
    Reply(u32),
    /// An error answer to this command id, with its code.
    Error(u32, u16),
    /// A publication.
    Pub,
    /// Anything else: a game push (the message kept).
    Other,
    /// An unreadable message, or a failed recovery.
    Unreadable,
}

/// The events of one arrival and the bytes of those a game bot reads,
/// reused from message to message (no allocation in the steady state).
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    got: Vec<(Got, usize, usize)>,
    bytes: Vec<u8>,
}

impl Inbox {
    /// Feeds `msg` to `clients` (its owner) and keeps what they report.
    pub fn fill(
        &mut self,
        msg: Arrival<'_>,
        clients: &mut HeraldClients,
        io: &mut Io,
    ) -> Result<(), BenchError> {
        let (got, bytes) = (&mut self.got, &mut self.bytes);
        let mut keep = |g: Got, msg: &[u8]| {
            let from = bytes.len();
            bytes.extend_from_slice(msg);
            got.push((g, from, bytes.len()));
        };
        msg.feed(clients, io, &mut |ev| match ev {
            Event::Reply { id, msg } => keep(Got::Reply(id), msg),
            Event::Error { id, code } => keep(Got::Error(id, code), &[]),
            Event::Pub { .. } => keep(Got::Pub, &[]),
            Event::Other { msg } => keep(Got::Other, msg),
            Event::Unreadable | Event::Unrecovered => keep(Got::Unreadable, &[]),
        })
    }

    /// What was kept, in order, each with its message (empty for errors
    /// and publications).
    pub fn iter(&self) -> impl Iterator<Item = (Got, &[u8])> {
        self.got
            .iter()
            .map(|&(g, from, to)| (g, self.bytes.get(from..to).unwrap_or(&[])))
    }

    /// Empties it, keeping its capacity.
    pub fn clear(&mut self) {
        self.got.clear();
        self.bytes.clear();
    }
}
