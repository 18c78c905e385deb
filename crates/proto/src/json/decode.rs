//! Decoding JSON messages, in one pass of serde_json over the input.
//!
//! Why not `#[derive(Deserialize)]` on the message types: the id must be found
//! wherever it appears and attached to every later error, unknown keys must be
//! skipped but the first one named, and payloads must stay raw text borrowed
//! from the input. So the top level and the operation body are read by hand
//! into borrowed [`RawValue`]s per key, and fields are interpreted afterwards.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::jsontext::{nests_within_limit, read_base64};
use crate::{
    is_json_object, ClientInfo, Command, DecodeError, HistoryItem, Position, Push, Reply, Request,
    SeatStatus, ServerMsg, TableEntry,
};

/// Decodes one client command from a JSON object. Publication data is copied
/// out of `buf`; see [`decode_request_bytes`] for the zero-copy variant.
pub fn decode_request(buf: &[u8]) -> Result<Request, DecodeError> {
    decode_request_in(buf, Src { owner: None })
}

/// Like [`decode_request`], but publication data is a zero-copy slice of
/// `buf` (when it was sent as `data`, not `b64`).
pub fn decode_request_bytes(buf: &Bytes) -> Result<Request, DecodeError> {
    decode_request_in(buf, Src { owner: Some(buf) })
}

/// Decodes one server message from a JSON object. Payloads are copied out of
/// `buf`; see [`decode_server_bytes`] for the zero-copy variant.
pub fn decode_server(buf: &[u8]) -> Result<ServerMsg, DecodeError> {
    decode_server_in(buf, Src { owner: None })
}

/// Like [`decode_server`], but payloads are zero-copy slices of `buf`.
pub fn decode_server_bytes(buf: &Bytes) -> Result<ServerMsg, DecodeError> {
    decode_server_in(buf, Src { owner: Some(buf) })
}

const REQUEST_OPS: &[&str] = &[
    "connect",
    "subscribe",
    "unsubscribe",
    "publish",
    "ping",
    "history",
    "presence",
    "presence_stats",
    "lobby",
    "lobby_off",
    "sit",
    "watch",
    "stand",
    "act",
    "play",
];

const SERVER_OPS: &[&str] = &[
    "connect",
    "subscribe",
    "unsubscribe",
    "publish",
    "ping",
    "history",
    "presence",
    "presence_stats",
    "error",
    "pub",
    "join",
    "leave",
    "unsub",
    "disconnect",
    "lobby",
    "lobby_off",
    "sit",
    "watch",
    "stand",
    "act",
    "play",
    "lobby_update",
    "lobby_page",
    "game",
    "seat",
    "unseat",
];

fn decode_request_in(buf: &[u8], src: Src<'_>) -> Result<Request, DecodeError> {
    decode_request_hinted_in(buf, src).map(|(req, _)| req)
}

/// Like [`decode_request`], and also tells whether the command's publication
/// data is JSON text: sent as `data`, so serde_json has already checked it and
/// it is exactly what a JSON push may embed verbatim (a publish sent as `b64`,
/// or any other command, gives `false`). The server passes this on so that
/// the JSON push of a JSON publisher's data does not check it a second time
/// (decision 0011).
pub fn decode_request_hinted(buf: &[u8]) -> Result<(Request, bool), DecodeError> {
    decode_request_hinted_in(buf, Src { owner: None })
}

fn decode_request_hinted_in(buf: &[u8], src: Src<'_>) -> Result<(Request, bool), DecodeError> {
    let (id, op, body) = parse_top(buf, REQUEST_OPS)?;
    let mut json_data = false;
    let cmd = command(op, body, src, &mut json_data).map_err(|e| with_id(id, e))?;
    Ok((Request { id, cmd }, json_data))
}

fn decode_server_in(buf: &[u8], src: Src<'_>) -> Result<ServerMsg, DecodeError> {
    let (id, op, body) = parse_top(buf, SERVER_OPS)?;
    server_msg(id, op, body, src).map_err(|e| with_id(id, e))
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

fn invalid(field: &'static str, reason: &str) -> DecodeError {
    DecodeError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Where decoded payloads come from: copied out of a borrowed slice, or sliced
/// without copying out of a shared `Bytes`.
#[derive(Clone, Copy)]
struct Src<'a> {
    owner: Option<&'a Bytes>,
}

impl Src<'_> {
    fn bytes(self, part: &[u8]) -> Bytes {
        if let Some(owner) = self.owner {
            let base = owner.as_ptr() as usize;
            let p = part.as_ptr() as usize;
            // Always true for text borrowed from the input; checked so that a
            // slip can never turn into `slice_ref`'s panic.
            if p >= base && p + part.len() <= base + owner.len() {
                return owner.slice_ref(part);
            }
        }
        Bytes::copy_from_slice(part)
    }
}

/// The top level of a message: the id and the one operation key, as raw text.
#[derive(Default)]
struct Top<'a> {
    id: Option<&'a RawValue>,
    op: Option<(&'static str, Body<'a>)>,
    more_ops: bool,
    first_unknown: Option<Cow<'a, str>>,
}

/// An object key, borrowed unless it contained escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct TopVisitor {
    ops: &'static [&'static str],
}

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut top = Top::default();
        while let Some(Key(k)) = map.next_key()? {
            if k == "id" {
                if top.id.is_some() {
                    return Err(de::Error::custom("duplicate key \"id\""));
                }
                let id: &RawValue = map.next_value()?;
                if id.get() != "null" {
                    top.id = Some(id);
                }
            } else if let Some(op) = self.ops.iter().find(|op| **op == k) {
                if top.op.is_some() {
                    map.next_value::<IgnoredAny>()?;
                    top.more_ops = true;
                } else {
                    top.op = Some((op, map.next_value_seed(BodySeed)?));
                }
            } else {
                map.next_value::<IgnoredAny>()?;
                if top.first_unknown.is_none() {
                    top.first_unknown = Some(k);
                }
            }
        }
        Ok(top)
    }
}

/// Splits a message into its id, operation name and operation body.
fn parse_top<'a>(
    buf: &'a [u8],
    ops: &'static [&'static str],
) -> Result<(u32, &'static str, Body<'a>), DecodeError> {
    let malformed = |e: serde_json::Error| DecodeError::Malformed(e.to_string());
    let mut de = serde_json::Deserializer::from_slice(buf);
    let top = de.deserialize_map(TopVisitor { ops }).map_err(malformed)?;
    de.end().map_err(malformed)?;
    let id = match top.id {
        Some(raw) => u32_(raw, "id")?,
        None => 0,
    };
    if top.more_ops {
        return Err(with_id(
            id,
            DecodeError::Malformed("more than one operation key".into()),
        ));
    }
    match (top.op, top.first_unknown) {
        (Some((op, body)), _) => Ok((id, op, body)),
        (None, Some(name)) => Err(with_id(id, DecodeError::Unknown(name.into_owned()))),
        (None, None) => Err(with_id(
            id,
            DecodeError::Malformed("no operation key".into()),
        )),
    }
}

/// An operation body, read in the same pass as the top level (so the message
/// is scanned once): its fields if it is an object. Anything else is kept as
/// `NotObject`, to be reported with the id once the whole message is read.
// Lives on the stack for one decode; boxing `Fields` would cost an allocation
// per message.
#[allow(clippy::large_enum_variant)]
enum Body<'a> {
    Object(Fields<'a>),
    NotObject,
}

impl<'a> Body<'a> {
    fn fields(self, op: &str) -> Result<Fields<'a>, DecodeError> {
        match self {
            Body::Object(f) => check_duplicates(f),
            Body::NotObject => Err(invalid(op_field(op), "expected an object")),
        }
    }
}

struct BodySeed;

impl<'de> de::DeserializeSeed<'de> for BodySeed {
    type Value = Body<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Body<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BodySeed {
    type Value = Body<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Body<'de>, A::Error> {
        FieldsVisitor.visit_map(map).map(Body::Object)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Body<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Body::NotObject)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Body<'de>, E> {
        Ok(Body::NotObject)
    }
}

/// Every field any operation body can have, as raw text; each operation reads
/// the ones it knows and ignores the rest. `null` reads as absent, except for
/// `data`, where `null` is a payload like any other. A repeated key is noted
/// (and reported as malformed, with the id) rather than failing the parse.
#[derive(Default)]
struct Fields<'a> {
    token: Option<&'a RawValue>,
    name: Option<&'a RawValue>,
    channel: Option<&'a RawValue>,
    recover: Option<&'a RawValue>,
    join_leave: Option<&'a RawValue>,
    data: Option<&'a RawValue>,
    b64: Option<&'a RawValue>,
    since: Option<&'a RawValue>,
    limit: Option<&'a RawValue>,
    epoch: Option<&'a RawValue>,
    offset: Option<&'a RawValue>,
    recovered: Option<&'a RawValue>,
    publications: Option<&'a RawValue>,
    client: Option<&'a RawValue>,
    version: Option<&'a RawValue>,
    ping_interval: Option<&'a RawValue>,
    clients: Option<&'a RawValue>,
    info: Option<&'a RawValue>,
    users: Option<&'a RawValue>,
    user: Option<&'a RawValue>,
    code: Option<&'a RawValue>,
    message: Option<&'a RawValue>,
    reason: Option<&'a RawValue>,
    path: Option<&'a RawValue>,
    table: Option<&'a RawValue>,
    seat: Option<&'a RawValue>,
    seq: Option<&'a RawValue>,
    tables: Option<&'a RawValue>,
    removed: Option<&'a RawValue>,
    seats: Option<&'a RawValue>,
    players: Option<&'a RawValue>,
    watchers: Option<&'a RawValue>,
    attrs: Option<&'a RawValue>,
    status: Option<&'a RawValue>,
    game: Option<&'a RawValue>,
    private: Option<&'a RawValue>,
    created: Option<&'a RawValue>,
    duplicate: bool,
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut f = Fields::default();
        while let Some(Key(k)) = map.next_key()? {
            let slot = match &*k {
                "token" => &mut f.token,
                "name" => &mut f.name,
                "channel" => &mut f.channel,
                "recover" => &mut f.recover,
                "join_leave" => &mut f.join_leave,
                "data" => &mut f.data,
                "b64" => &mut f.b64,
                "since" => &mut f.since,
                "limit" => &mut f.limit,
                "epoch" => &mut f.epoch,
                "offset" => &mut f.offset,
                "recovered" => &mut f.recovered,
                "publications" => &mut f.publications,
                "client" => &mut f.client,
                "version" => &mut f.version,
                "ping_interval" => &mut f.ping_interval,
                "clients" => &mut f.clients,
                "info" => &mut f.info,
                "users" => &mut f.users,
                "user" => &mut f.user,
                "code" => &mut f.code,
                "message" => &mut f.message,
                "reason" => &mut f.reason,
                "path" => &mut f.path,
                "table" => &mut f.table,
                "seat" => &mut f.seat,
                "seq" => &mut f.seq,
                "tables" => &mut f.tables,
                "removed" => &mut f.removed,
                "seats" => &mut f.seats,
                "players" => &mut f.players,
                "watchers" => &mut f.watchers,
                "attrs" => &mut f.attrs,
                "status" => &mut f.status,
                "game" => &mut f.game,
                "private" => &mut f.private,
                "created" => &mut f.created,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let value: &RawValue = map.next_value()?;
            if value.get() == "null" && k != "data" {
                continue;
            }
            if slot.is_some() {
                f.duplicate = true;
            } else {
                *slot = Some(value);
            }
        }
        Ok(f)
    }
}

/// Rejects bodies that repeated a key.
fn check_duplicates(f: Fields<'_>) -> Result<Fields<'_>, DecodeError> {
    if f.duplicate {
        Err(DecodeError::Malformed("duplicate key".into()))
    } else {
        Ok(f)
    }
}

/// Reads a nested object (or list item) named `field`.
fn fields<'a>(raw: &'a RawValue, field: &'static str) -> Result<Fields<'a>, DecodeError> {
    if !raw.get().starts_with('{') {
        return Err(invalid(field, "expected an object"));
    }
    // The text was validated as JSON already; an error here is unexpected.
    let f = serde_json::from_str(raw.get()).map_err(|e| invalid(field, &e.to_string()))?;
    check_duplicates(f)
}

/// Reads an array of objects named `field`.
fn list<'a>(raw: &'a RawValue, field: &'static str) -> Result<Vec<Fields<'a>>, DecodeError> {
    let raws: Vec<&RawValue> =
        serde_json::from_str(raw.get()).map_err(|_| invalid(field, "expected an array"))?;
    raws.into_iter().map(|r| fields(r, field)).collect()
}

fn req<'a>(v: Option<&'a RawValue>, field: &'static str) -> Result<&'a RawValue, DecodeError> {
    v.ok_or_else(|| invalid(field, "missing"))
}

// The field readers below see text serde_json has already validated as one
// JSON value, which is what makes their shortcuts sound: a value that starts
// and ends with `"` and has no backslash is a string without escapes; a value
// of only digits is a non-negative integer without leading zeros.

fn string(raw: &RawValue, field: &'static str) -> Result<String, DecodeError> {
    let text = raw.get();
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        if !inner.contains('\\') {
            return Ok(inner.to_owned());
        }
    }
    serde_json::from_str(text).map_err(|_| invalid(field, "expected a string"))
}

fn opt_string(raw: Option<&RawValue>, field: &'static str) -> Result<Option<String>, DecodeError> {
    raw.map(|r| string(r, field)).transpose()
}

/// An unsigned integer that fits `T`; anything else (negative, fractional,
/// exponent, too large, not a number) is reported with `range`.
fn uint<T: std::str::FromStr>(
    raw: &RawValue,
    field: &'static str,
    range: &str,
) -> Result<T, DecodeError> {
    let text = raw.get();
    if text.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(v) = text.parse() {
            return Ok(v);
        }
    }
    Err(invalid(field, range))
}

fn u64_(raw: &RawValue, field: &'static str) -> Result<u64, DecodeError> {
    uint(
        raw,
        field,
        "expected an integer in 0..=18446744073709551615",
    )
}

fn u32_(raw: &RawValue, field: &'static str) -> Result<u32, DecodeError> {
    uint(raw, field, "expected an integer in 0..=4294967295")
}

fn u16_(raw: &RawValue, field: &'static str) -> Result<u16, DecodeError> {
    uint(raw, field, "expected an integer in 0..=65535")
}

fn opt_bool(raw: Option<&RawValue>, field: &'static str) -> Result<bool, DecodeError> {
    match raw.map(RawValue::get) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(invalid(field, "expected a boolean")),
    }
}

fn position(raw: &RawValue, field: &'static str) -> Result<Position, DecodeError> {
    let f = fields(raw, field)?;
    Ok(Position {
        epoch: string(req(f.epoch, "epoch")?, "epoch")?,
        offset: u64_(req(f.offset, "offset")?, "offset")?,
    })
}

fn opt_position(
    raw: Option<&RawValue>,
    field: &'static str,
) -> Result<Option<Position>, DecodeError> {
    raw.map(|r| position(r, field)).transpose()
}

/// A payload: `data` (any JSON value, kept as its text) or `b64`.
fn data(f: &Fields<'_>, src: Src<'_>) -> Result<Bytes, DecodeError> {
    match (f.data, f.b64) {
        (Some(raw), None) => Ok(src.bytes(raw.get().as_bytes())),
        (None, Some(raw)) => {
            let text = string(raw, "b64")?;
            read_base64(&text)
                .map(Bytes::from)
                .map_err(|_| invalid("b64", "expected standard padded base64"))
        }
        (None, None) => Err(invalid("data", "missing")),
        (Some(_), Some(_)) => Err(invalid("data", "both data and b64 given")),
    }
}

fn channel(f: &Fields<'_>) -> Result<String, DecodeError> {
    string(req(f.channel, "channel")?, "channel")
}

fn table(f: &Fields<'_>) -> Result<u64, DecodeError> {
    u64_(req(f.table, "table")?, "table")
}

/// A lobby command's path: absent means "" (the whole lobby).
fn path(f: &Fields<'_>) -> Result<String, DecodeError> {
    Ok(opt_string(f.path, "path")?.unwrap_or_default())
}

/// A payload that may be left out (absent = empty), as in `sit`.
fn opt_data(f: &Fields<'_>, src: Src<'_>) -> Result<Bytes, DecodeError> {
    if f.data.is_none() && f.b64.is_none() {
        Ok(Bytes::new())
    } else {
        data(f, src)
    }
}

/// A list of lobby entries; each `attrs` must be a JSON object, kept as its
/// exact text.
fn tables(raw: &RawValue, src: Src<'_>) -> Result<Vec<TableEntry>, DecodeError> {
    list(raw, "tables")?
        .iter()
        .map(|f| {
            let attrs = req(f.attrs, "attrs")?.get().as_bytes();
            if !is_json_object(attrs) {
                return Err(invalid("attrs", "expected a JSON object"));
            }
            Ok(TableEntry {
                table: table(f)?,
                path: string(req(f.path, "path")?, "path")?,
                seats: u32_(req(f.seats, "seats")?, "seats")?,
                players: u32_(req(f.players, "players")?, "players")?,
                watchers: u32_(req(f.watchers, "watchers")?, "watchers")?,
                attrs: src.bytes(attrs),
            })
        })
        .collect()
}

/// The ids of removed tables: an array of integers.
fn removed(raw: &RawValue) -> Result<Vec<u64>, DecodeError> {
    let raws: Vec<&RawValue> =
        serde_json::from_str(raw.get()).map_err(|_| invalid("removed", "expected an array"))?;
    raws.into_iter().map(|r| u64_(r, "removed")).collect()
}

/// `json_data` is set when a publish's data was sent as JSON text (`data`).
fn command<'a>(
    op: &str,
    body: Body<'a>,
    src: Src<'a>,
    json_data: &mut bool,
) -> Result<Command, DecodeError> {
    let f = body.fields(op)?;
    Ok(match op {
        "connect" => Command::Connect {
            token: opt_string(f.token, "token")?,
            name: opt_string(f.name, "name")?,
        },
        "subscribe" => Command::Subscribe {
            channel: channel(&f)?,
            recover: opt_position(f.recover, "recover")?,
            join_leave: opt_bool(f.join_leave, "join_leave")?,
            token: opt_string(f.token, "token")?,
        },
        "unsubscribe" => Command::Unsubscribe {
            channel: channel(&f)?,
        },
        "publish" => {
            let cmd = Command::Publish {
                channel: channel(&f)?,
                data: data(&f, src)?,
            };
            // `data` succeeded, so exactly one of `data` and `b64` was given;
            // serde_json checked `data`'s text except for its depth.
            *json_data = f
                .data
                .is_some_and(|raw| nests_within_limit(raw.get().as_bytes()));
            cmd
        }
        "ping" => Command::Ping,
        "history" => Command::History {
            channel: channel(&f)?,
            since: opt_position(f.since, "since")?,
            limit: match f.limit {
                Some(raw) => u32_(raw, "limit")?,
                None => 0,
            },
        },
        "presence" => Command::Presence {
            channel: channel(&f)?,
        },
        "presence_stats" => Command::PresenceStats {
            channel: channel(&f)?,
        },
        "lobby" => Command::Lobby { path: path(&f)? },
        "lobby_off" => Command::LobbyOff { path: path(&f)? },
        "sit" => Command::Sit {
            table: table(&f)?,
            seat: f.seat.map(|raw| u32_(raw, "seat")).transpose()?,
            data: opt_data(&f, src)?,
        },
        "watch" => Command::Watch { table: table(&f)? },
        "stand" => Command::Stand { table: table(&f)? },
        "act" => Command::Act {
            table: table(&f)?,
            data: data(&f, src)?,
        },
        "play" => Command::Play {
            game: opt_string(f.game, "game")?.unwrap_or_default(),
            seats: f.seats.map(|raw| u32_(raw, "seats")).transpose()?,
            attrs: match f.attrs {
                Some(raw) if is_json_object(raw.get().as_bytes()) => {
                    src.bytes(raw.get().as_bytes())
                }
                Some(_) => return Err(invalid("attrs", "expected a JSON object")),
                None => Bytes::from_static(b"{}"),
            },
            private: opt_bool(f.private, "private")?,
            code: opt_string(f.code, "code")?,
            data: opt_data(&f, src)?,
        },
        other => return Err(DecodeError::Unknown(other.into())),
    })
}

/// The operation names as `&'static str` field names for error reports.
fn op_field(op: &str) -> &'static str {
    SERVER_OPS
        .iter()
        .find(|o| **o == op)
        .copied()
        .unwrap_or("operation")
}

fn items(raw: Option<&RawValue>, src: Src<'_>) -> Result<Vec<HistoryItem>, DecodeError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    list(raw, "publications")?
        .iter()
        .map(|f| {
            Ok(HistoryItem {
                offset: u64_(req(f.offset, "offset")?, "offset")?,
                data: data(f, src)?,
            })
        })
        .collect()
}

fn client_info(f: &Fields<'_>, src: Src<'_>) -> Result<ClientInfo, DecodeError> {
    Ok(ClientInfo {
        client: string(req(f.client, "client")?, "client")?,
        user: string(req(f.user, "user")?, "user")?,
        // Any JSON value (`null` counts as absent).
        info: f
            .info
            .map_or_else(Bytes::new, |raw| src.bytes(raw.get().as_bytes())),
    })
}

fn server_msg<'a>(
    id: u32,
    op: &str,
    body: Body<'a>,
    src: Src<'a>,
) -> Result<ServerMsg, DecodeError> {
    let f = body.fields(op)?;
    let reply = |reply| Ok(ServerMsg::Reply { id, reply });
    match op {
        "connect" => reply(Reply::Connect {
            client: string(req(f.client, "client")?, "client")?,
            version: string(req(f.version, "version")?, "version")?,
            ping_interval: u32_(req(f.ping_interval, "ping_interval")?, "ping_interval")?,
        }),
        "subscribe" => reply(Reply::Subscribe {
            epoch: string(req(f.epoch, "epoch")?, "epoch")?,
            offset: u64_(req(f.offset, "offset")?, "offset")?,
            recovered: opt_bool(f.recovered, "recovered")?,
            publications: items(f.publications, src)?,
        }),
        "unsubscribe" => reply(Reply::Unsubscribe),
        "publish" => reply(Reply::Publish {
            epoch: string(req(f.epoch, "epoch")?, "epoch")?,
            offset: u64_(req(f.offset, "offset")?, "offset")?,
        }),
        "ping" => reply(Reply::Ping),
        "history" => reply(Reply::History {
            epoch: string(req(f.epoch, "epoch")?, "epoch")?,
            offset: u64_(req(f.offset, "offset")?, "offset")?,
            publications: items(Some(req(f.publications, "publications")?), src)?,
        }),
        "presence" => {
            let raw = req(f.clients, "clients")?;
            let clients = list(raw, "clients")?
                .iter()
                .map(|f| client_info(f, src))
                .collect::<Result<_, _>>()?;
            reply(Reply::Presence { clients })
        }
        "presence_stats" => reply(Reply::PresenceStats {
            clients: u64_(req(f.clients, "clients")?, "clients")?,
            users: u64_(req(f.users, "users")?, "users")?,
        }),
        "error" => Ok(ServerMsg::Error {
            id,
            code: u16_(req(f.code, "code")?, "code")?,
            message: string(req(f.message, "message")?, "message")?,
        }),
        "pub" => Ok(ServerMsg::Push(Push::Publication {
            channel: channel(&f)?,
            offset: u64_(req(f.offset, "offset")?, "offset")?,
            data: data(&f, src)?,
        })),
        "join" => Ok(ServerMsg::Push(Push::Join {
            channel: channel(&f)?,
            info: client_info(&f, src)?,
        })),
        "leave" => Ok(ServerMsg::Push(Push::Leave {
            channel: channel(&f)?,
            info: client_info(&f, src)?,
        })),
        "unsub" => Ok(ServerMsg::Push(Push::Unsubscribed {
            channel: channel(&f)?,
            code: u16_(req(f.code, "code")?, "code")?,
            reason: string(req(f.reason, "reason")?, "reason")?,
        })),
        "disconnect" => Ok(ServerMsg::Push(Push::Disconnect {
            code: u16_(req(f.code, "code")?, "code")?,
            reason: string(req(f.reason, "reason")?, "reason")?,
        })),
        "lobby" => reply(Reply::Lobby {
            seq: u64_(req(f.seq, "seq")?, "seq")?,
            tables: tables(req(f.tables, "tables")?, src)?,
        }),
        "lobby_off" => reply(Reply::LobbyOff),
        "sit" => reply(Reply::Sit {
            seat: u32_(req(f.seat, "seat")?, "seat")?,
            data: data(&f, src)?,
        }),
        "watch" => reply(Reply::Watch {
            data: data(&f, src)?,
        }),
        "stand" => reply(Reply::Stand),
        "act" => reply(Reply::Act),
        "play" => reply(Reply::Play {
            table: table(&f)?,
            seat: u32_(req(f.seat, "seat")?, "seat")?,
            code: opt_string(f.code, "code")?,
            created: opt_bool(f.created, "created")?,
            data: data(&f, src)?,
        }),
        "lobby_update" => Ok(ServerMsg::Push(Push::LobbyUpdate {
            path: string(req(f.path, "path")?, "path")?,
            seq: u64_(req(f.seq, "seq")?, "seq")?,
            tables: tables(req(f.tables, "tables")?, src)?,
            removed: removed(req(f.removed, "removed")?)?,
        })),
        "game" => Ok(ServerMsg::Push(Push::Game {
            table: table(&f)?,
            data: data(&f, src)?,
        })),
        "seat" => Ok(ServerMsg::Push(Push::Seat {
            table: table(&f)?,
            seat: u32_(req(f.seat, "seat")?, "seat")?,
            user: string(req(f.user, "user")?, "user")?,
            status: SeatStatus::from_name(&string(req(f.status, "status")?, "status")?)
                .ok_or_else(|| invalid("status", "expected sat, left, away or back"))?,
        })),
        "unseat" => Ok(ServerMsg::Push(Push::Unseat {
            table: table(&f)?,
            code: u16_(req(f.code, "code")?, "code")?,
            reason: string(req(f.reason, "reason")?, "reason")?,
        })),
        "lobby_page" => Ok(ServerMsg::Push(Push::LobbyPage {
            path: string(req(f.path, "path")?, "path")?,
            tables: tables(req(f.tables, "tables")?, src)?,
        })),
        other => Err(DecodeError::Unknown(other.into())),
    }
}
