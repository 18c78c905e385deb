"""Every exception this package raises, in one tree.

::

    HeraldError
    ├── DecodeError              a message could not be decoded (kind + recovered id)
    ├── ReplyError               the server answered a command with ``error`` (code, message)
    │   ├── InternalError            100
    │   ├── UnauthorizedError        101
    │   ├── UnknownCommandError      102
    │   ├── BadRequestError          103
    │   ├── PermissionDeniedError    104
    │   ├── AlreadySubscribedError   105
    │   ├── NotSubscribedError       106
    │   ├── LimitExceededError       107
    │   ├── TooManyRequestsError     108
    │   ├── InvalidChannelError      109
    │   ├── MessageTooLargeError     110
    │   ├── NotAvailableError        111
    │   ├── TokenExpiredError        112
    │   ├── AlreadyConnectedError    113
    │   └── BrokerUnavailableError   114
    ├── ConnectionLostError      the connection ended while a command was in flight
    ├── ConnectError             the first connect() could not reach any URL
    ├── DisconnectedError        the server ended the connection with a "do not reconnect" code
    ├── ClientClosedError        the client was closed (by close(), or for good)
    ├── RequestTimeoutError      no reply in time (also a builtin TimeoutError)
    ├── ProtocolError            the server answered with a reply of the wrong type
    └── InvalidArgumentError     an argument the protocol cannot carry (also a ValueError)

Arguments of the wrong type raise the builtin :class:`TypeError`. A message
from the server that cannot be decoded is not raised to the application: the
client logs it, drops that connection (commands in flight raise
:class:`ConnectionLostError`) and reconnects with recovery, so that whatever
the bad message carried is recovered rather than lost.

Why a tree: an application catches :class:`HeraldError` for "anything from
Herald", :class:`ReplyError` for "the server said no" (its ``code`` is the
numbered code of docs/protocol.md §7.1), or one leaf for one case.
:func:`reply_error` maps a code to its leaf; unknown codes give a plain
:class:`ReplyError`.
"""

from __future__ import annotations

from typing import Literal

from .codes import ErrorCode

__all__ = [
    "AlreadyConnectedError",
    "AlreadySubscribedError",
    "BadRequestError",
    "BrokerUnavailableError",
    "ClientClosedError",
    "ConnectError",
    "ConnectionLostError",
    "DecodeError",
    "DecodeErrorKind",
    "DisconnectedError",
    "HeraldError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidChannelError",
    "LimitExceededError",
    "MessageTooLargeError",
    "NotAvailableError",
    "NotSubscribedError",
    "PermissionDeniedError",
    "ProtocolError",
    "ReplyError",
    "RequestTimeoutError",
    "TokenExpiredError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnknownCommandError",
    "reply_error",
]

DecodeErrorKind = Literal["malformed", "invalid", "unknown"]


class HeraldError(Exception):
    """Base class of every exception raised by ``herald_client``."""


class DecodeError(HeraldError):
    """A message could not be decoded (docs/protocol.md §6).

    ``kind`` is ``"malformed"`` (not well-formed), ``"invalid"`` (a field is
    missing, of the wrong type or out of range) or ``"unknown"`` (unknown
    operation or message type); ``id`` is the message's id if the decoder got
    that far, else 0.
    """

    def __init__(self, kind: DecodeErrorKind, message: str, id: int = 0) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind: DecodeErrorKind = kind
        self.message = message
        self.id = id


class ReplyError(HeraldError):
    """The server answered a command with an ``error`` reply.

    ``code`` is the numbered error code (docs/protocol.md §7.1, mirrored in
    :class:`herald_client.codes.ErrorCode`), ``message`` the server's text.
    """

    code: int = 0

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InternalError(ReplyError):
    """100: the server failed; the command may be retried."""


class UnauthorizedError(ReplyError):
    """101: not authenticated."""


class UnknownCommandError(ReplyError):
    """102: the command is not known."""


class BadRequestError(ReplyError):
    """103: the command is malformed."""


class PermissionDeniedError(ReplyError):
    """104: no permission for this channel or command."""


class AlreadySubscribedError(ReplyError):
    """105: already subscribed to this channel."""


class NotSubscribedError(ReplyError):
    """106: not subscribed to this channel."""


class LimitExceededError(ReplyError):
    """107: a configured limit was hit."""


class TooManyRequestsError(ReplyError):
    """108: the per-connection rate limit was hit."""


class InvalidChannelError(ReplyError):
    """109: invalid channel name or pattern."""


class MessageTooLargeError(ReplyError):
    """110: larger than the configured maximum."""


class NotAvailableError(ReplyError):
    """111: the feature is not available on this server or channel."""


class TokenExpiredError(ReplyError):
    """112: refresh the token and reconnect."""


class AlreadyConnectedError(ReplyError):
    """113: ``connect`` was sent twice."""


class BrokerUnavailableError(ReplyError):
    """114: the broker is unavailable; retry later."""


_BY_CODE: dict[int, type[ReplyError]] = {
    ErrorCode.INTERNAL: InternalError,
    ErrorCode.UNAUTHORIZED: UnauthorizedError,
    ErrorCode.UNKNOWN_COMMAND: UnknownCommandError,
    ErrorCode.BAD_REQUEST: BadRequestError,
    ErrorCode.PERMISSION_DENIED: PermissionDeniedError,
    ErrorCode.ALREADY_SUBSCRIBED: AlreadySubscribedError,
    ErrorCode.NOT_SUBSCRIBED: NotSubscribedError,
    ErrorCode.LIMIT_EXCEEDED: LimitExceededError,
    ErrorCode.TOO_MANY_REQUESTS: TooManyRequestsError,
    ErrorCode.INVALID_CHANNEL: InvalidChannelError,
    ErrorCode.MESSAGE_TOO_LARGE: MessageTooLargeError,
    ErrorCode.NOT_AVAILABLE: NotAvailableError,
    ErrorCode.TOKEN_EXPIRED: TokenExpiredError,
    ErrorCode.ALREADY_CONNECTED: AlreadyConnectedError,
    ErrorCode.BROKER_UNAVAILABLE: BrokerUnavailableError,
}


def reply_error(code: int, message: str) -> ReplyError:
    """The exception for an ``error`` reply with this code."""
    return _BY_CODE.get(code, ReplyError)(code, message)


class ConnectionLostError(HeraldError, ConnectionError):
    """The connection ended while a command was in flight.

    The command may or may not have reached the server; the client is
    reconnecting (or closed). Retry if the command is safe to repeat.
    """


class ConnectError(HeraldError, ConnectionError):
    """The first :meth:`Client.connect` could not reach any of its URLs."""


class DisconnectedError(HeraldError, ConnectionError):
    """The server ended the connection with a code that says "do not reconnect"
    (3500–3999, 1002, 1007, 1009); the client is closed."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"disconnected: {code} {reason}".rstrip())
        self.code = code
        self.reason = reason


class ClientClosedError(HeraldError):
    """The client is closed: :meth:`Client.close` was called, or it stopped for good."""


class RequestTimeoutError(HeraldError, TimeoutError):
    """No reply arrived within the request timeout."""


class ProtocolError(HeraldError):
    """The server broke the protocol: it answered a command with a reply of
    another type. The connection stays; the command's outcome is unknown."""


class InvalidArgumentError(HeraldError, ValueError):
    """An argument the protocol cannot carry (an integer out of its range, a
    string with a lone surrogate, NaN in published data, an unknown encoding
    or URL scheme); raised before anything is sent."""
