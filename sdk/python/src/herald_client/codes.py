"""Numbered error and disconnect codes, mirrored from docs/protocol.md §7.

Why a module of its own: the numbers are the protocol's, written down once in
the protocol doc and mirrored here (and in every other SDK) so that the
reconnect rule — which codes mean "reconnect", which mean "don't" — lives in
exactly one place. :func:`should_reconnect` is that rule.
"""

from __future__ import annotations

import enum

__all__ = ["DisconnectCode", "ErrorCode", "should_reconnect"]


class ErrorCode(enum.IntEnum):
    """Codes of ``error`` replies (§7.1): the command failed, the connection stays."""

    INTERNAL = 100
    """The server failed; the command may be retried."""
    UNAUTHORIZED = 101
    """Not authenticated: send ``connect`` first, or a valid token."""
    UNKNOWN_COMMAND = 102
    """The command is not known."""
    BAD_REQUEST = 103
    """The command is malformed (bad JSON, missing field, truncated binary)."""
    PERMISSION_DENIED = 104
    """No permission for this channel or command."""
    ALREADY_SUBSCRIBED = 105
    """Already subscribed to this channel."""
    NOT_SUBSCRIBED = 106
    """Not subscribed to this channel."""
    LIMIT_EXCEEDED = 107
    """A configured limit was hit (subscriptions per connection, ...)."""
    TOO_MANY_REQUESTS = 108
    """The per-connection rate limit was hit."""
    INVALID_CHANNEL = 109
    """Empty, too long, bad characters, or a wildcard where none is allowed."""
    MESSAGE_TOO_LARGE = 110
    """Larger than the configured maximum."""
    NOT_AVAILABLE = 111
    """The feature is not available on this server or channel."""
    TOKEN_EXPIRED = 112
    """Refresh the token and reconnect."""
    ALREADY_CONNECTED = 113
    """``connect`` was sent twice."""
    BROKER_UNAVAILABLE = 114
    """The broker (e.g. Redis) is unavailable; retry later."""
    UNKNOWN_TABLE = 115
    """No table has this id."""
    SEAT_UNAVAILABLE = 116
    """The seat is taken, the table is full, or the game refused the seat."""
    NOT_AT_TABLE = 117
    """Not seated at or watching this table."""
    ACTION_REFUSED = 118
    """The game refused the action (the message is the game's)."""
    ALREADY_AT_TABLE = 119
    """Already seated at or watching this table."""
    UNKNOWN_GAME = 120
    """``play`` names a game this server does not run."""
    UNKNOWN_CODE = 121
    """``play`` with a private-table code that no open table has."""


class DisconnectCode(enum.IntEnum):
    """Codes that end a connection (§7.2): WebSocket close codes, and the
    ``code`` of a ``disconnect`` push on other transports."""

    GOING_AWAY = 1001
    """Server shutting down or restarting: reconnect (to another node) and recover."""
    PROTOCOL_ERROR = 1002
    """Broken WebSocket framing: do not retry unchanged."""
    INVALID_PAYLOAD = 1007
    """A text frame was not valid UTF-8: do not retry unchanged."""
    MESSAGE_TOO_BIG = 1009
    """A message exceeded the maximum size: do not retry unchanged."""
    NO_PONG = 3000
    """The connection fell silent: reconnect."""
    SLOW_CONSUMER = 3001
    """The client could not keep up; its outbound queue filled: reconnect."""
    TOKEN_EXPIRED = 3002
    """Refresh the token, then reconnect."""
    CONNECT_TIMEOUT = 3003
    """No handshake or ``connect`` in time: reconnect."""
    BROKER_STATE_LOST = 3004
    """The node lost its link to the broker and could not replay what it
    missed: reconnect and recover (the recovery tells whether anything was lost)."""
    INVALID_TOKEN = 3500
    """Do not reconnect with the same token."""
    BAD_PROTOCOL = 3501
    """The client broke the protocol (e.g. a bad frame on raw TCP)."""
    FORBIDDEN = 3502
    """The client is not allowed to connect."""
    CONNECTION_LIMIT = 3503
    """Back off before reconnecting."""


#: Standard WebSocket codes that mean "do not retry unchanged" (RFC 6455 meaning).
_NO_RETRY_STANDARD = frozenset({1002, 1007, 1009})


def should_reconnect(code: int | None) -> bool:
    """Whether a connection that ended with ``code`` should be re-established.

    ``None`` means the connection dropped without a code (reset, EOF, silence):
    reconnect. 3500–3999 and 1002/1007/1009 mean "do not reconnect without
    changing something first"; every other code — 1001, 3000–3499, and codes
    this SDK does not know — means reconnect with backoff, recovering
    subscriptions.
    """
    if code is None:
        return True
    if 3500 <= code <= 3999:
        return False
    return code not in _NO_RETRY_STANDARD
