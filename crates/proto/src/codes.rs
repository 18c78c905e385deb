//! Numbered error and disconnect codes, written down once here and in
//! docs/protocol.md, mirrored in every SDK.
//!
//! Error codes (1xx) answer a single command and leave the connection open.
//! Disconnect codes are WebSocket close codes (and the `code` of a `disconnect`
//! push on other transports): 3000–3499 mean "reconnect (with recovery)",
//! 3500–3999 mean "do not reconnect without changing something". The standard
//! WebSocket codes 1001 (going away: reconnect), 1002, 1007 and 1009 are used with
//! their RFC 6455 meaning and are not to be retried unchanged, except 1001.

/// Codes of `error` replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// The server failed; the command may be retried.
    Internal = 100,
    /// The connection is not authenticated (send `connect` first, or a valid token).
    Unauthorized = 101,
    /// The command is not known.
    UnknownCommand = 102,
    /// The command is malformed (bad JSON, missing field, truncated binary).
    BadRequest = 103,
    /// The client lacks permission for this channel or command.
    PermissionDenied = 104,
    /// Already subscribed to this channel.
    AlreadySubscribed = 105,
    /// Not subscribed to this channel.
    NotSubscribed = 106,
    /// A configured limit was hit (subscriptions per connection, ...).
    LimitExceeded = 107,
    /// Too many requests: the per-connection rate limit was hit.
    TooManyRequests = 108,
    /// The channel name is invalid (empty, too long, bad characters, a
    /// wildcard where none is allowed).
    InvalidChannel = 109,
    /// The message is larger than the configured maximum.
    MessageTooLarge = 110,
    /// The feature is not available on this server or channel.
    NotAvailable = 111,
    /// The token has expired: refresh it and reconnect.
    TokenExpired = 112,
    /// `connect` was sent twice.
    AlreadyConnected = 113,
    /// The broker (e.g. Redis) is unavailable; retry later.
    BrokerUnavailable = 114,
    /// No table has this id.
    UnknownTable = 115,
    /// The seat is not available: taken, the table is full, or the game
    /// refused the seat (the message says which).
    SeatUnavailable = 116,
    /// Not seated at or watching this table.
    NotAtTable = 117,
    /// The game refused the action (out of turn, illegal, malformed); the
    /// message is the game's.
    ActionRefused = 118,
    /// Already seated at or watching this table.
    AlreadyAtTable = 119,
    /// `play` names a game this server does not run.
    UnknownGame = 120,
    /// `play` with a private-table code no open table has.
    UnknownCode = 121,
}

impl ErrorCode {
    /// The number on the wire.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// A short fixed description.
    pub const fn message(self) -> &'static str {
        match self {
            ErrorCode::Internal => "internal server error",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::UnknownCommand => "unknown command",
            ErrorCode::BadRequest => "bad request",
            ErrorCode::PermissionDenied => "permission denied",
            ErrorCode::AlreadySubscribed => "already subscribed",
            ErrorCode::NotSubscribed => "not subscribed",
            ErrorCode::LimitExceeded => "limit exceeded",
            ErrorCode::TooManyRequests => "too many requests",
            ErrorCode::InvalidChannel => "invalid channel",
            ErrorCode::MessageTooLarge => "message too large",
            ErrorCode::NotAvailable => "not available",
            ErrorCode::TokenExpired => "token expired",
            ErrorCode::AlreadyConnected => "already connected",
            ErrorCode::BrokerUnavailable => "broker unavailable",
            ErrorCode::UnknownTable => "unknown table",
            ErrorCode::SeatUnavailable => "seat unavailable",
            ErrorCode::NotAtTable => "not at table",
            ErrorCode::ActionRefused => "action refused",
            ErrorCode::AlreadyAtTable => "already at table",
            ErrorCode::UnknownGame => "unknown game",
            ErrorCode::UnknownCode => "unknown code",
        }
    }
}

/// Codes that end a connection (WebSocket close codes; `disconnect` pushes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum DisconnectCode {
    /// RFC 6455 1001: the server is shutting down or restarting. Reconnect
    /// (to another node, and recover).
    GoingAway = 1001,
    /// RFC 6455 1002: broken WebSocket framing.
    ProtocolError = 1002,
    /// RFC 6455 1007: a text frame was not valid UTF-8.
    InvalidPayload = 1007,
    /// RFC 6455 1009: a message exceeded the maximum size.
    MessageTooBig = 1009,
    /// 3000: the connection fell silent (no pong within the timeout). Reconnect.
    NoPong = 3000,
    /// 3001: the client could not keep up; its outbound queue filled.
    /// Reconnect and recover.
    SlowConsumer = 3001,
    /// 3002: the token expired. Refresh it and reconnect.
    TokenExpired = 3002,
    /// 3003: the client did not complete its handshake or `connect` in time.
    /// Reconnect.
    ConnectTimeout = 3003,
    /// 3004: the node lost its link to the broker (Redis) and could not replay
    /// what was published meanwhile on a channel this client subscribes to.
    /// Reconnect (to any node) and recover: the recovery says whether
    /// anything was lost.
    BrokerStateLost = 3004,
    /// 3500: the token is invalid. Do not reconnect with the same token.
    InvalidToken = 3500,
    /// 3501: the client broke the protocol (e.g. a transport-level frame error
    /// on a non-WebSocket transport). Do not reconnect unchanged.
    BadProtocol = 3501,
    /// 3502: the client is not allowed to connect. Do not reconnect.
    Forbidden = 3502,
    /// 3503: a connection limit was reached. Back off before reconnecting.
    ConnectionLimit = 3503,
}

impl DisconnectCode {
    /// The number on the wire.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The known code with this number, if any.
    pub const fn from_code(code: u16) -> Option<DisconnectCode> {
        Some(match code {
            1001 => DisconnectCode::GoingAway,
            1002 => DisconnectCode::ProtocolError,
            1007 => DisconnectCode::InvalidPayload,
            1009 => DisconnectCode::MessageTooBig,
            3000 => DisconnectCode::NoPong,
            3001 => DisconnectCode::SlowConsumer,
            3002 => DisconnectCode::TokenExpired,
            3003 => DisconnectCode::ConnectTimeout,
            3004 => DisconnectCode::BrokerStateLost,
            3500 => DisconnectCode::InvalidToken,
            3501 => DisconnectCode::BadProtocol,
            3502 => DisconnectCode::Forbidden,
            3503 => DisconnectCode::ConnectionLimit,
            _ => return None,
        })
    }

    /// Whether a client should reconnect after this code.
    pub const fn reconnect(self) -> bool {
        let c = self as u16;
        c == 1001 || (c >= 3000 && c < 3500)
    }

    /// A short fixed reason, sent in the close frame.
    pub const fn reason(self) -> &'static str {
        match self {
            DisconnectCode::GoingAway => "going away",
            DisconnectCode::ProtocolError => "protocol error",
            DisconnectCode::InvalidPayload => "invalid utf-8",
            DisconnectCode::MessageTooBig => "message too big",
            DisconnectCode::NoPong => "no pong",
            DisconnectCode::SlowConsumer => "slow consumer",
            DisconnectCode::TokenExpired => "token expired",
            DisconnectCode::ConnectTimeout => "connect timeout",
            DisconnectCode::BrokerStateLost => "broker state lost",
            DisconnectCode::InvalidToken => "invalid token",
            DisconnectCode::BadProtocol => "bad protocol",
            DisconnectCode::Forbidden => "forbidden",
            DisconnectCode::ConnectionLimit => "connection limit",
        }
    }
}
