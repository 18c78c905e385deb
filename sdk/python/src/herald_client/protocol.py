"""The client state machine, with no I/O: states, reconnect rules, recovery.

Why I/O-free (as python-websockets' ``protocol.py``): everything that decides
*what* to send and *what* a received message means lives here, as plain
methods over messages, so it is tested without sockets or an event loop and
shared by every transport. The asyncio layer (:mod:`.client`) only moves
frames and turns the :class:`Event` values returned by
:meth:`ClientCore.receive` into futures, callbacks and queue entries.

States (the same in every Herald SDK)::

    DISCONNECTED --start_connect()--> CONNECTING --connect reply--> CONNECTED
         ^                                 |                            |
         +--- connection_lost(code) -------+----------------------------+
              (should_reconnect(code))     (otherwise, or close())  --> CLOSED

Recovery: each exact-channel subscription remembers the last position
(epoch, offset) it received (and handed to the asyncio layer). A
re-subscription after a reconnect sends it as ``recover``; the reply's
publications are delivered first, in order, then live ones; any publication at
or below the remembered offset (same epoch) is a duplicate and is skipped. A
reply that is not ``recovered`` after recovery was needed yields
:attr:`Subscribed.needs_resync`: publications may be lost and the application
should re-read its state.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from .codes import should_reconnect
from .messages import (
    Connect,
    ConnectReply,
    Disconnect,
    ErrorReply,
    Game,
    Join,
    Leave,
    LobbyPage,
    LobbyUpdate,
    Position,
    Publication,
    Reply,
    Seat,
    ServerMessage,
    Subscribe,
    SubscribeReply,
    Unseat,
    Unsubscribed,
)

__all__ = [
    "ClientCore",
    "ConnectFailed",
    "Connected",
    "Deliver",
    "Event",
    "JoinLeave",
    "ReconnectPolicy",
    "ReplyReceived",
    "Rotation",
    "ServerDisconnect",
    "StaleSubscription",
    "State",
    "SubscribeDone",
    "SubscribeFailed",
    "Subscribed",
    "SubscriptionCore",
    "SubscriptionEnded",
    "channel_matches",
    "is_pattern",
]


class State(enum.Enum):
    """Where a client is in its life."""

    DISCONNECTED = "disconnected"
    """No connection; the client is waiting to (re)connect."""
    CONNECTING = "connecting"
    """A transport is open and ``connect`` was sent; waiting for its reply."""
    CONNECTED = "connected"
    """``connect`` was answered; commands flow."""
    CLOSED = "closed"
    """For good: closed by the application, or by a "do not reconnect" code."""


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """Exponential backoff with full jitter, bounded.

    The n-th consecutive failed attempt (from 0) waits a uniformly random time
    in ``[0, min(max_delay, initial_delay * multiplier**n)]`` — "full jitter",
    so that thousands of clients dropped at once do not come back in step.
    The count restarts once a connection has stayed connected for
    ``stable_after`` seconds: a connection that is accepted and then ended at
    once (a server in a crash loop, a close right after ``connect``) counts as
    a failed attempt, so such a loop backs off instead of reconnecting at the
    initial rate forever. With several URLs, attempts that do not get through
    go on to the next URL at once, and a whole round of them counts as one
    failed attempt (see :class:`Rotation`).
    """

    initial_delay: float = 0.5
    """Upper bound of the first wait, in seconds (default 0.5)."""
    max_delay: float = 20.0
    """Upper bound of any wait, in seconds (default 20)."""
    multiplier: float = 2.0
    """Growth of the bound per failed attempt (default 2)."""
    max_attempts: int | None = None
    """Consecutive failed attempts before giving up for good; None (default) = never."""
    stable_after: float = 5.0
    """Seconds a connection must last to restart the count (default 5; 0 =
    every successful ``connect`` restarts it)."""

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before attempt number ``attempt`` + 1."""
        bound = min(self.max_delay, self.initial_delay * self.multiplier ** min(attempt, 64))
        return rand() * bound


@dataclass(slots=True)
class Rotation:
    """Which URL the next connection attempt goes to, and whether it waits the
    backoff delay first — the same rule as the TypeScript SDK
    (docs/decisions/0005-sdk-client-state-machine.md).

    An attempt that does not get through (the transport does not open, or
    ends before the ``connect`` reply) goes on to the next URL at once: a dead
    node costs one attempt, not a delay. Only a whole round of such attempts —
    every URL in a row — waits the backoff delay, as one failed attempt of the
    policy (the n-th consecutive failed round waits the n-th delay). A
    connection that worked and ended, or a server that refused ``connect``
    with a "retry" code, waits the backoff delay and the next attempt goes to
    the next URL; the count restarts only after a connection that lasted
    ``policy.stable_after``.
    """

    urls: int
    """How many URLs there are (at least one)."""
    policy: ReconnectPolicy
    url: int = 0
    """Index of the URL for the next attempt."""
    attempt: int = 0
    """Failed attempts (waits) in a row: the policy's n for the next delay."""
    failed_in_round: int = 0
    """Attempts in a row that did not get through, since the last wait or reached server."""

    def __post_init__(self) -> None:
        if self.urls < 1:
            raise ValueError("at least one URL is needed")

    def after(self, *, connected: bool, refused: bool = False, connected_for: float = 0.0) -> bool:
        """Record how an attempt ended and move to the next URL. ``connected``:
        it reached the connected state (for ``connected_for`` seconds);
        ``refused``: the server refused ``connect`` with a "retry" code.
        Returns whether to wait :meth:`delay` before the next attempt (False:
        try the next URL at once)."""
        self.url = (self.url + 1) % self.urls
        if connected or refused:
            self.failed_in_round = 0
            if connected and connected_for >= self.policy.stable_after:
                self.attempt = 0
            return True
        self.failed_in_round += 1
        if self.failed_in_round < self.urls:
            return False
        self.failed_in_round = 0
        return True

    def exhausted(self) -> bool:
        """Whether ``policy.max_attempts`` failed attempts were made: give up."""
        limit = self.policy.max_attempts
        return limit is not None and self.attempt >= limit

    def delay(self, rand: Callable[[], float] = random.random) -> float:
        """The wait before the next attempt; counts one more failed attempt."""
        d = self.policy.delay(self.attempt, rand)
        self.attempt += 1
        return d


def is_pattern(channel: str) -> bool:
    """Whether ``channel`` is a wildcard pattern (contains ``*`` or ``>``)."""
    return "*" in channel or ">" in channel


def channel_matches(pattern: str, channel: str) -> bool:
    """Whether concrete ``channel`` matches ``pattern`` (docs/protocol.md §5a):
    ``*`` matches exactly one ``.``-separated token, a final ``>`` one or more."""
    p = pattern.split(".")
    c = channel.split(".")
    for i, tok in enumerate(p):
        if tok == ">" and i == len(p) - 1:
            return len(c) > i
        if i >= len(c) or (tok != "*" and tok != c[i]):
            return False
    return len(p) == len(c)


# ---------------------------------------------------------------- events --


@dataclass(frozen=True, slots=True)
class Subscribed:
    """A (re-)subscription succeeded; delivered to ``on_subscribed``."""

    channel: str
    epoch: str
    offset: int
    recovered: bool
    """The server delivered every publication since the recover position."""
    resubscribed: bool
    """This follows a reconnect (the subscription existed before)."""
    recovery_requested: bool
    """A ``recover`` position was sent."""

    @property
    def needs_resync(self) -> bool:
        """Publications may have been missed (recovery was needed and failed, or
        was impossible): the application should re-read its state."""
        return (self.resubscribed or self.recovery_requested) and not self.recovered


@dataclass(frozen=True, slots=True)
class Connected:
    """The connect reply arrived; the client is CONNECTED."""

    reply: ConnectReply


@dataclass(frozen=True, slots=True)
class ConnectFailed:
    """The server answered ``connect`` with an error."""

    error: ErrorReply


@dataclass(frozen=True, slots=True)
class ReplyReceived:
    """A reply or error to a command other than connect/subscribe."""

    reply: Reply


@dataclass(frozen=True, slots=True)
class Deliver:
    """A publication for a subscription, in order, duplicates already removed."""

    sub: SubscriptionCore
    publication: Publication


@dataclass(frozen=True, slots=True)
class JoinLeave:
    sub: SubscriptionCore
    event: Join | Leave


@dataclass(frozen=True, slots=True)
class SubscribeDone:
    """A subscribe reply was applied; recovered publications follow as Deliver."""

    sub: SubscriptionCore
    subscribed: Subscribed
    reply: SubscribeReply


@dataclass(frozen=True, slots=True)
class SubscribeFailed:
    """The server refused a (re-)subscription; the subscription is removed."""

    sub: SubscriptionCore
    error: ErrorReply


@dataclass(frozen=True, slots=True)
class SubscriptionEnded:
    """The server ended a subscription (``unsub`` push); it is removed."""

    sub: SubscriptionCore
    push: Unsubscribed


@dataclass(frozen=True, slots=True)
class StaleSubscription:
    """A subscribe succeeded for a subscription the application already
    dropped: the transport layer should send an unsubscribe."""

    channel: str


@dataclass(frozen=True, slots=True)
class ServerDisconnect:
    """A ``disconnect`` push: the server is about to close with this code."""

    push: Disconnect


@dataclass(frozen=True, slots=True)
class GamePush:
    """A game push (docs/protocol.md §5e), handed to the application as is."""

    push: LobbyUpdate | LobbyPage | Game | Seat | Unseat


Event: TypeAlias = (
    Connected
    | ConnectFailed
    | ReplyReceived
    | Deliver
    | JoinLeave
    | SubscribeDone
    | SubscribeFailed
    | SubscriptionEnded
    | StaleSubscription
    | ServerDisconnect
    | GamePush
)


# --------------------------------------------------------- subscriptions --


@dataclass(eq=False, slots=True)
class SubscriptionCore:
    """One subscription's protocol state: its options and its stream position."""

    channel: str
    recover: bool = True
    """Send ``recover`` on re-subscription (exact channels only)."""
    join_leave: bool = False
    pattern: bool = False
    token: str | None = None
    """Subscribe token sent with every (re)subscribe (private channels, docs/protocol.md §5d)."""
    epoch: str | None = None
    """Epoch of the stream the offset belongs to; None before the first reply."""
    offset: int = 0
    """Offset of the last publication delivered (or the stream top at subscribe)."""
    since_requested: bool = False
    """The application gave an explicit starting position."""
    ever_subscribed: bool = False
    pending_id: int = 0
    """Id of this subscription's subscribe in flight on the current connection."""
    active: bool = False
    """Subscribed on the current connection: publications are delivered."""
    removed: bool = False

    @property
    def position(self) -> Position | None:
        return None if self.epoch is None else Position(self.epoch, self.offset)

    def command(self, id: int) -> Subscribe:
        recover = None
        if self.epoch is not None:
            if not self.ever_subscribed:
                # The first subscribe: from the application's `since`, if any
                # (on a pattern the server refuses it with 111).
                recover = Position(self.epoch, self.offset) if self.since_requested else None
            elif self.recover and not self.pattern:
                recover = Position(self.epoch, self.offset)
        return Subscribe(id, self.channel, recover, self.join_leave, self.token)

    def apply(self, reply: SubscribeReply, sent_recover: bool) -> tuple[Subscribed, list[Publication]]:
        """Apply a successful subscribe reply; returns the event and the
        publications to deliver (recovered ones, after the known offset, in order)."""
        resubscribed = self.ever_subscribed
        self.ever_subscribed = True
        self.active = True
        deliver: list[Publication] = []
        if not self.pattern:
            if self.epoch != reply.epoch:
                self.epoch = reply.epoch
                self.offset = 0
            for item in reply.publications:
                if item.offset > self.offset:
                    deliver.append(Publication(self.channel, item.offset, item.data))
                    self.offset = item.offset
            self.offset = max(self.offset, reply.offset)
        event = Subscribed(
            self.channel,
            reply.epoch,
            reply.offset,
            reply.recovered,
            resubscribed,
            sent_recover,
        )
        return event, deliver

    def accept(self, offset: int) -> bool:
        """Whether a live publication at ``offset`` is new (and remember it)."""
        if self.pattern:
            return True
        if offset <= self.offset:
            return False
        self.offset = offset
        return True


# ------------------------------------------------------------------ core --


@dataclass(eq=False, slots=True)
class _Pending:
    sub: SubscriptionCore
    sent_recover: bool


@dataclass(eq=False)
class ClientCore:
    """The client's protocol state between transports and reconnects.

    Feed it every decoded server message with :meth:`receive`; send what
    :meth:`start_connect`, :meth:`subscribe_command` and
    :meth:`resubscribe_commands` return; report the end of each connection with
    :meth:`connection_lost`.
    """

    token: str | None = None
    name: str | None = None
    state: State = State.DISCONNECTED
    subscriptions: dict[str, SubscriptionCore] = field(default_factory=dict)
    _last_id: int = 0
    _connect_id: int = 0
    _subscribing: dict[int, _Pending] = field(default_factory=dict)

    def next_id(self) -> int:
        """A fresh non-zero u32 command id."""
        self._last_id = self._last_id % 0xFFFF_FFFF + 1
        return self._last_id

    # -- connection life

    def start_connect(self) -> Connect:
        """A transport is open: the connect command to send first."""
        if self.state is State.CLOSED:
            raise RuntimeError("client is closed")
        self.state = State.CONNECTING
        self._subscribing.clear()
        for sub in self.subscriptions.values():
            sub.pending_id = 0
            sub.active = False
        self._connect_id = self.next_id()
        return Connect(self._connect_id, self.token, self.name)

    def connection_lost(self, code: int | None) -> bool:
        """The transport ended (``code`` None = dropped). Returns whether to
        reconnect; the state becomes DISCONNECTED or CLOSED accordingly."""
        self._subscribing.clear()
        for sub in self.subscriptions.values():
            sub.pending_id = 0
            sub.active = False
        if self.state is State.CLOSED:
            return False
        again = should_reconnect(code)
        self.state = State.DISCONNECTED if again else State.CLOSED
        return again

    def close(self) -> None:
        self.state = State.CLOSED

    # -- subscriptions

    def add_subscription(
        self,
        channel: str,
        *,
        recover: bool = True,
        join_leave: bool = False,
        since: Position | None = None,
        token: str | None = None,
    ) -> SubscriptionCore:
        if channel in self.subscriptions:
            raise ValueError(f"already subscribed to {channel!r}")
        sub = SubscriptionCore(channel, recover, join_leave, is_pattern(channel), token)
        if since is not None:
            sub.epoch, sub.offset, sub.since_requested = since.epoch, since.offset, True
        self.subscriptions[channel] = sub
        return sub

    def remove_subscription(self, channel: str) -> SubscriptionCore | None:
        sub = self.subscriptions.pop(channel, None)
        if sub is not None:
            sub.removed = True
            sub.active = False
        return sub

    def subscribe_command(self, sub: SubscriptionCore) -> Subscribe:
        """The subscribe command for ``sub`` on the current connection."""
        cmd = sub.command(self.next_id())
        sub.pending_id = cmd.id
        self._subscribing[cmd.id] = _Pending(sub, cmd.recover is not None)
        return cmd

    def resubscribe_commands(self) -> list[Subscribe]:
        """After the connect reply: a subscribe for every subscription not yet
        sent on this connection, with ``recover`` = its last position."""
        if self.state is not State.CONNECTED:
            return []
        return [
            self.subscribe_command(s)
            for s in list(self.subscriptions.values())
            if not s.pending_id and not s.active
        ]

    # -- receiving

    def receive(self, m: ServerMessage) -> list[Event]:
        """What one server message means, as events in delivery order."""
        if isinstance(m, Publication):
            out: list[Event] = []
            exact = self.subscriptions.get(m.channel)
            if exact is not None and exact.active and exact.accept(m.offset):
                out.append(Deliver(exact, m))
            for sub in self.subscriptions.values():
                if sub.pattern and sub.active and channel_matches(sub.channel, m.channel):
                    out.append(Deliver(sub, m))
            return out
        if isinstance(m, (Join, Leave)):
            return [
                JoinLeave(sub, m)
                for sub in self.subscriptions.values()
                if sub.active
                and (sub.channel == m.channel or (sub.pattern and channel_matches(sub.channel, m.channel)))
            ]
        if isinstance(m, Unsubscribed):
            ended = self.remove_subscription(m.channel)
            return [SubscriptionEnded(ended, m)] if ended is not None else []
        if isinstance(m, Disconnect):
            return [ServerDisconnect(m)]
        if isinstance(m, (LobbyUpdate, LobbyPage, Game, Seat, Unseat)):
            return [GamePush(m)]
        # A reply or an error: route by id.
        if m.id and m.id == self._connect_id and self.state is State.CONNECTING:
            if isinstance(m, ConnectReply):
                self.state = State.CONNECTED
                return [Connected(m)]
            if isinstance(m, ErrorReply):
                return [ConnectFailed(m)]
        pending = self._subscribing.pop(m.id, None) if m.id else None
        if pending is not None:
            sub = pending.sub
            if sub.pending_id == m.id:
                sub.pending_id = 0
            if isinstance(m, ErrorReply):
                if sub.removed:
                    return []
                self.remove_subscription(sub.channel)
                return [SubscribeFailed(sub, m)]
            if isinstance(m, SubscribeReply):
                if sub.removed:
                    return [StaleSubscription(sub.channel)]
                subscribed, pubs = sub.apply(m, pending.sent_recover)
                return [SubscribeDone(sub, subscribed, m), *(Deliver(sub, p) for p in pubs)]
        return [ReplyReceived(m)]
