//! Encoding JSON messages in canonical form (docs/protocol.md §3.4), written
//! straight into the output `BytesMut`.
//!
//! Why by hand rather than serde: the canonical form (fixed key order, omitted
//! defaults, payloads embedded verbatim or as b64) is easiest to guarantee as
//! literal text, and a publication push must cost one exact-size allocation.

use bytes::{BufMut, Bytes, BytesMut};

use crate::binary::attrs_or_empty;
use crate::jsontext::{base64_len, is_json, str_len, u64_len, write_base64, write_str, write_u64};
use crate::{
    ClientInfo, Command, HistoryItem, Position, Push, Reply, Request, ServerMsg, TableEntry,
};

/// Encodes one client command in canonical JSON.
pub fn encode_request(req: &Request, out: &mut BytesMut) {
    if let Command::Publish { channel, data } = &req.cmd {
        out.reserve(64 + channel.len() + base64_len(data.len()));
    }
    open(out, req.id);
    match &req.cmd {
        Command::Connect { token, name } => {
            out.extend_from_slice(b"\"connect\":{");
            let mut obj = Obj::new();
            if let Some(token) = token {
                obj.key(out, b"\"token\":");
                write_str(out, token);
            }
            if let Some(name) = name {
                obj.key(out, b"\"name\":");
                write_str(out, name);
            }
        }
        Command::Subscribe {
            channel,
            recover,
            join_leave,
            token,
        } => {
            out.extend_from_slice(b"\"subscribe\":{\"channel\":");
            write_str(out, channel);
            if let Some(pos) = recover {
                out.extend_from_slice(b",\"recover\":");
                write_position(out, pos);
            }
            if *join_leave {
                out.extend_from_slice(b",\"join_leave\":true");
            }
            if let Some(t) = token {
                out.extend_from_slice(b",\"token\":");
                write_str(out, t);
            }
        }
        Command::Unsubscribe { channel } => {
            out.extend_from_slice(b"\"unsubscribe\":{\"channel\":");
            write_str(out, channel);
        }
        Command::Publish { channel, data } => {
            out.extend_from_slice(b"\"publish\":{\"channel\":");
            write_str(out, channel);
            out.put_u8(b',');
            write_data(out, data);
        }
        Command::Ping => out.extend_from_slice(b"\"ping\":{"),
        Command::History {
            channel,
            since,
            limit,
        } => {
            out.extend_from_slice(b"\"history\":{\"channel\":");
            write_str(out, channel);
            if let Some(pos) = since {
                out.extend_from_slice(b",\"since\":");
                write_position(out, pos);
            }
            if *limit != 0 {
                out.extend_from_slice(b",\"limit\":");
                write_u64(out, u64::from(*limit));
            }
        }
        Command::Presence { channel } => {
            out.extend_from_slice(b"\"presence\":{\"channel\":");
            write_str(out, channel);
        }
        Command::PresenceStats { channel } => {
            out.extend_from_slice(b"\"presence_stats\":{\"channel\":");
            write_str(out, channel);
        }
        Command::Lobby { path } => {
            out.extend_from_slice(b"\"lobby\":{");
            write_path(out, path);
        }
        Command::LobbyOff { path } => {
            out.extend_from_slice(b"\"lobby_off\":{");
            write_path(out, path);
        }
        Command::Sit { table, seat, data } => {
            out.extend_from_slice(b"\"sit\":{\"table\":");
            write_u64(out, *table);
            if let Some(seat) = seat {
                out.extend_from_slice(b",\"seat\":");
                write_u64(out, u64::from(*seat));
            }
            if !data.is_empty() {
                out.put_u8(b',');
                write_data(out, data);
            }
        }
        Command::Watch { table } => {
            out.extend_from_slice(b"\"watch\":{\"table\":");
            write_u64(out, *table);
        }
        Command::Stand { table } => {
            out.extend_from_slice(b"\"stand\":{\"table\":");
            write_u64(out, *table);
        }
        Command::Act { table, data } => {
            out.extend_from_slice(b"\"act\":{\"table\":");
            write_u64(out, *table);
            out.put_u8(b',');
            write_data(out, data);
        }
        Command::Play {
            game,
            seats,
            attrs,
            private,
            code,
            data,
        } => write_play(out, game, *seats, attrs, *private, code.as_deref(), data),
    }
    out.extend_from_slice(b"}}");
}

/// The body of a `play` command, every field optional.
fn write_play(
    out: &mut BytesMut,
    game: &str,
    seats: Option<u32>,
    attrs: &[u8],
    private: bool,
    code: Option<&str>,
    data: &[u8],
) {
    out.extend_from_slice(b"\"play\":{");
    // Canonical order, every field optional: a leading comma is
    // written before each field but the first.
    let mut first = true;
    let mut sep = |out: &mut BytesMut| {
        if !std::mem::take(&mut first) {
            out.put_u8(b',');
        }
    };
    if !game.is_empty() {
        sep(out);
        out.extend_from_slice(b"\"game\":");
        write_str(out, game);
    }
    if let Some(seats) = seats {
        sep(out);
        out.extend_from_slice(b"\"seats\":");
        write_u64(out, u64::from(seats));
    }
    let attrs = attrs_or_empty(attrs);
    if attrs.iter().any(|b| !b" \t\r\n{}".contains(b)) {
        sep(out);
        out.extend_from_slice(b"\"attrs\":");
        out.extend_from_slice(attrs);
    }
    if private {
        sep(out);
        out.extend_from_slice(b"\"private\":true");
    }
    if let Some(code) = code {
        sep(out);
        out.extend_from_slice(b"\"code\":");
        write_str(out, code);
    }
    if !data.is_empty() {
        sep(out);
        write_data(out, data);
    }
}

/// Encodes one server message in canonical JSON.
///
/// A [`Push::Publication`] is the hot path (encoded once, shared with every
/// subscriber): it reserves its exact size up front and allocates nothing else.
pub fn encode_server(msg: &ServerMsg, out: &mut BytesMut) {
    match msg {
        ServerMsg::Reply { id, reply } => {
            open(out, *id);
            encode_reply(reply, out);
        }
        ServerMsg::Error { id, code, message } => {
            open(out, *id);
            out.extend_from_slice(b"\"error\":{\"code\":");
            write_u64(out, u64::from(*code));
            out.extend_from_slice(b",\"message\":");
            write_str(out, message);
        }
        ServerMsg::Push(push) => {
            encode_push(push, out);
        }
    }
    out.extend_from_slice(b"}}");
}

fn encode_reply(reply: &Reply, out: &mut BytesMut) {
    match reply {
        Reply::Connect {
            client,
            version,
            ping_interval,
        } => {
            out.extend_from_slice(b"\"connect\":{\"client\":");
            write_str(out, client);
            out.extend_from_slice(b",\"version\":");
            write_str(out, version);
            out.extend_from_slice(b",\"ping_interval\":");
            write_u64(out, u64::from(*ping_interval));
        }
        Reply::Subscribe {
            epoch,
            offset,
            recovered,
            publications,
        } => {
            out.extend_from_slice(b"\"subscribe\":{\"epoch\":");
            write_str(out, epoch);
            out.extend_from_slice(b",\"offset\":");
            write_u64(out, *offset);
            if *recovered {
                out.extend_from_slice(b",\"recovered\":true");
            }
            if !publications.is_empty() {
                out.extend_from_slice(b",\"publications\":");
                write_items(out, publications);
            }
        }
        Reply::Unsubscribe => out.extend_from_slice(b"\"unsubscribe\":{"),
        Reply::Publish { epoch, offset } => {
            out.extend_from_slice(b"\"publish\":{\"epoch\":");
            write_str(out, epoch);
            out.extend_from_slice(b",\"offset\":");
            write_u64(out, *offset);
        }
        Reply::Ping => out.extend_from_slice(b"\"ping\":{"),
        Reply::History {
            epoch,
            offset,
            publications,
        } => {
            out.extend_from_slice(b"\"history\":{\"epoch\":");
            write_str(out, epoch);
            out.extend_from_slice(b",\"offset\":");
            write_u64(out, *offset);
            out.extend_from_slice(b",\"publications\":");
            write_items(out, publications);
        }
        Reply::Presence { clients } => {
            out.extend_from_slice(b"\"presence\":{\"clients\":[");
            for (i, c) in clients.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                out.extend_from_slice(b"{\"client\":");
                write_str(out, &c.client);
                out.extend_from_slice(b",\"user\":");
                write_str(out, &c.user);
                write_info(out, &c.info);
                out.put_u8(b'}');
            }
            out.put_u8(b']');
        }
        Reply::PresenceStats { clients, users } => {
            out.extend_from_slice(b"\"presence_stats\":{\"clients\":");
            write_u64(out, *clients);
            out.extend_from_slice(b",\"users\":");
            write_u64(out, *users);
        }
        Reply::Lobby { seq, tables } => {
            out.extend_from_slice(b"\"lobby\":{\"seq\":");
            write_u64(out, *seq);
            out.extend_from_slice(b",\"tables\":");
            write_tables(out, tables);
        }
        Reply::LobbyOff => out.extend_from_slice(b"\"lobby_off\":{"),
        Reply::Sit { seat, data } => {
            out.extend_from_slice(b"\"sit\":{\"seat\":");
            write_u64(out, u64::from(*seat));
            out.put_u8(b',');
            write_data(out, data);
        }
        Reply::Watch { data } => {
            out.extend_from_slice(b"\"watch\":{");
            write_data(out, data);
        }
        Reply::Stand => out.extend_from_slice(b"\"stand\":{"),
        Reply::Act => out.extend_from_slice(b"\"act\":{"),
        Reply::Play {
            table,
            seat,
            code,
            created,
            data,
        } => {
            out.extend_from_slice(b"\"play\":{\"table\":");
            write_u64(out, *table);
            out.extend_from_slice(b",\"seat\":");
            write_u64(out, u64::from(*seat));
            if let Some(code) = code {
                out.extend_from_slice(b",\"code\":");
                write_str(out, code);
            }
            if *created {
                out.extend_from_slice(b",\"created\":true");
            }
            out.put_u8(b',');
            write_data(out, data);
        }
    }
}

/// `{"pub":{"channel":` `,"offset":` `,` `"data":` or `"b64":"` and `}}`.
const PUB_FIXED_LEN: usize = 18 + 10 + 1 + 7 + 2;

/// A publication push whose `data` the caller already knows to be JSON text
/// as a JSON `data` field carries it (see [`decode_request_hinted`]
/// (crate::json::decode_request_hinted)): embedded verbatim without the
/// [`is_json`] pass, which on large payloads costs more than everything else
/// the server does with them (decision 0011). `known_json == false` checks as
/// [`encode_server`] does. The text is the same either way.
pub fn encode_json_publication(
    channel: &str,
    offset: u64,
    data: &[u8],
    known_json: bool,
    out: &mut BytesMut,
) {
    write_publication(channel, offset, data, known_json || is_json(data), out);
    out.extend_from_slice(b"}}");
}

/// What follows a publication's data in its JSON push: the push is
/// [`encode_json_publication_head`], the data's JSON text, then this.
pub const JSON_PUBLICATION_TAIL: &[u8] = b"}}";

/// The bytes of a JSON publication push that come before its data
/// (`{"pub":{"channel":…,"offset":N,"data":`), for data known to be JSON text.
/// The push is these, the data verbatim and [`JSON_PUBLICATION_TAIL`]: the
/// same bytes as [`encode_json_publication`] gives, but a server can write
/// the three pieces without copying large data into the push (the hub's
/// `Frame::Spliced`).
pub fn encode_json_publication_head(channel: &str, offset: u64, out: &mut BytesMut) {
    out.reserve(PUB_FIXED_LEN + str_len(channel) + u64_len(offset));
    out.extend_from_slice(b"{\"pub\":{\"channel\":");
    write_str(out, channel);
    out.extend_from_slice(b",\"offset\":");
    write_u64(out, offset);
    out.extend_from_slice(b",\"data\":");
}

/// `{"pub":{…,"data":…` without the closing braces.
fn write_publication(channel: &str, offset: u64, data: &[u8], json: bool, out: &mut BytesMut) {
    // The exact size, so the buffer is allocated once and, frozen, needs no
    // copy.
    let payload = if json {
        data.len()
    } else {
        base64_len(data.len()) + 1
    };
    out.reserve(PUB_FIXED_LEN + str_len(channel) + u64_len(offset) + payload);
    out.extend_from_slice(b"{\"pub\":{\"channel\":");
    write_str(out, channel);
    out.extend_from_slice(b",\"offset\":");
    write_u64(out, offset);
    out.put_u8(b',');
    write_data_as(out, data, json);
}

fn encode_push(push: &Push, out: &mut BytesMut) {
    match push {
        Push::Publication {
            channel,
            offset,
            data,
        } => write_publication(channel, *offset, data, is_json(data), out),
        Push::Join { channel, info } => {
            out.extend_from_slice(b"{\"join\":{");
            write_member(out, channel, info);
        }
        Push::Leave { channel, info } => {
            out.extend_from_slice(b"{\"leave\":{");
            write_member(out, channel, info);
        }
        Push::Unsubscribed {
            channel,
            code,
            reason,
        } => {
            out.extend_from_slice(b"{\"unsub\":{\"channel\":");
            write_str(out, channel);
            out.extend_from_slice(b",\"code\":");
            write_u64(out, u64::from(*code));
            out.extend_from_slice(b",\"reason\":");
            write_str(out, reason);
        }
        Push::Disconnect { code, reason } => {
            out.extend_from_slice(b"{\"disconnect\":{\"code\":");
            write_u64(out, u64::from(*code));
            out.extend_from_slice(b",\"reason\":");
            write_str(out, reason);
        }
        Push::LobbyUpdate {
            path,
            seq,
            tables,
            removed,
        } => {
            out.extend_from_slice(b"{\"lobby_update\":{\"path\":");
            write_str(out, path);
            out.extend_from_slice(b",\"seq\":");
            write_u64(out, *seq);
            out.extend_from_slice(b",\"tables\":");
            write_tables(out, tables);
            out.extend_from_slice(b",\"removed\":[");
            for (i, id) in removed.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                write_u64(out, *id);
            }
            out.put_u8(b']');
        }
        Push::Game { table, data } => {
            out.reserve(32 + base64_len(data.len()));
            out.extend_from_slice(b"{\"game\":{\"table\":");
            write_u64(out, *table);
            out.put_u8(b',');
            write_data(out, data);
        }
        Push::Seat {
            table,
            seat,
            user,
            status,
        } => {
            out.extend_from_slice(b"{\"seat\":{\"table\":");
            write_u64(out, *table);
            out.extend_from_slice(b",\"seat\":");
            write_u64(out, u64::from(*seat));
            out.extend_from_slice(b",\"user\":");
            write_str(out, user);
            out.extend_from_slice(b",\"status\":\"");
            out.extend_from_slice(status.as_str().as_bytes());
            out.put_u8(b'"');
        }
        Push::Unseat {
            table,
            code,
            reason,
        } => {
            out.extend_from_slice(b"{\"unseat\":{\"table\":");
            write_u64(out, *table);
            out.extend_from_slice(b",\"code\":");
            write_u64(out, u64::from(*code));
            out.extend_from_slice(b",\"reason\":");
            write_str(out, reason);
        }
        Push::LobbyPage { path, tables } => {
            out.extend_from_slice(b"{\"lobby_page\":{\"path\":");
            write_str(out, path);
            out.extend_from_slice(b",\"tables\":");
            write_tables(out, tables);
        }
    }
}

/// `{` and, unless it is 0, `"id":N,`.
fn open(out: &mut BytesMut, id: u32) {
    out.put_u8(b'{');
    if id != 0 {
        out.extend_from_slice(b"\"id\":");
        write_u64(out, u64::from(id));
        out.put_u8(b',');
    }
}

/// Comma placement for objects whose fields are all optional.
struct Obj {
    first: bool,
}

impl Obj {
    fn new() -> Self {
        Obj { first: true }
    }

    fn key(&mut self, out: &mut BytesMut, key: &[u8]) {
        if !self.first {
            out.put_u8(b',');
        }
        self.first = false;
        out.extend_from_slice(key);
    }
}

fn write_position(out: &mut BytesMut, pos: &Position) {
    out.extend_from_slice(b"{\"epoch\":");
    write_str(out, &pos.epoch);
    out.extend_from_slice(b",\"offset\":");
    write_u64(out, pos.offset);
    out.put_u8(b'}');
}

fn write_member(out: &mut BytesMut, channel: &str, info: &ClientInfo) {
    out.extend_from_slice(b"\"channel\":");
    write_str(out, channel);
    out.extend_from_slice(b",\"client\":");
    write_str(out, &info.client);
    out.extend_from_slice(b",\"user\":");
    write_str(out, &info.user);
    write_info(out, &info.info);
}

/// `,"info":<json>` when there is connection info (JSON text only).
fn write_info(out: &mut BytesMut, info: &[u8]) {
    if !info.is_empty() && is_json(info) {
        out.extend_from_slice(b",\"info\":");
        out.extend_from_slice(info);
    }
}

/// `"data":<json>` when the payload is JSON text, else `"b64":"..."`.
fn write_data(out: &mut BytesMut, data: &[u8]) {
    write_data_as(out, data, is_json(data));
}

/// [`write_data`] with the `is_json` check already done.
fn write_data_as(out: &mut BytesMut, data: &[u8], json: bool) {
    if json {
        out.extend_from_slice(b"\"data\":");
        out.extend_from_slice(data);
    } else {
        out.extend_from_slice(b"\"b64\":\"");
        write_base64(out, data);
        out.put_u8(b'"');
    }
}

/// `"path":"…"` unless the path is "" (lobby commands).
fn write_path(out: &mut BytesMut, path: &str) {
    if !path.is_empty() {
        out.extend_from_slice(b"\"path\":");
        write_str(out, path);
    }
}

/// A JSON array of lobby entries; `attrs` verbatim (`{}` if it is not a JSON
/// object, as in the binary encoding).
fn write_tables(out: &mut BytesMut, tables: &[TableEntry]) {
    out.put_u8(b'[');
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        write_table(out, t);
    }
    out.put_u8(b']');
}

fn write_table(out: &mut BytesMut, t: &TableEntry) {
    out.extend_from_slice(b"{\"table\":");
    write_u64(out, t.table);
    out.extend_from_slice(b",\"path\":");
    write_str(out, &t.path);
    out.extend_from_slice(b",\"seats\":");
    write_u64(out, u64::from(t.seats));
    out.extend_from_slice(b",\"players\":");
    write_u64(out, u64::from(t.players));
    out.extend_from_slice(b",\"watchers\":");
    write_u64(out, u64::from(t.watchers));
    out.extend_from_slice(b",\"attrs\":");
    out.extend_from_slice(attrs_or_empty(&t.attrs));
    out.put_u8(b'}');
}

/// One lobby entry as an element of a JSON `tables` array: what a lobby
/// that serves many pages of the same entries encodes once per change
/// (checking its `attrs` once) and then only copies, with
/// [`lobby_reply_from`] and [`lobby_page_from`].
pub fn table_json(t: &TableEntry) -> Bytes {
    let mut out = BytesMut::with_capacity(96 + t.path.len() + t.attrs.len());
    write_table(&mut out, t);
    out.freeze()
}

fn write_encoded_tables(out: &mut BytesMut, tables: &[Bytes]) {
    out.put_u8(b'[');
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.extend_from_slice(t);
    }
    out.put_u8(b']');
}

fn encoded_len(tables: &[Bytes]) -> usize {
    tables.iter().map(|t| t.len() + 1).sum::<usize>() + 2
}

/// The JSON of `Reply::Lobby { seq, tables }` to command `id`, byte for
/// byte what [`encode_server`] writes, from entries made by [`table_json`].
pub fn lobby_reply_from(id: u32, seq: u64, tables: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(48 + encoded_len(tables));
    open(&mut out, id);
    out.extend_from_slice(b"\"lobby\":{\"seq\":");
    write_u64(&mut out, seq);
    out.extend_from_slice(b",\"tables\":");
    write_encoded_tables(&mut out, tables);
    out.extend_from_slice(b"}}");
    out.freeze()
}

/// The JSON of `Push::LobbyPage { path, tables }`, byte for byte what
/// [`encode_server`] writes, from entries made by [`table_json`].
pub fn lobby_page_from(path: &str, tables: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(48 + path.len() + encoded_len(tables));
    out.extend_from_slice(b"{\"lobby_page\":{\"path\":");
    write_str(&mut out, path);
    out.extend_from_slice(b",\"tables\":");
    write_encoded_tables(&mut out, tables);
    out.extend_from_slice(b"}}");
    out.freeze()
}

fn write_items(out: &mut BytesMut, items: &[HistoryItem]) {
    out.put_u8(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.extend_from_slice(b"{\"offset\":");
        write_u64(out, item.offset);
        out.put_u8(b',');
        write_data(out, &item.data);
        out.put_u8(b'}');
    }
    out.put_u8(b']');
}
