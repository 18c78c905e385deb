//! The binary encoding (WebSocket binary frames, TCP length-prefixed frames).
//! See docs/protocol.md for the exact layouts.
//!
//! Byte 0 is the message type, then the fields in a fixed order: unsigned
//! LEB128 varints, length-prefixed strings and bytes, one flags byte where
//! fields are optional. No field names, no schema compiler: a publication push
//! is its channel, offset and payload plus four or five bytes of framing.
//!
//! Decoding is strict so that every message has exactly one encoding (which is
//! what lets the test vectors pin bytes): minimal varints only, no unknown flag
//! bits, no trailing bytes. Every length is checked against what is left of the
//! buffer before anything is allocated, and payloads decoded with
//! [`decode_request_bytes`] / [`decode_server_bytes`] are zero-copy slices.

use bytes::{BufMut, Bytes, BytesMut};

use crate::{
    is_json_object, ClientInfo, Command, DecodeError, HistoryItem, Position, Push, Reply, Request,
    SeatStatus, ServerMsg, TableEntry,
};

/// Message type bytes. Replies are `REPLY | command type`.
mod ty {
    pub const CONNECT: u8 = 0x01;
    pub const SUBSCRIBE: u8 = 0x02;
    pub const UNSUBSCRIBE: u8 = 0x03;
    pub const PUBLISH: u8 = 0x04;
    pub const PING: u8 = 0x05;
    pub const HISTORY: u8 = 0x06;
    pub const PRESENCE: u8 = 0x07;
    pub const PRESENCE_STATS: u8 = 0x08;
    pub const LOBBY: u8 = 0x09;
    pub const LOBBY_OFF: u8 = 0x0A;
    pub const SIT: u8 = 0x0B;
    pub const WATCH: u8 = 0x0C;
    pub const STAND: u8 = 0x0D;
    pub const ACT: u8 = 0x0E;
    pub const PLAY: u8 = 0x0F;
    /// The last command type: commands are `CONNECT..=LAST_COMMAND`.
    pub const LAST_COMMAND: u8 = PLAY;
    pub const REPLY: u8 = 0x80;
    pub const ERROR: u8 = 0xE0;
    pub const PUB: u8 = 0xA0;
    pub const JOIN: u8 = 0xA1;
    pub const LEAVE: u8 = 0xA2;
    pub const UNSUB: u8 = 0xA3;
    pub const DISCONNECT: u8 = 0xA4;
    pub const LOBBY_UPDATE: u8 = 0xA5;
    pub const GAME: u8 = 0xA6;
    pub const SEAT: u8 = 0xA7;
    pub const UNSEAT: u8 = 0xA8;
    pub const LOBBY_PAGE: u8 = 0xA9;
}

/// The longest varint (a u64 needs 64 / 7 rounded up = 10 bytes).
const MAX_VARINT_LEN: usize = 10;

// ---------------------------------------------------------------- decoding --

/// Decodes one client command from a binary message. Publication data is
/// copied out of `buf`; see [`decode_request_bytes`] for the zero-copy variant.
pub fn decode_request(buf: &[u8]) -> Result<Request, DecodeError> {
    request(&mut Reader::new(buf, None))
}

/// Like [`decode_request`], but publication data is a zero-copy slice of `buf`.
pub fn decode_request_bytes(buf: &Bytes) -> Result<Request, DecodeError> {
    request(&mut Reader::new(buf, Some(buf)))
}

/// Decodes one server message from a binary message. Payloads are copied out
/// of `buf`; see [`decode_server_bytes`] for the zero-copy variant.
pub fn decode_server(buf: &[u8]) -> Result<ServerMsg, DecodeError> {
    server(&mut Reader::new(buf, None))
}

/// Like [`decode_server`], but payloads are zero-copy slices of `buf`.
pub fn decode_server_bytes(buf: &Bytes) -> Result<ServerMsg, DecodeError> {
    server(&mut Reader::new(buf, Some(buf)))
}

fn malformed(what: &str) -> DecodeError {
    DecodeError::Malformed(what.into())
}

fn invalid(field: &'static str, reason: &str) -> DecodeError {
    DecodeError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Wraps an error that happened after the id was known (0 = no id: unwrapped).
fn with_id(id: u32, e: DecodeError) -> DecodeError {
    if id == 0 {
        e
    } else {
        DecodeError::WithId {
            id,
            source: Box::new(e),
        }
    }
}

/// A cursor over one message. `owner`, when given, is the `Bytes` that `buf`
/// is, so byte fields can be sliced out of it instead of copied.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    owner: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], owner: Option<&'a Bytes>) -> Self {
        Reader { buf, pos: 0, owner }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| DecodeError::Malformed(format!("truncated before {field}")))?;
        self.pos += 1;
        Ok(b)
    }

    /// A flags byte; bits outside `known` are an error (new options get new
    /// message types, so a set unknown bit means a broken or newer peer).
    fn flags(&mut self, known: u8) -> Result<u8, DecodeError> {
        let f = self.u8("flags")?;
        if f & !known != 0 {
            return Err(DecodeError::Malformed(format!(
                "unknown flag bits 0x{f:02x}"
            )));
        }
        Ok(f)
    }

    /// An unsigned LEB128 varint in its one minimal form.
    fn varint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let mut value = 0u64;
        for (i, &b) in rest.iter().take(MAX_VARINT_LEN).enumerate() {
            if i == MAX_VARINT_LEN - 1 && b > 1 {
                return Err(DecodeError::Malformed(format!(
                    "{field}: varint overflows u64"
                )));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(DecodeError::Malformed(format!("{field}: overlong varint")));
                }
                self.pos += i + 1;
                return Ok(value);
            }
        }
        Err(DecodeError::Malformed(format!(
            "truncated varint in {field}"
        )))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.varint(field)?).map_err(|_| invalid(field, "exceeds 4294967295"))
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        u16::try_from(self.varint(field)?).map_err(|_| invalid(field, "exceeds 65535"))
    }

    /// A length-prefixed run of bytes, borrowed. The length is checked against
    /// the rest of the buffer before anything else happens.
    fn slice(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.varint(field)?;
        if len > self.remaining() as u64 {
            return Err(DecodeError::Malformed(format!(
                "{field}: length {len} exceeds the {} bytes left",
                self.remaining()
            )));
        }
        let start = self.pos;
        self.pos += len as usize;
        self.buf
            .get(start..self.pos)
            .ok_or_else(|| malformed("length out of range"))
    }

    fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let s = self.slice(field)?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| invalid(field, "invalid UTF-8"))
    }

    fn bytes(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let s = self.slice(field)?;
        let end = self.pos;
        Ok(match self.owner {
            // `owner` is the buffer itself, so the range is the one just read.
            Some(owner) if end <= owner.len() => owner.slice(end - s.len()..end),
            _ => Bytes::copy_from_slice(s),
        })
    }

    /// A list length, bounded by the bytes left: each item takes at least
    /// `min_item` bytes, so a lying count fails before any allocation.
    fn count(&mut self, field: &'static str, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.varint(field)?;
        if n > (self.remaining() / min_item) as u64 {
            return Err(DecodeError::Malformed(format!(
                "{field}: count {n} exceeds what the {} bytes left can hold",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    fn position(&mut self) -> Result<Position, DecodeError> {
        Ok(Position {
            epoch: self.string("epoch")?,
            offset: self.varint("offset")?,
        })
    }

    fn items(&mut self) -> Result<Vec<HistoryItem>, DecodeError> {
        let n = self.count("publications", 2)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(HistoryItem {
                offset: self.varint("offset")?,
                data: self.bytes("data")?,
            });
        }
        Ok(items)
    }

    fn client_info(&mut self) -> Result<ClientInfo, DecodeError> {
        let client = self.string("client")?;
        let user = self.string("user")?;
        let info = self.bytes("info")?;
        if !info.is_empty() && !crate::jsontext::is_json(&info) {
            return Err(invalid("info", "expected JSON text"));
        }
        Ok(ClientInfo { client, user, info })
    }

    /// A lobby entry; `attrs` must be JSON-object text.
    fn table_entry(&mut self) -> Result<TableEntry, DecodeError> {
        let table = self.varint("table")?;
        let path = self.string("path")?;
        let seats = self.u32("seats")?;
        let players = self.u32("players")?;
        let watchers = self.u32("watchers")?;
        let attrs = self.bytes("attrs")?;
        if !is_json_object(&attrs) {
            return Err(invalid("attrs", "expected a JSON object"));
        }
        Ok(TableEntry {
            table,
            path,
            seats,
            players,
            watchers,
            attrs,
        })
    }

    /// A counted list of lobby entries: each takes at least 8 bytes (four
    /// one-byte varints, an empty path's length, and attrs `{}` with its
    /// length), so a lying count fails before any allocation.
    fn tables(&mut self) -> Result<Vec<TableEntry>, DecodeError> {
        let n = self.count("tables", 8)?;
        let mut tables = Vec::with_capacity(n);
        for _ in 0..n {
            tables.push(self.table_entry()?);
        }
        Ok(tables)
    }

    /// Ends a message: anything left over is an error.
    fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Malformed(format!("{n} trailing bytes"))),
        }
    }
}

fn unknown_type(t: u8) -> DecodeError {
    DecodeError::Unknown(format!("message type 0x{t:02x}"))
}

fn request(r: &mut Reader<'_>) -> Result<Request, DecodeError> {
    let t = r.u8("type")?;
    if !(ty::CONNECT..=ty::LAST_COMMAND).contains(&t) {
        return Err(unknown_type(t));
    }
    let id = r.u32("id")?;
    let cmd = command(t, r)
        .and_then(|cmd| r.finish().map(|()| cmd))
        .map_err(|e| with_id(id, e))?;
    Ok(Request { id, cmd })
}

fn command(t: u8, r: &mut Reader<'_>) -> Result<Command, DecodeError> {
    Ok(match t {
        ty::CONNECT => {
            let f = r.flags(0b11)?;
            let token = if f & 1 != 0 {
                Some(r.string("token")?)
            } else {
                None
            };
            let name = if f & 2 != 0 {
                Some(r.string("name")?)
            } else {
                None
            };
            Command::Connect { token, name }
        }
        ty::SUBSCRIBE => {
            let f = r.flags(0b111)?;
            let channel = r.string("channel")?;
            let recover = if f & 1 != 0 {
                Some(r.position()?)
            } else {
                None
            };
            let token = if f & 4 != 0 {
                Some(r.string("token")?)
            } else {
                None
            };
            Command::Subscribe {
                channel,
                recover,
                join_leave: f & 2 != 0,
                token,
            }
        }
        ty::UNSUBSCRIBE => Command::Unsubscribe {
            channel: r.string("channel")?,
        },
        ty::PUBLISH => Command::Publish {
            channel: r.string("channel")?,
            data: r.bytes("data")?,
        },
        ty::PING => Command::Ping,
        ty::HISTORY => {
            let f = r.flags(0b1)?;
            let channel = r.string("channel")?;
            let limit = r.u32("limit")?;
            let since = if f & 1 != 0 {
                Some(r.position()?)
            } else {
                None
            };
            Command::History {
                channel,
                since,
                limit,
            }
        }
        ty::PRESENCE => Command::Presence {
            channel: r.string("channel")?,
        },
        ty::PRESENCE_STATS => Command::PresenceStats {
            channel: r.string("channel")?,
        },
        ty::LOBBY => Command::Lobby {
            path: r.string("path")?,
        },
        ty::LOBBY_OFF => Command::LobbyOff {
            path: r.string("path")?,
        },
        ty::SIT => {
            let f = r.flags(0b1)?;
            let table = r.varint("table")?;
            let seat = if f & 1 != 0 {
                Some(r.u32("seat")?)
            } else {
                None
            };
            Command::Sit {
                table,
                seat,
                data: r.bytes("data")?,
            }
        }
        ty::WATCH => Command::Watch {
            table: r.varint("table")?,
        },
        ty::STAND => Command::Stand {
            table: r.varint("table")?,
        },
        ty::ACT => Command::Act {
            table: r.varint("table")?,
            data: r.bytes("data")?,
        },
        ty::PLAY => {
            let f = r.flags(0b111)?;
            let game = r.string("game")?;
            let seats = if f & 1 != 0 {
                Some(r.u32("seats")?)
            } else {
                None
            };
            let attrs = r.bytes("attrs")?;
            if !is_json_object(&attrs) {
                return Err(invalid("attrs", "expected a JSON object"));
            }
            let code = if f & 4 != 0 {
                Some(r.string("code")?)
            } else {
                None
            };
            Command::Play {
                game,
                seats,
                attrs,
                private: f & 2 != 0,
                code,
                data: r.bytes("data")?,
            }
        }
        other => return Err(unknown_type(other)),
    })
}

fn server(r: &mut Reader<'_>) -> Result<ServerMsg, DecodeError> {
    let t = r.u8("type")?;
    match t {
        ty::PUB..=ty::LOBBY_PAGE => {
            let push = push(t, r)?;
            r.finish()?;
            Ok(ServerMsg::Push(push))
        }
        ty::ERROR => {
            let id = r.u32("id")?;
            let msg = (|| {
                let code = r.u16("code")?;
                let message = r.string("message")?;
                r.finish()?;
                Ok(ServerMsg::Error { id, code, message })
            })();
            msg.map_err(|e| with_id(id, e))
        }
        _ if t & !0x0f == ty::REPLY && (ty::CONNECT..=ty::LAST_COMMAND).contains(&(t & 0x0f)) => {
            let id = r.u32("id")?;
            let reply = reply(t & 0x0f, r)
                .and_then(|reply| r.finish().map(|()| reply))
                .map_err(|e| with_id(id, e))?;
            Ok(ServerMsg::Reply { id, reply })
        }
        _ => Err(unknown_type(t)),
    }
}

fn reply(t: u8, r: &mut Reader<'_>) -> Result<Reply, DecodeError> {
    Ok(match t {
        ty::CONNECT => Reply::Connect {
            client: r.string("client")?,
            version: r.string("version")?,
            ping_interval: r.u32("ping_interval")?,
        },
        ty::SUBSCRIBE => {
            let f = r.flags(0b1)?;
            Reply::Subscribe {
                epoch: r.string("epoch")?,
                offset: r.varint("offset")?,
                recovered: f & 1 != 0,
                publications: r.items()?,
            }
        }
        ty::UNSUBSCRIBE => Reply::Unsubscribe,
        ty::PUBLISH => Reply::Publish {
            epoch: r.string("epoch")?,
            offset: r.varint("offset")?,
        },
        ty::PING => Reply::Ping,
        ty::HISTORY => Reply::History {
            epoch: r.string("epoch")?,
            offset: r.varint("offset")?,
            publications: r.items()?,
        },
        ty::PRESENCE => {
            let n = r.count("clients", 2)?;
            let mut clients = Vec::with_capacity(n);
            for _ in 0..n {
                clients.push(r.client_info()?);
            }
            Reply::Presence { clients }
        }
        ty::PRESENCE_STATS => Reply::PresenceStats {
            clients: r.varint("clients")?,
            users: r.varint("users")?,
        },
        ty::LOBBY => Reply::Lobby {
            seq: r.varint("seq")?,
            tables: r.tables()?,
        },
        ty::LOBBY_OFF => Reply::LobbyOff,
        ty::SIT => Reply::Sit {
            seat: r.u32("seat")?,
            data: r.bytes("data")?,
        },
        ty::WATCH => Reply::Watch {
            data: r.bytes("data")?,
        },
        ty::STAND => Reply::Stand,
        ty::ACT => Reply::Act,
        ty::PLAY => {
            let f = r.flags(0b11)?;
            let table = r.varint("table")?;
            let seat = r.u32("seat")?;
            let code = if f & 1 != 0 {
                Some(r.string("code")?)
            } else {
                None
            };
            Reply::Play {
                table,
                seat,
                code,
                created: f & 2 != 0,
                data: r.bytes("data")?,
            }
        }
        other => return Err(unknown_type(ty::REPLY | other)),
    })
}

fn push(t: u8, r: &mut Reader<'_>) -> Result<Push, DecodeError> {
    Ok(match t {
        ty::PUB => Push::Publication {
            channel: r.string("channel")?,
            offset: r.varint("offset")?,
            data: r.bytes("data")?,
        },
        ty::JOIN => Push::Join {
            channel: r.string("channel")?,
            info: r.client_info()?,
        },
        ty::LEAVE => Push::Leave {
            channel: r.string("channel")?,
            info: r.client_info()?,
        },
        ty::UNSUB => Push::Unsubscribed {
            channel: r.string("channel")?,
            code: r.u16("code")?,
            reason: r.string("reason")?,
        },
        ty::DISCONNECT => Push::Disconnect {
            code: r.u16("code")?,
            reason: r.string("reason")?,
        },
        ty::LOBBY_UPDATE => {
            let path = r.string("path")?;
            let seq = r.varint("seq")?;
            let tables = r.tables()?;
            let n = r.count("removed", 1)?;
            let mut removed = Vec::with_capacity(n);
            for _ in 0..n {
                removed.push(r.varint("removed")?);
            }
            Push::LobbyUpdate {
                path,
                seq,
                tables,
                removed,
            }
        }
        ty::GAME => Push::Game {
            table: r.varint("table")?,
            data: r.bytes("data")?,
        },
        ty::SEAT => Push::Seat {
            table: r.varint("table")?,
            seat: r.u32("seat")?,
            user: r.string("user")?,
            status: SeatStatus::from_u8(r.u8("status")?)
                .ok_or_else(|| invalid("status", "expected 0..=3"))?,
        },
        ty::UNSEAT => Push::Unseat {
            table: r.varint("table")?,
            code: r.u16("code")?,
            reason: r.string("reason")?,
        },
        ty::LOBBY_PAGE => Push::LobbyPage {
            path: r.string("path")?,
            tables: r.tables()?,
        },
        other => return Err(unknown_type(other)),
    })
}

// ---------------------------------------------------------------- encoding --

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_varint(out: &mut BytesMut, mut v: u64) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    out.extend_from_slice(&buf[..=n]);
}

/// How many bytes [`put_varint`] writes for `v`.
pub const fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 significant bits, at least 1.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_str(out: &mut BytesMut, s: &str) {
    put_bytes(out, s.as_bytes());
}

fn put_position(out: &mut BytesMut, p: &Position) {
    put_str(out, &p.epoch);
    put_varint(out, p.offset);
}

/// The attrs written for a lobby entry: the text itself when it is a JSON
/// object (what decoders accept), else `{}`.
pub(crate) fn attrs_or_empty(attrs: &[u8]) -> &[u8] {
    if is_json_object(attrs) {
        attrs
    } else {
        b"{}"
    }
}

fn put_tables(out: &mut BytesMut, tables: &[TableEntry]) {
    put_varint(out, tables.len() as u64);
    for t in tables {
        put_varint(out, t.table);
        put_str(out, &t.path);
        put_varint(out, u64::from(t.seats));
        put_varint(out, u64::from(t.players));
        put_varint(out, u64::from(t.watchers));
        put_bytes(out, attrs_or_empty(&t.attrs));
    }
}

fn put_items(out: &mut BytesMut, items: &[HistoryItem]) {
    put_varint(out, items.len() as u64);
    for item in items {
        put_varint(out, item.offset);
        put_bytes(out, &item.data);
    }
}

/// Encodes one client command in the binary encoding.
pub fn encode_request(req: &Request, out: &mut BytesMut) {
    let id = u64::from(req.id);
    match &req.cmd {
        Command::Connect { token, name } => {
            out.put_u8(ty::CONNECT);
            put_varint(out, id);
            out.put_u8(u8::from(token.is_some()) | u8::from(name.is_some()) << 1);
            if let Some(token) = token {
                put_str(out, token);
            }
            if let Some(name) = name {
                put_str(out, name);
            }
        }
        Command::Subscribe {
            channel,
            recover,
            join_leave,
            token,
        } => {
            out.put_u8(ty::SUBSCRIBE);
            put_varint(out, id);
            out.put_u8(
                u8::from(recover.is_some())
                    | u8::from(*join_leave) << 1
                    | u8::from(token.is_some()) << 2,
            );
            put_str(out, channel);
            if let Some(p) = recover {
                put_position(out, p);
            }
            if let Some(t) = token {
                put_str(out, t);
            }
        }
        Command::Unsubscribe { channel } => {
            out.put_u8(ty::UNSUBSCRIBE);
            put_varint(out, id);
            put_str(out, channel);
        }
        Command::Publish { channel, data } => {
            out.reserve(1 + 3 * MAX_VARINT_LEN + channel.len() + data.len());
            out.put_u8(ty::PUBLISH);
            put_varint(out, id);
            put_str(out, channel);
            put_bytes(out, data);
        }
        Command::Ping => {
            out.put_u8(ty::PING);
            put_varint(out, id);
        }
        Command::History {
            channel,
            since,
            limit,
        } => {
            out.put_u8(ty::HISTORY);
            put_varint(out, id);
            out.put_u8(u8::from(since.is_some()));
            put_str(out, channel);
            put_varint(out, u64::from(*limit));
            if let Some(p) = since {
                put_position(out, p);
            }
        }
        Command::Presence { channel } => {
            out.put_u8(ty::PRESENCE);
            put_varint(out, id);
            put_str(out, channel);
        }
        Command::PresenceStats { channel } => {
            out.put_u8(ty::PRESENCE_STATS);
            put_varint(out, id);
            put_str(out, channel);
        }
        Command::Lobby { path } => {
            out.put_u8(ty::LOBBY);
            put_varint(out, id);
            put_str(out, path);
        }
        Command::LobbyOff { path } => {
            out.put_u8(ty::LOBBY_OFF);
            put_varint(out, id);
            put_str(out, path);
        }
        Command::Sit { table, seat, data } => {
            out.put_u8(ty::SIT);
            put_varint(out, id);
            out.put_u8(u8::from(seat.is_some()));
            put_varint(out, *table);
            if let Some(seat) = seat {
                put_varint(out, u64::from(*seat));
            }
            put_bytes(out, data);
        }
        Command::Watch { table } => {
            out.put_u8(ty::WATCH);
            put_varint(out, id);
            put_varint(out, *table);
        }
        Command::Stand { table } => {
            out.put_u8(ty::STAND);
            put_varint(out, id);
            put_varint(out, *table);
        }
        Command::Act { table, data } => {
            out.put_u8(ty::ACT);
            put_varint(out, id);
            put_varint(out, *table);
            put_bytes(out, data);
        }
        Command::Play {
            game,
            seats,
            attrs,
            private,
            code,
            data,
        } => {
            out.put_u8(ty::PLAY);
            put_varint(out, id);
            out.put_u8(
                u8::from(seats.is_some()) | u8::from(*private) << 1 | u8::from(code.is_some()) << 2,
            );
            put_str(out, game);
            if let Some(seats) = seats {
                put_varint(out, u64::from(*seats));
            }
            put_bytes(out, attrs_or_empty(attrs));
            if let Some(code) = code {
                put_str(out, code);
            }
            put_bytes(out, data);
        }
    }
}

/// Encodes one server message in the binary encoding.
///
/// A [`Push::Publication`] is the hot path (encoded once, shared with every
/// subscriber): it reserves its exact size and allocates nothing else.
pub fn encode_server(msg: &ServerMsg, out: &mut BytesMut) {
    match msg {
        ServerMsg::Reply { id, reply } => encode_reply(*id, reply, out),
        ServerMsg::Error { id, code, message } => {
            out.put_u8(ty::ERROR);
            put_varint(out, u64::from(*id));
            put_varint(out, u64::from(*code));
            put_str(out, message);
        }
        ServerMsg::Push(push) => encode_push(push, out),
    }
}

fn encode_reply(id: u32, reply: &Reply, out: &mut BytesMut) {
    let head = |out: &mut BytesMut, t: u8| {
        out.put_u8(ty::REPLY | t);
        put_varint(out, u64::from(id));
    };
    match reply {
        Reply::Connect {
            client,
            version,
            ping_interval,
        } => {
            head(out, ty::CONNECT);
            put_str(out, client);
            put_str(out, version);
            put_varint(out, u64::from(*ping_interval));
        }
        Reply::Subscribe {
            epoch,
            offset,
            recovered,
            publications,
        } => {
            head(out, ty::SUBSCRIBE);
            out.put_u8(u8::from(*recovered));
            put_str(out, epoch);
            put_varint(out, *offset);
            put_items(out, publications);
        }
        Reply::Unsubscribe => head(out, ty::UNSUBSCRIBE),
        Reply::Publish { epoch, offset } => {
            head(out, ty::PUBLISH);
            put_str(out, epoch);
            put_varint(out, *offset);
        }
        Reply::Ping => head(out, ty::PING),
        Reply::History {
            epoch,
            offset,
            publications,
        } => {
            head(out, ty::HISTORY);
            put_str(out, epoch);
            put_varint(out, *offset);
            put_items(out, publications);
        }
        Reply::Presence { clients } => {
            head(out, ty::PRESENCE);
            put_varint(out, clients.len() as u64);
            for c in clients {
                put_client_info(out, c);
            }
        }
        Reply::PresenceStats { clients, users } => {
            head(out, ty::PRESENCE_STATS);
            put_varint(out, *clients);
            put_varint(out, *users);
        }
        Reply::Lobby { seq, tables } => {
            head(out, ty::LOBBY);
            put_varint(out, *seq);
            put_tables(out, tables);
        }
        Reply::LobbyOff => head(out, ty::LOBBY_OFF),
        Reply::Sit { seat, data } => {
            head(out, ty::SIT);
            put_varint(out, u64::from(*seat));
            put_bytes(out, data);
        }
        Reply::Watch { data } => {
            head(out, ty::WATCH);
            put_bytes(out, data);
        }
        Reply::Stand => head(out, ty::STAND),
        Reply::Act => head(out, ty::ACT),
        Reply::Play {
            table,
            seat,
            code,
            created,
            data,
        } => {
            head(out, ty::PLAY);
            out.put_u8(u8::from(code.is_some()) | u8::from(*created) << 1);
            put_varint(out, *table);
            put_varint(out, u64::from(*seat));
            if let Some(code) = code {
                put_str(out, code);
            }
            put_bytes(out, data);
        }
    }
}

fn put_client_info(out: &mut BytesMut, c: &ClientInfo) {
    put_str(out, &c.client);
    put_str(out, &c.user);
    put_bytes(out, &c.info);
}

fn encode_push(push: &Push, out: &mut BytesMut) {
    match push {
        Push::Publication {
            channel,
            offset,
            data,
        } => {
            out.reserve(
                1 + varint_len(channel.len() as u64)
                    + channel.len()
                    + varint_len(*offset)
                    + varint_len(data.len() as u64)
                    + data.len(),
            );
            out.put_u8(ty::PUB);
            put_str(out, channel);
            put_varint(out, *offset);
            put_bytes(out, data);
        }
        Push::Join { channel, info } => {
            out.put_u8(ty::JOIN);
            put_str(out, channel);
            put_client_info(out, info);
        }
        Push::Leave { channel, info } => {
            out.put_u8(ty::LEAVE);
            put_str(out, channel);
            put_client_info(out, info);
        }
        Push::Unsubscribed {
            channel,
            code,
            reason,
        } => {
            out.put_u8(ty::UNSUB);
            put_str(out, channel);
            put_varint(out, u64::from(*code));
            put_str(out, reason);
        }
        Push::Disconnect { code, reason } => {
            out.put_u8(ty::DISCONNECT);
            put_varint(out, u64::from(*code));
            put_str(out, reason);
        }
        Push::LobbyUpdate {
            path,
            seq,
            tables,
            removed,
        } => {
            out.put_u8(ty::LOBBY_UPDATE);
            put_str(out, path);
            put_varint(out, *seq);
            put_tables(out, tables);
            put_varint(out, removed.len() as u64);
            for id in removed {
                put_varint(out, *id);
            }
        }
        Push::Game { table, data } => {
            out.reserve(1 + 2 * MAX_VARINT_LEN + data.len());
            out.put_u8(ty::GAME);
            put_varint(out, *table);
            put_bytes(out, data);
        }
        Push::Seat {
            table,
            seat,
            user,
            status,
        } => {
            out.put_u8(ty::SEAT);
            put_varint(out, *table);
            put_varint(out, u64::from(*seat));
            put_str(out, user);
            out.put_u8(status.to_u8());
        }
        Push::Unseat {
            table,
            code,
            reason,
        } => {
            out.put_u8(ty::UNSEAT);
            put_varint(out, *table);
            put_varint(out, u64::from(*code));
            put_str(out, reason);
        }
        Push::LobbyPage { path, tables } => {
            out.put_u8(ty::LOBBY_PAGE);
            put_str(out, path);
            put_tables(out, tables);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn varint_bytes(v: u64) -> Vec<u8> {
        let mut out = BytesMut::new();
        put_varint(&mut out, v);
        out.to_vec()
    }

    fn read_varint(b: &[u8]) -> Result<u64, DecodeError> {
        let mut r = Reader::new(b, None);
        let v = r.varint("v")?;
        r.finish()?;
        Ok(v)
    }

    #[test]
    fn varints_round_trip_and_are_minimal() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u64::from(u32::MAX),
            1 << 63,
            u64::MAX,
        ] {
            let b = varint_bytes(v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            assert_eq!(read_varint(&b).unwrap(), v);
        }
        assert_eq!(varint_bytes(300), [0xac, 0x02]);
        assert_eq!(varint_bytes(u64::MAX).len(), 10);
    }

    #[test]
    fn varint_rejects() {
        // Overlong forms of 0 and 1.
        assert!(read_varint(&[0x80, 0x00]).is_err());
        assert!(read_varint(&[0x81, 0x80, 0x00]).is_err());
        // Truncated.
        assert!(read_varint(&[0x80]).is_err());
        assert!(read_varint(&[]).is_err());
        // 10th byte above 1 overflows u64; an 11th byte is never allowed.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert!(read_varint(&over).is_err());
        let mut eleven = vec![0xff; 10];
        eleven.push(0x01);
        assert!(read_varint(&eleven).is_err());
    }

    #[test]
    fn zero_copy_data() {
        let mut out = BytesMut::new();
        encode_request(
            &Request {
                id: 3,
                cmd: Command::Publish {
                    channel: "c".into(),
                    data: Bytes::from_static(b"\x00\x01\x02"),
                },
            },
            &mut out,
        );
        let buf = out.freeze();
        let r = decode_request_bytes(&buf).unwrap();
        let Command::Publish { data, .. } = r.cmd else {
            panic!("not a publish")
        };
        assert_eq!(&data[..], b"\x00\x01\x02");
        let base = buf.as_ptr() as usize;
        assert!((base..base + buf.len()).contains(&(data.as_ptr() as usize)));
    }

    #[test]
    fn lying_counts_fail_before_allocating() {
        // History reply claiming u32::MAX items in 3 bytes.
        let buf = [0x86, 0x01, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        assert!(matches!(
            decode_server(&buf),
            Err(DecodeError::WithId { id: 1, .. })
        ));
        // Publish with a length prefix far past the end.
        let buf = [0x04, 0x01, 0x01, b'c', 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(decode_request(&buf).is_err());
    }
}
