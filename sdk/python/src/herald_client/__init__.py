"""herald_client: an asyncio client for Herald, the real-time messaging server.

Layout (python-websockets style: an I/O-free core, a thin asyncio layer):

* :mod:`.messages` — the protocol's messages as values;
* :mod:`.json_codec`, :mod:`.binary_codec`, :mod:`.codec` — both encodings;
* :mod:`.codes` — numbered error/disconnect codes and the reconnect rule;
* :mod:`.errors` — every exception, in one tree;
* :mod:`.protocol` — the client state machine (states, backoff, recovery);
* :mod:`.transport` — WebSocket and raw TCP transports;
* :mod:`.lobby` — :class:`Lobby`, the game lobby kept current from its updates;
* :mod:`.client` — :class:`Client` and :class:`Subscription`.

The wire protocol: docs/protocol.md in the Herald repository.
"""

from .client import (
    Client,
    Disconnected,
    HistoryResult,
    PresenceStatsResult,
    SubscribeTokenSource,
    Subscription,
    TokenSource,
)
from .codec import Encoding
from .codes import DisconnectCode, ErrorCode, should_reconnect
from .errors import (
    AlreadyConnectedError,
    AlreadySubscribedError,
    BadRequestError,
    BrokerUnavailableError,
    ClientClosedError,
    ConnectError,
    ConnectionLostError,
    DecodeError,
    DisconnectedError,
    HeraldError,
    InternalError,
    InvalidArgumentError,
    InvalidChannelError,
    LimitExceededError,
    MessageTooLargeError,
    NotAvailableError,
    NotSubscribedError,
    PermissionDeniedError,
    ProtocolError,
    ReplyError,
    RequestTimeoutError,
    TokenExpiredError,
    TooManyRequestsError,
    UnauthorizedError,
    UnknownCommandError,
)
from .lobby import Lobby
from .messages import (
    ClientInfo,
    ConnectReply,
    Game,
    Join,
    Leave,
    LobbyPage,
    LobbyReply,
    LobbyUpdate,
    PlayReply,
    Position,
    Publication,
    Seat,
    SitReply,
    TableEntry,
    Unseat,
    Unsubscribed,
)
from .protocol import ReconnectPolicy, State, Subscribed

__version__ = "0.1.0"

__all__ = [
    "AlreadyConnectedError",
    "AlreadySubscribedError",
    "BadRequestError",
    "BrokerUnavailableError",
    "Client",
    "ClientClosedError",
    "ClientInfo",
    "ConnectError",
    "ConnectReply",
    "ConnectionLostError",
    "DecodeError",
    "DisconnectCode",
    "Disconnected",
    "DisconnectedError",
    "Encoding",
    "ErrorCode",
    "Game",
    "HeraldError",
    "HistoryResult",
    "InternalError",
    "InvalidArgumentError",
    "InvalidChannelError",
    "Join",
    "Leave",
    "LimitExceededError",
    "Lobby",
    "LobbyPage",
    "LobbyReply",
    "LobbyUpdate",
    "MessageTooLargeError",
    "NotAvailableError",
    "NotSubscribedError",
    "PermissionDeniedError",
    "PlayReply",
    "Position",
    "PresenceStatsResult",
    "ProtocolError",
    "Publication",
    "ReconnectPolicy",
    "ReplyError",
    "RequestTimeoutError",
    "Seat",
    "SitReply",
    "State",
    "SubscribeTokenSource",
    "Subscribed",
    "Subscription",
    "TableEntry",
    "TokenExpiredError",
    "TokenSource",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnknownCommandError",
    "Unseat",
    "Unsubscribed",
    "should_reconnect",
]
