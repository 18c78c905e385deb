//! The protocol's numbered codes, written down once (Pusher's "error codes"
//! page). Close codes tell a client what to do next, by range:
//!
//! | range | meaning | client |
//! |---|---|---|
//! | 4000–4099 | the connection is refused for good | does not reconnect |
//! | 4100–4199 | over capacity | reconnects after a back-off |
//! | 4200–4299 | a transient condition | reconnects at once |
//! | 4300–4399 | a message was refused | `pusher:error` only, the connection stays |
//!
//! Herald's own WebSocket close codes (1000–1015, 3000–3999) can also end a
//! Pusher connection: 1009 for a frame above `max_message_size`, 3001 for a
//! slow consumer (pusher-js reconnects on both).

/// One code of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 4001: the app key in the URL is unknown.
    AppNotFound,
    /// 4005: the path is not `/app/{key}`.
    PathNotFound,
    /// 4006: the `protocol` query parameter is not a number.
    InvalidVersion,
    /// 4007: the protocol version is not one Herald speaks (5 to 7).
    UnsupportedProtocol,
    /// 4008: no `protocol` query parameter.
    NoProtocol,
    /// 4009: the connection is not authorised (e.g. it kept sending refused
    /// messages).
    Unauthorized,
    /// 4100: over capacity (connection limits).
    OverCapacity,
    /// 4200: generic "reconnect now" (server shutting down).
    ReconnectNow,
    /// 4201: no pong to the server's ping in time.
    PongNotReceived,
    /// 4202: closed after inactivity.
    Inactive,
    /// 4301: a client event was refused (rate limit or size); the
    /// connection stays.
    ClientEventRejected,
}

impl Code {
    /// The number on the wire.
    pub fn code(self) -> u16 {
        match self {
            Code::AppNotFound => 4001,
            Code::PathNotFound => 4005,
            Code::InvalidVersion => 4006,
            Code::UnsupportedProtocol => 4007,
            Code::NoProtocol => 4008,
            Code::Unauthorized => 4009,
            Code::OverCapacity => 4100,
            Code::ReconnectNow => 4200,
            Code::PongNotReceived => 4201,
            Code::Inactive => 4202,
            Code::ClientEventRejected => 4301,
        }
    }

    /// Whether a client should reconnect after a close with this code.
    pub fn reconnects(self) -> bool {
        self.code() >= 4100
    }
}
