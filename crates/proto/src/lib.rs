//! Herald's wire protocol, with no I/O.
//!
//! One protocol, two encodings: JSON (WebSocket text frames, SSE, long-poll
//! bodies) and a compact binary encoding (WebSocket binary frames, length-prefixed
//! frames on the raw TCP transport). Both encode the same message model defined
//! here, so the server's session logic never knows which one a client speaks.
//!
//! Codecs take a complete message (the transport has already found the frame
//! boundaries) and return a typed value or a [`DecodeError`]; encoders append to
//! a `BytesMut`. The server encodes a publication once per encoding and shares the
//! resulting `Bytes` with every subscriber. The normative description, with test
//! vectors, is `docs/protocol.md` and `spec/vectors/`.

pub mod binary;
pub mod codes;
pub mod framing;
pub mod fuzzing;
pub mod json;
mod jsontext;
pub mod shootout;

use bytes::{Bytes, BytesMut};

pub use codes::{DisconnectCode, ErrorCode};

/// Which of the two encodings a connection speaks. Chosen once per connection
/// (WebSocket subprotocol `herald.json` / `herald.binary`; the raw TCP transport is
/// always binary; SSE and long-polling are always JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// JSON objects, one per frame.
    Json,
    /// The compact binary encoding of `docs/protocol.md`.
    Binary,
}

impl Encoding {
    /// The WebSocket subprotocol token that selects this encoding.
    pub const fn subprotocol(self) -> &'static str {
        match self {
            Encoding::Json => "herald.json",
            Encoding::Binary => "herald.binary",
        }
    }

    /// Decodes one client command.
    pub fn decode_request(self, buf: &[u8]) -> Result<Request, DecodeError> {
        match self {
            Encoding::Json => json::decode_request(buf),
            Encoding::Binary => binary::decode_request(buf),
        }
    }

    /// Decodes one client command from a shared buffer: publication data is a
    /// zero-copy slice of `buf` (in JSON, when sent as `data` rather than `b64`).
    pub fn decode_request_bytes(self, buf: &Bytes) -> Result<Request, DecodeError> {
        match self {
            Encoding::Json => json::decode_request_bytes(buf),
            Encoding::Binary => binary::decode_request_bytes(buf),
        }
    }

    /// Encodes one client command (used by the bench and by tests).
    pub fn encode_request(self, req: &Request, out: &mut BytesMut) {
        match self {
            Encoding::Json => json::encode_request(req, out),
            Encoding::Binary => binary::encode_request(req, out),
        }
    }

    /// Decodes one server message (used by the bench and by tests).
    pub fn decode_server(self, buf: &[u8]) -> Result<ServerMsg, DecodeError> {
        match self {
            Encoding::Json => json::decode_server(buf),
            Encoding::Binary => binary::decode_server(buf),
        }
    }

    /// Decodes one server message from a shared buffer, payloads as zero-copy
    /// slices of `buf` (used by the bench and by tests).
    pub fn decode_server_bytes(self, buf: &Bytes) -> Result<ServerMsg, DecodeError> {
        match self {
            Encoding::Json => json::decode_server_bytes(buf),
            Encoding::Binary => binary::decode_server_bytes(buf),
        }
    }

    /// Encodes one server message.
    pub fn encode_server(self, msg: &ServerMsg, out: &mut BytesMut) {
        match self {
            Encoding::Json => json::encode_server(msg, out),
            Encoding::Binary => binary::encode_server(msg, out),
        }
    }

    /// Encodes one server message into fresh, shareable bytes.
    ///
    /// A publication push allocates exactly once (its encoder reserves the
    /// whole message); other messages start from a small buffer.
    pub fn encode_server_bytes(self, msg: &ServerMsg) -> Bytes {
        let capacity = match msg {
            ServerMsg::Push(Push::Publication { .. }) => 0,
            _ => 64,
        };
        let mut out = BytesMut::with_capacity(capacity);
        self.encode_server(msg, &mut out);
        out.freeze()
    }
}

/// A client command together with the id its reply will carry.
///
/// `id == 0` means "no reply wanted on success" (fire-and-forget publish); errors
/// are still reported, with id 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client; echoed in the reply.
    pub id: u32,
    /// What the client asks for.
    pub cmd: Command,
}

/// A position in a channel's stream: the epoch names one unbroken history, the
/// offset counts publications within it (the first publication has offset 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Position {
    /// Changes whenever history may have been lost (e.g. a restart of the
    /// in-memory broker); offsets from another epoch are meaningless.
    pub epoch: String,
    /// The offset of the last publication seen.
    pub offset: u64,
}

/// Client → server commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// First command on a connection: authenticates and names the client.
    Connect {
        /// A connection token (JWT); checked once auth is configured.
        token: Option<String>,
        /// A free-form client name, for logs and presence.
        name: Option<String>,
    },
    /// Start receiving publications of a channel (or a wildcard pattern).
    Subscribe {
        /// Channel name or pattern.
        channel: String,
        /// Resume after this position: the reply carries what was missed.
        recover: Option<Position>,
        /// Also receive join/leave pushes for this channel.
        join_leave: bool,
        /// A subscribe token (JWT) granting this channel, for channels whose
        /// namespace requires a grant (private channels).
        token: Option<String>,
    },
    /// Stop receiving publications of a channel.
    Unsubscribe {
        /// Channel name or pattern, as subscribed.
        channel: String,
    },
    /// Publish data to a channel.
    Publish {
        /// Target channel (no wildcards).
        channel: String,
        /// Opaque payload. In JSON it is any JSON value, kept as its text.
        data: Bytes,
    },
    /// Keep-alive and latency probe; the reply is an empty ping.
    Ping,
    /// Read a channel's retained history.
    History {
        /// Channel name.
        channel: String,
        /// Only publications after this position.
        since: Option<Position>,
        /// At most this many publications (0 = server default).
        limit: u32,
    },
    /// Who is subscribed to a channel.
    Presence {
        /// Channel name.
        channel: String,
    },
    /// How many are subscribed to a channel: cheap on any channel size.
    PresenceStats {
        /// Channel name.
        channel: String,
    },
    /// Subscribe to the game lobby: a snapshot now, `lobby_update` pushes
    /// after (docs/protocol.md §5e).
    Lobby {
        /// "" for every table, or a branch such as `holdem/10-seat`: tables
        /// whose path equals it or starts with it followed by `/`.
        path: String,
    },
    /// Stop the lobby subscription made with the same path.
    LobbyOff {
        /// The path given to `lobby`.
        path: String,
    },
    /// Take a seat at a table (or take one's seat back after a reconnect).
    Sit {
        /// The table id (below 2^53, like offsets).
        table: u64,
        /// The seat wanted; `None` = any free seat.
        seat: Option<u32>,
        /// Opaque data for the game (e.g. a buy-in); may be empty.
        data: Bytes,
    },
    /// Watch a table without a seat: its public game data.
    Watch {
        /// The table id.
        table: u64,
    },
    /// Give up one's seat at a table, or stop watching it.
    Stand {
        /// The table id.
        table: u64,
    },
    /// A game action at a table where the client is seated; opaque to Herald.
    Act {
        /// The table id.
        table: u64,
        /// The action, as the game defines it.
        data: Bytes,
    },
    /// Seat me at a table made on demand (docs/protocol.md §5f): one of
    /// game `game` with `seats` seats and exactly these attributes that has
    /// a free seat, else a new one; or, with `private`, a new table only
    /// those given its code may join; or, with `code`, the private table of
    /// that code.
    Play {
        /// The game's name; empty when joining by `code`.
        game: String,
        /// Seats per table; `None` when joining by `code`.
        seats: Option<u32>,
        /// JSON object text of the wanted attributes (scalars only), `{}`
        /// for none; a new table is created with them as its parameters.
        attrs: Bytes,
        /// Create a private table (joined only by its code).
        private: bool,
        /// Join the private table of this code.
        code: Option<String>,
        /// Opaque data for the game, as in `sit` (e.g. a buy-in).
        data: Bytes,
    },
}

/// One table as the lobby shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// The table id (below 2^53, like offsets).
    pub table: u64,
    /// Where the table sits in the lobby tree, e.g. `holdem/10-seat/express`.
    pub path: String,
    /// Seats at the table.
    pub seats: u32,
    /// Seats taken.
    pub players: u32,
    /// Connections watching.
    pub watchers: u32,
    /// JSON object text: timing, stakes, the game's own attributes. Decoders
    /// accept only a JSON object here (kept as its exact text); encoders write
    /// `{}` in place of anything that is not JSON-object text.
    pub attrs: Bytes,
}

/// A seat change, for `seat` pushes. Binary 0..=3, JSON `"sat"`, `"left"`,
/// `"away"`, `"back"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeatStatus {
    /// Someone took the seat.
    Sat,
    /// The seat was given up (stand, grace expired, unseated).
    Left,
    /// The seated player's connection dropped; the seat is kept for the
    /// table's grace period.
    Away,
    /// The away player is back.
    Back,
}

impl SeatStatus {
    /// The binary encoding's byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            SeatStatus::Sat => 0,
            SeatStatus::Left => 1,
            SeatStatus::Away => 2,
            SeatStatus::Back => 3,
        }
    }

    /// The status for a binary byte, if it is one.
    pub const fn from_u8(b: u8) -> Option<SeatStatus> {
        Some(match b {
            0 => SeatStatus::Sat,
            1 => SeatStatus::Left,
            2 => SeatStatus::Away,
            3 => SeatStatus::Back,
            _ => return None,
        })
    }

    /// The JSON encoding's string.
    pub const fn as_str(self) -> &'static str {
        match self {
            SeatStatus::Sat => "sat",
            SeatStatus::Left => "left",
            SeatStatus::Away => "away",
            SeatStatus::Back => "back",
        }
    }

    /// The status for a JSON string, if it is one.
    pub fn from_name(s: &str) -> Option<SeatStatus> {
        Some(match s {
            "sat" => SeatStatus::Sat,
            "left" => SeatStatus::Left,
            "away" => SeatStatus::Away,
            "back" => SeatStatus::Back,
            _ => return None,
        })
    }
}

/// Whether `b` is what a [`TableEntry::attrs`] may hold: one JSON object, as
/// [`jsontext::is_json`] accepts it (no surrounding whitespace, at most 128
/// levels deep).
pub(crate) fn is_json_object(b: &[u8]) -> bool {
    b.first() == Some(&b'{') && jsontext::is_json(b)
}

/// Server → client messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// The successful answer to the command with this id.
    Reply {
        /// The command's id.
        id: u32,
        /// The command-specific result.
        reply: Reply,
    },
    /// The failed answer to the command with this id (0 if the command could
    /// not be parsed far enough to know its id).
    Error {
        /// The command's id, or 0.
        id: u32,
        /// A code from [`ErrorCode`] (numbered ranges in docs/protocol.md).
        code: u16,
        /// Human-readable detail.
        message: String,
    },
    /// Something the server sends unasked.
    Push(Push),
}

/// Command-specific success results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Answer to `connect`.
    Connect {
        /// The server-assigned client id.
        client: String,
        /// Server version.
        version: String,
        /// Seconds between server heartbeats; a client that hears nothing for
        /// about twice this should reconnect.
        ping_interval: u32,
    },
    /// Answer to `subscribe`.
    Subscribe {
        /// The channel's current epoch.
        epoch: String,
        /// The channel's current top offset.
        offset: u64,
        /// True when `recover` was asked and every missed publication is in
        /// `publications`; false when recovery was impossible.
        recovered: bool,
        /// Missed publications, oldest first (only with `recover`).
        publications: Vec<HistoryItem>,
    },
    /// Answer to `unsubscribe`.
    Unsubscribe,
    /// Answer to `publish`: where the publication landed.
    Publish {
        /// The channel's epoch.
        epoch: String,
        /// The publication's offset.
        offset: u64,
    },
    /// Answer to `ping`.
    Ping,
    /// Answer to `history`.
    History {
        /// The channel's epoch.
        epoch: String,
        /// The channel's current top offset.
        offset: u64,
        /// Retained publications, oldest first.
        publications: Vec<HistoryItem>,
    },
    /// Answer to `presence`.
    Presence {
        /// Everyone currently subscribed.
        clients: Vec<ClientInfo>,
    },
    /// Answer to `presence_stats`.
    PresenceStats {
        /// Connections subscribed to the channel.
        clients: u64,
        /// Distinct non-empty user ids among them (anonymous connections are
        /// not counted).
        users: u64,
    },
    /// Answer to `lobby`: the snapshot that `lobby_update` pushes then amend.
    Lobby {
        /// The lobby's sequence number at the snapshot; apply only updates
        /// with a higher `seq`.
        seq: u64,
        /// Every table under the subscribed path.
        tables: Vec<TableEntry>,
    },
    /// Answer to `lobby_off`.
    LobbyOff,
    /// Answer to `sit`: the seat taken and the game's private snapshot.
    Sit {
        /// The seat number.
        seat: u32,
        /// The game's private snapshot for that seat (opaque).
        data: Bytes,
    },
    /// Answer to `watch`: the game's public snapshot (opaque).
    Watch {
        /// The public snapshot.
        data: Bytes,
    },
    /// Answer to `stand`.
    Stand,
    /// Answer to `act`: the game accepted the action.
    Act,
    /// Answer to `play`: the table and seat given, and the private snapshot
    /// as `sit` answers it.
    Play {
        /// The table id.
        table: u64,
        /// The seat number.
        seat: u32,
        /// The private table's code (to hand to friends); `None` for a
        /// public table.
        code: Option<String>,
        /// Whether this `play` created the table.
        created: bool,
        /// The game's private snapshot for that seat (opaque).
        data: Bytes,
    },
}

/// One retained publication, as returned by history and recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryItem {
    /// Its offset in the channel.
    pub offset: u64,
    /// Its payload.
    pub data: Bytes,
}

/// Who a connection is, for presence and join/leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// Server-assigned client id.
    pub client: String,
    /// User id from the token ("" for anonymous).
    pub user: String,
    /// Connection info: the `info` claim of the connection's token, as JSON
    /// text (empty when there is none). Encoders write only JSON text here
    /// (anything else is left out of JSON messages and refused by decoders).
    pub info: Bytes,
}

/// Unsolicited server messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// A publication on a subscribed channel.
    Publication {
        /// The channel it was published to (the concrete channel, also when the
        /// subscription was a wildcard pattern).
        channel: String,
        /// Its offset in the channel.
        offset: u64,
        /// Its payload.
        data: Bytes,
    },
    /// Someone subscribed to a channel (for subscribers that asked for join/leave).
    Join {
        /// The channel.
        channel: String,
        /// Who joined.
        info: ClientInfo,
    },
    /// Someone unsubscribed from a channel.
    Leave {
        /// The channel.
        channel: String,
        /// Who left.
        info: ClientInfo,
    },
    /// The server ended a subscription.
    Unsubscribed {
        /// The channel.
        channel: String,
        /// Why, from [`ErrorCode`] or [`DisconnectCode`].
        code: u16,
        /// Human-readable detail.
        reason: String,
    },
    /// The server is about to close the connection.
    Disconnect {
        /// A [`DisconnectCode`]: its range says whether to reconnect.
        code: u16,
        /// Human-readable detail.
        reason: String,
    },
    /// Lobby tables added or changed, and ids removed, since the last update.
    LobbyUpdate {
        /// The subscribed branch this update is for ("" = all).
        path: String,
        /// The lobby's sequence number after this update.
        seq: u64,
        /// Tables added or changed (whole entries).
        tables: Vec<TableEntry>,
        /// Ids of tables removed.
        removed: Vec<u64>,
    },
    /// Part of a lobby snapshot too large for one message (§5e): entries
    /// of the subscribed branch, sent before the `lobby` reply that ends
    /// the snapshot.
    LobbyPage {
        /// The subscribed branch ("" = all).
        path: String,
        /// Whole entries, in ascending table id.
        tables: Vec<TableEntry>,
    },
    /// Game data from a table the client sits at or watches (opaque).
    Game {
        /// The table id.
        table: u64,
        /// The game's data.
        data: Bytes,
    },
    /// A seat at a watched or joined table changed.
    Seat {
        /// The table id.
        table: u64,
        /// The seat number.
        seat: u32,
        /// The user in the seat ("" for anonymous).
        user: String,
        /// What happened.
        status: SeatStatus,
    },
    /// The server took the client off a table (closed, grace expired, or the
    /// game unseated it).
    Unseat {
        /// The table id.
        table: u64,
        /// Why, from [`ErrorCode`] or [`DisconnectCode`].
        code: u16,
        /// Human-readable detail.
        reason: String,
    },
}

/// Why a message could not be decoded. Every variant maps to
/// [`ErrorCode::BadRequest`] or [`ErrorCode::UnknownCommand`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not well-formed for the encoding (bad JSON, truncated binary, ...).
    #[error("malformed message: {0}")]
    Malformed(String),
    /// Well-formed, but names a command or message type we do not know.
    #[error("unknown command: {0}")]
    Unknown(String),
    /// A required field is missing or has the wrong type.
    #[error("invalid field {field}: {reason}")]
    Invalid {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The message parsed up to its id, then failed: the id lets the server
    /// address its error reply.
    #[error("{source} (command id {id})")]
    WithId {
        /// The id of the failed command.
        id: u32,
        /// What went wrong.
        source: Box<DecodeError>,
    },
}

impl DecodeError {
    /// The id of the command that failed, if it was parsed.
    pub fn id(&self) -> u32 {
        match self {
            DecodeError::WithId { id, .. } => *id,
            _ => 0,
        }
    }

    /// The wire error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::WithId { source, .. } => source.code(),
            DecodeError::Unknown(_) => ErrorCode::UnknownCommand,
            _ => ErrorCode::BadRequest,
        }
    }
}
