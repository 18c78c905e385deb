"""The asyncio client: a thin layer that runs :class:`~.protocol.ClientCore`
over a transport, reconnecting as the protocol says.

How it is built: one background task per client (``_run``) opens a transport,
sends ``connect``, re-subscribes, then reads messages and applies them to the
core until the connection ends; it then tries the next URL: at once if the
attempt did not get through, after a backoff delay once every URL failed in a
row or after a connection that worked (:class:`~.protocol.Rotation`).
Commands are matched to replies by id with futures. Each subscription has its
own bounded inbox and dispatcher task, so its publications and events reach
the application in order (recovered ones before live ones) and a slow
callback does not hold up other subscriptions until its inbox is full; then
the reader waits (backpressure to the server, whose slow-consumer policy
applies), but never for a subscription that has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from ssl import SSLContext
from types import TracebackType
from typing import Any, Literal, TypeAlias, TypeVar
from urllib.parse import urlsplit

from .codec import Encoding, decode_server, encode
from .codes import ErrorCode
from .errors import (
    ClientClosedError,
    ConnectError,
    ConnectionLostError,
    DecodeError,
    DisconnectedError,
    HeraldError,
    InvalidArgumentError,
    ProtocolError,
    ReplyError,
    RequestTimeoutError,
    reply_error,
)
from .lobby import Lobby as LobbyState
from .messages import (
    U32_MAX,
    U64_MAX,
    Act,
    ActReply,
    ClientInfo,
    Command,
    ConnectReply,
    ErrorReply,
    Game,
    History,
    HistoryReply,
    Join,
    Leave,
    Lobby,
    LobbyOff,
    LobbyOffReply,
    LobbyPage,
    LobbyReply,
    LobbyUpdate,
    Ping,
    PingReply,
    Play,
    PlayReply,
    Position,
    Presence,
    PresenceReply,
    PresenceStats,
    PresenceStatsReply,
    Publication,
    Publish,
    PublishReply,
    Seat,
    ServerMessage,
    Sit,
    SitReply,
    Stand,
    StandReply,
    Unseat,
    Unsubscribe,
    Unsubscribed,
    Watch,
    WatchReply,
)
from .protocol import (
    ClientCore,
    Connected,
    ConnectFailed,
    Deliver,
    Event,
    GamePush,
    JoinLeave,
    ReconnectPolicy,
    ReplyReceived,
    Rotation,
    ServerDisconnect,
    StaleSubscription,
    State,
    Subscribed,
    SubscribeDone,
    SubscribeFailed,
    SubscriptionCore,
    SubscriptionEnded,
)
from .transport import Transport, TransportClosed, TransportError, open_transport

__all__ = ["Client", "Disconnected", "HistoryResult", "SubscribeTokenSource", "Subscription", "TokenSource"]

log = logging.getLogger("herald_client")

T = TypeVar("T")
Callback = Callable[[T], Awaitable[None] | None]

TokenSource: TypeAlias = Callable[[], str | Awaitable[str]]
"""A function (plain or async) returning the token to send in ``connect``."""

SubscribeTokenSource: TypeAlias = Callable[[str], str | Awaitable[str]]
"""A function (plain or async) given the channel and returning the subscribe
token to send in that channel's ``subscribe``; called before every
(re)subscribe, so each one carries a fresh token."""

#: Error codes after which a failed ``connect`` is retried rather than final.
_RETRYABLE_CONNECT_ERRORS = frozenset({100, 108, 114})

#: The largest offset the codecs carry (u64); servers stay below 2^53.
MAX_OFFSET = U64_MAX


@dataclass(frozen=True, slots=True)
class Disconnected:
    """A connection ended; delivered to ``on_disconnected``."""

    code: int | None
    """The close or disconnect code; None when the connection dropped."""
    reason: str
    reconnect: bool
    """Whether the client will reconnect (otherwise it is now closed)."""


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """A channel's retained publications and its current position."""

    epoch: str
    offset: int
    publications: list[Publication]


@dataclass(frozen=True, slots=True)
class PresenceStatsResult:
    """How many are subscribed to a channel (see :meth:`Client.presence_stats`)."""

    clients: int
    """Connections subscribed to the channel."""
    users: int
    """Distinct non-empty user ids among them (anonymous ones are not counted)."""


async def _fresh_token(what: str, source: Callable[..., str | Awaitable[str]], *args: str) -> str:
    """Call a token function (plain or async) and check what it returned."""
    token = source(*args)
    if inspect.isawaitable(token):
        token = await token
    _check_str(what, token)
    return token


async def _invoke(cb: Callable[[T], Any], arg: T) -> None:
    try:
        r = cb(arg)
        if inspect.isawaitable(r):
            await r
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("herald_client: application callback %r failed", cb)


class _End:
    """Inbox sentinel: the subscription is over."""


_END = _End()


SubEvent: TypeAlias = Publication | Join | Leave | Subscribed | Unsubscribed


class Subscription:
    """One subscription: iterate it (``async for pub in sub``) or pass
    ``on_publication`` to :meth:`Client.subscribe` — one or the other.

    It lives across reconnects: after each one it is re-subscribed with
    ``recover`` = :attr:`position`, recovered publications arrive first, in
    order and without duplicates, and ``on_resync`` is called when recovery
    was not possible.
    """

    def __init__(
        self,
        client: Client,
        core: SubscriptionCore,
        *,
        on_publication: Callback[Publication] | None,
        on_join: Callback[Join] | None,
        on_leave: Callback[Leave] | None,
        on_subscribed: Callback[Subscribed] | None,
        on_resync: Callback[Subscribed] | None,
        on_unsubscribed: Callback[Unsubscribed] | None,
        max_queue: int,
        token_source: SubscribeTokenSource | None = None,
    ) -> None:
        self._client = client
        self._core = core
        self._token_source = token_source
        self._on_publication = on_publication
        self._on_join = on_join
        self._on_leave = on_leave
        self._on_subscribed = on_subscribed
        self._on_resync = on_resync
        self._on_unsubscribed = on_unsubscribed
        loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[Subscribed] = loop.create_future()
        # Both bounded (max_queue): when the application falls behind, the
        # connection's reader waits, the socket stops being read, and the
        # server's slow-consumer policy applies (3001: the client reconnects
        # and recovers). Memory stays bounded either way.
        #
        # The end: _end() sets _ended (nothing more is queued after it) and
        # queues _END if there is room; if not, the dispatcher sees _ended once
        # it has drained the inbox. Likewise the iterator sees _iter_done.
        self._inbox: asyncio.Queue[SubEvent | _End] = asyncio.Queue(max_queue)
        self._pubs: asyncio.Queue[Publication | _End] = asyncio.Queue(max_queue)
        self._ended = False
        self._ended_event = asyncio.Event()
        self._final: Unsubscribed | None = None
        self._iter_done = False
        self._task = loop.create_task(self._dispatch(), name=f"herald sub {core.channel}")

    @property
    def channel(self) -> str:
        return self._core.channel

    @property
    def position(self) -> Position | None:
        """The last position received (the recovery point; what was received
        is queued for the application); None for patterns and before the
        first reply."""
        return None if self._core.pattern else self._core.position

    @property
    def active(self) -> bool:
        """Subscribed on the current connection."""
        return self._core.active

    @property
    def ended(self) -> bool:
        return self._ended

    async def unsubscribe(self) -> None:
        await self._client.unsubscribe(self.channel)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Publication:
        if self._iter_done and self._pubs.empty():
            raise StopAsyncIteration
        item = await self._pubs.get()
        if isinstance(item, _End):
            self._pubs.put_nowait(item)  # later calls end too (there is room: one was taken)
            raise StopAsyncIteration
        return item

    # -- fed by the client

    async def _push(self, item: SubEvent) -> None:
        """Queue an event for the application. Waits while the queue is full,
        but not past the end of the subscription (the reader must never wait
        for an application that stopped reading a subscription it dropped)."""
        if self._ended:
            return
        try:
            self._inbox.put_nowait(item)
            return
        except asyncio.QueueFull:
            pass
        put = asyncio.ensure_future(self._inbox.put(item))
        ended = asyncio.ensure_future(self._ended_event.wait())
        try:
            await asyncio.wait({put, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            put.cancel()
            ended.cancel()

    def _end(self, exc: BaseException | None = None, final: Unsubscribed | None = None) -> None:
        """No more events; ``final`` (the server ended the subscription) is
        delivered after those already queued."""
        if self._ended:
            return
        self._ended = True
        self._final = final
        self._ended_event.set()
        if not self._ready.done():
            self._ready.set_exception(exc or ClientClosedError("subscription ended"))
            self._ready.exception()  # retrieved here; subscribe() re-raises it
        with contextlib.suppress(asyncio.QueueFull):  # if full, the dispatcher sees _ended
            self._inbox.put_nowait(_END)

    async def _dispatch(self) -> None:
        while not (self._ended and self._inbox.empty()):
            item = await self._inbox.get()
            if isinstance(item, _End):
                break
            await self._deliver(item)
        if self._final is not None:
            await self._deliver(self._final)
        self._iter_done = True
        with contextlib.suppress(asyncio.QueueFull):  # if full, the iterator sees _iter_done
            self._pubs.put_nowait(_END)

    async def _deliver(self, item: SubEvent) -> None:
        if isinstance(item, Publication):
            if self._on_publication is not None:
                await _invoke(self._on_publication, item)
            else:
                await self._pubs.put(item)
        elif isinstance(item, Join):
            if self._on_join is not None:
                await _invoke(self._on_join, item)
        elif isinstance(item, Leave):
            if self._on_leave is not None:
                await _invoke(self._on_leave, item)
        elif isinstance(item, Subscribed):
            if self._on_subscribed is not None:
                await _invoke(self._on_subscribed, item)
            if item.needs_resync and self._on_resync is not None:
                await _invoke(self._on_resync, item)
        elif self._on_unsubscribed is not None:
            await _invoke(self._on_unsubscribed, item)

    def __repr__(self) -> str:
        return f"<Subscription {self.channel!r} position={self.position}>"


class _Refused(TransportClosed):
    """Raised inside a connection: the server refused ``connect`` with a "retry" code."""


class _Terminal(Exception):
    """Raised inside a connection to end the client for good with ``error``."""

    def __init__(self, error: HeraldError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _LobbyLoad:
    """A lobby snapshot being received, and the snapshot once the reply came."""

    lobby: LobbyState
    snapshot: LobbyReply | None = None


@dataclass(slots=True)
class _Outcome:
    connected: bool
    code: int | None
    reason: str
    error: BaseException | None = None
    terminal: HeraldError | None = None
    opened: bool = False
    """A transport was opened: a server was reached (it may have refused ``connect``)."""
    refused: bool = False
    """The server refused ``connect`` with a "retry" code (100/108/114, or 112 with a token function)."""
    connected_for: float = 0.0
    """Seconds from the ``connect`` reply to the end of the connection."""


class Client:
    """A Herald client over WebSocket (``ws://host:port/ws``) or raw TCP
    (``tcp://host:port``, binary encoding only).

    ``url`` may be a list: connection attempts go through it in turn; one that
    does not get through moves on to the next URL at once, and the backoff
    delay is waited once every URL failed in a row, or after a connection that
    worked ended.
    ``encoding`` is ``"json"`` or ``"binary"``. ``token`` and ``name`` are sent
    in ``connect``; ``token`` may also be a function (plain or async) called
    before every connection attempt, so that an expired token (error 112,
    disconnect 3002) is refreshed on reconnect. The client reconnects by itself
    (``reconnect`` policy: exponential backoff with full jitter) whenever the
    connection drops or ends with a "reconnect" code, and re-subscribes with
    recovery.

    :meth:`connect` (or ``async with``) connects explicitly; the first
    command connects if it was not called.

    Options (defaults in brackets): ``request_timeout`` seconds a command
    waits for its reply, also while reconnecting [10]; ``connect_timeout``
    seconds for opening a transport and for the ``connect`` reply [10];
    ``max_message_size`` bytes of the largest message accepted from the
    server [16 MiB]; ``ssl`` an :class:`ssl.SSLContext` for ``wss://`` URLs
    [None: the system's trusted CAs]; ``max_queue`` events buffered per subscription for the
    application [1024] — when a subscription's callback or iterator falls that
    far behind, the client stops reading the connection until it catches up,
    so memory stays bounded and the server's slow-consumer policy (3001, then
    reconnect and recover) decides; a callback that awaits a command of the
    same client while its queue is full therefore waits up to
    ``request_timeout``. ``on_connected(ConnectReply)`` and
    ``on_disconnected(Disconnected)`` are called on every connect and
    disconnect.

    Arguments the protocol cannot carry raise at once, before anything is
    sent: :class:`TypeError` for a wrong type, :class:`InvalidArgumentError`
    (a :class:`ValueError`) for a value out of range.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | TokenSource | None = None,
        encoding: Literal["json", "binary"] | Encoding = "json",
        name: str | None = None,
        reconnect: ReconnectPolicy | None = None,
        request_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        max_message_size: int = 16 << 20,
        max_queue: int = 1024,
        ssl: SSLContext | None = None,
        on_connected: Callback[ConnectReply] | None = None,
        on_disconnected: Callback[Disconnected] | None = None,
        on_lobby_update: Callback[LobbyUpdate] | None = None,
        on_lobby_page: Callback[LobbyPage] | None = None,
        on_game: Callback[Game] | None = None,
        on_seat: Callback[Seat] | None = None,
        on_unseat: Callback[Unseat] | None = None,
    ) -> None:
        self._urls = [url] if isinstance(url, str) else list(url)
        if not self._urls:
            raise InvalidArgumentError("at least one URL is needed")
        for u in self._urls:
            if not isinstance(u, str):
                raise TypeError(f"a URL is a str, not {type(u).__name__}")
            if urlsplit(u).scheme not in ("ws", "wss", "tcp"):
                raise InvalidArgumentError(f"{u!r}: expected ws://, wss:// or tcp://host:port")
        try:
            self._encoding = Encoding(encoding)
        except ValueError:
            raise InvalidArgumentError(f"encoding is 'json' or 'binary', not {encoding!r}") from None
        if self._encoding is Encoding.JSON and any(u.startswith("tcp:") for u in self._urls):
            raise InvalidArgumentError("tcp:// URLs carry the binary encoding only: use encoding='binary'")
        if name is not None:
            _check_str("name", name)
        self._token_source: TokenSource | None = None
        if callable(token):
            self._token_source = token
            token = None
        elif token is not None:
            _check_str("token", token)
        self._core = ClientCore(token=token, name=name)
        self._policy = reconnect or ReconnectPolicy()
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._max_message_size = max_message_size
        _check_uint("max_queue", max_queue, 1 << 31)
        if max_queue < 1:
            raise InvalidArgumentError("max_queue must be at least 1")
        self._max_queue = max_queue
        self._ssl = ssl
        self._on_connected = on_connected
        self._on_disconnected = on_disconnected
        self._on_lobby_update = on_lobby_update
        self._on_lobby_page = on_lobby_page
        self._on_game = on_game
        self._on_seat = on_seat
        self._on_unseat = on_unseat
        self._subs: dict[str, Subscription] = {}
        self._pending: dict[int, asyncio.Future[ServerMessage]] = {}
        # Lobby snapshots being received, by the id of their ``lobby`` command.
        self._lobby_loads: dict[int, _LobbyLoad] = {}
        self._transport: Transport | None = None
        self._runner: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # set while CONNECTED or CLOSED
        self._first: asyncio.Future[None] | None = None
        self._info: ConnectReply | None = None
        self._close_error: HeraldError | None = None
        self._disconnect_push: tuple[int, str] | None = None
        self._callbacks: set[asyncio.Task[None]] = set()
        #: Every subscription's dispatcher still running, also of subscriptions
        #: already ended (delivering what was queued): close() ends them all.
        self._dispatchers: set[asyncio.Task[None]] = set()
        self._current_url: str | None = None

    # ------------------------------------------------------------ public --

    @property
    def state(self) -> State:
        return self._core.state

    @property
    def client_id(self) -> str | None:
        """The server-assigned id of the current (or last) connection."""
        return self._info.client if self._info else None

    @property
    def server_version(self) -> str | None:
        return self._info.version if self._info else None

    @property
    def url(self) -> str | None:
        """The URL of the current (or last) connection."""
        return self._current_url

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        return dict(self._subs)

    async def connect(self) -> None:
        """Connect, and keep connected until :meth:`close`.

        Returns once the first connection is established. Raises
        :class:`ConnectError` if no URL could be reached on the first round,
        a :class:`ReplyError` if the server refused ``connect``, or
        :class:`DisconnectedError` on a "do not reconnect" code.
        """
        if self._core.state is State.CLOSED:
            raise ClientClosedError("client is closed") from self._close_error
        if self._runner is None:
            self._first = asyncio.get_running_loop().create_future()
            self._runner = asyncio.create_task(self._run(), name="herald client")
        if self._first is not None:
            await asyncio.shield(self._first)

    async def close(self) -> None:
        """Close the connection and end every subscription; idempotent."""
        if self._core.state is State.CLOSED and self._runner is None:
            return
        self._core.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        self._finish(ClientClosedError("client closed"))
        # Let the dispatchers deliver what is queued (not the task calling
        # close() itself, e.g. from a callback: it would wait for itself).
        me = asyncio.current_task()
        tasks = [t for t in [*self._dispatchers, *self._callbacks] if t is not me]
        self._subs.clear()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=1.0)
            for t in pending:
                t.cancel()

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def subscribe(
        self,
        channel: str,
        on_publication: Callback[Publication] | None = None,
        *,
        recover: bool = True,
        join_leave: bool = False,
        since: Position | tuple[str, int] | None = None,
        token: str | SubscribeTokenSource | None = None,
        on_join: Callback[Join] | None = None,
        on_leave: Callback[Leave] | None = None,
        on_subscribed: Callback[Subscribed] | None = None,
        on_resync: Callback[Subscribed] | None = None,
        on_unsubscribed: Callback[Unsubscribed] | None = None,
    ) -> Subscription:
        """Subscribe to a channel or pattern; returns once the server agreed.

        ``recover``: after a reconnect, ask for the publications missed
        (exact channels; patterns cannot recover). ``since``: start from this
        position instead of "now" (e.g. one saved by a previous run).
        ``token``: a subscribe token for a private channel (docs/protocol.md
        §5d), sent with every (re)subscribe; or a function (plain or async)
        given the channel, called before each one, so a token that expires is
        replaced (a failing function ends the subscription with its error,
        and after a reconnect calls ``on_unsubscribed`` with code 101).
        ``on_resync`` is called when publications may have been lost.
        Errors raise the :class:`ReplyError` of the code (109 invalid channel,
        104 permission denied, 112 token expired, ...).
        """
        _check_str("channel", channel)
        pos = _position("since", since)
        source: SubscribeTokenSource | None = None
        if callable(token):
            source, token = token, None
        elif token is not None:
            _check_str("token", token)
        await self._start()
        if channel in self._subs:
            raise reply_error(105, f"already subscribed to {channel!r}")
        core = self._core.add_subscription(
            channel, recover=recover, join_leave=join_leave, since=pos, token=token
        )
        sub = Subscription(
            self,
            core,
            on_publication=on_publication,
            on_join=on_join,
            on_leave=on_leave,
            on_subscribed=on_subscribed,
            on_resync=on_resync,
            on_unsubscribed=on_unsubscribed,
            max_queue=self._max_queue,
            token_source=source,
        )
        self._subs[channel] = sub
        self._dispatchers.add(sub._task)
        sub._task.add_done_callback(self._dispatchers.discard)
        # (When not connected, the subscribe is sent once connected.)
        connected = self._core.state is State.CONNECTED and self._transport is not None
        if connected and await self._refresh_token(sub):
            await self._send_subscribe(core)
        try:
            await asyncio.wait_for(asyncio.shield(sub._ready), self._request_timeout)
        except TimeoutError:
            self._drop_sub(channel, RequestTimeoutError(f"subscribe {channel!r} timed out"))
            raise RequestTimeoutError(f"subscribe {channel!r}: no reply in time") from None
        except BaseException:
            self._drop_sub(channel, None)
            raise
        return sub

    async def unsubscribe(self, channel: str) -> None:
        """End a subscription. Raises :class:`NotSubscribedError` (106) if there is none."""
        _check_str("channel", channel)
        await self._start()
        sub = self._subs.get(channel)
        if sub is None:
            await self._request(lambda id: Unsubscribe(id, channel))
            return
        active = sub._core.active
        self._drop_sub(channel, None)
        if self._core.state is not State.CONNECTED or not active:
            # Nothing subscribed server-side (a subscribe still in flight comes
            # back stale and is undone); the next connection won't re-subscribe.
            return
        # Gone with the connection, or already gone server-side: either way, gone.
        with contextlib.suppress(ConnectionLostError, ReplyError):
            await self._request(lambda id: Unsubscribe(id, channel))

    async def publish(self, channel: str, data: Any) -> Position:
        """Publish ``data`` (bytes as they are; anything else as compact JSON
        text); returns the publication's (epoch, offset).

        Raises :class:`TypeError` (before sending) for data that is not bytes
        and not JSON-serializable, and :class:`InvalidArgumentError` for NaN or
        infinite floats, which JSON cannot carry."""
        _check_str("channel", channel)
        payload = _payload(data)
        reply = _expect(await self._request(lambda id: Publish(id, channel, payload)), PublishReply)
        return Position(reply.epoch, reply.offset)

    async def history(
        self, channel: str, since: Position | tuple[str, int] | None = None, limit: int = 0
    ) -> HistoryResult:
        """Retained publications of ``channel`` after ``since`` (all if None),
        at most ``limit`` (0 = server default)."""
        _check_str("channel", channel)
        pos = _position("since", since)
        _check_uint("limit", limit, U32_MAX)
        reply = _expect(await self._request(lambda id: History(id, channel, pos, limit)), HistoryReply)
        pubs = [Publication(channel, it.offset, it.data) for it in reply.publications]
        return HistoryResult(reply.epoch, reply.offset, pubs)

    async def presence(self, channel: str) -> list[ClientInfo]:
        """The connections currently subscribed to ``channel``."""
        _check_str("channel", channel)
        reply = _expect(await self._request(lambda id: Presence(id, channel)), PresenceReply)
        return list(reply.clients)

    async def presence_stats(self, channel: str) -> PresenceStatsResult:
        """How many connections are subscribed to ``channel``, and how many
        distinct non-empty user ids among them: cheap on any channel size (the
        server keeps counters), where :meth:`presence` lists every member."""
        _check_str("channel", channel)
        reply = _expect(await self._request(lambda id: PresenceStats(id, channel)), PresenceStatsReply)
        return PresenceStatsResult(reply.clients, reply.users)

    # ------------------------------------------------------------ games --
    # docs/protocol.md §5e. Game data is opaque: ``data`` arguments are bytes,
    # or any other value sent as its JSON text (as ``publish`` does). Nothing
    # here is redone after a reconnect: call ``lobby`` again for a fresh
    # snapshot, and ``sit`` again for the same table to take the seat back (a
    # seat had with ``play`` too).
    # Game pushes go to the ``on_lobby_update``, ``on_lobby_page``, ``on_game``, ``on_seat`` and
    # ``on_unseat`` callbacks, started in arrival order.

    async def lobby(self, path: str = "", *, into: LobbyState | None = None) -> LobbyReply:
        """Subscribe to the lobby ("" = every table) or a branch of it; returns
        the whole snapshot (``seq``, ``tables`` in ascending table id), after
        which ``on_lobby_update`` receives the changes (apply them with
        :class:`~herald_client.Lobby`). A large snapshot comes in ``lobby_page``
        pushes before the reply, perhaps with ``lobby_update`` pushes between
        them (§5e); this gathers them all, and the ``seq`` returned is the last
        one they reached.

        With ``into`` (a :class:`~herald_client.Lobby` for the same path), the
        snapshot is also received into it as the messages arrive (``begin`` at
        sending, ``finish`` at the reply, before any later push is handled)."""
        _check_str("path", path)
        if into is not None and into.path != path:
            raise InvalidArgumentError(f"the Lobby follows {into.path!r}, not {path!r}")
        load = _LobbyLoad(into if into is not None else LobbyState(path))
        load.lobby.begin()
        sent = 0

        def make(id: int) -> Command:
            nonlocal sent
            sent = id
            self._lobby_loads[id] = load
            return Lobby(id, path)

        try:
            _expect(await self._request(make), LobbyReply)
        finally:
            self._lobby_loads.pop(sent, None)
        # Taken when the reply arrived (see _handle): ``into`` may have moved on since.
        assert load.snapshot is not None
        return load.snapshot

    async def lobby_off(self, path: str = "") -> None:
        """End the lobby subscription made with the same path."""
        _check_str("path", path)
        _expect(await self._request(lambda id: LobbyOff(id, path)), LobbyOffReply)

    async def sit(self, table: int, *, seat: int | None = None, data: Any = None) -> SitReply:
        """Take a seat at ``table`` (any free one unless ``seat`` is given), or
        take one's seat back after a reconnect; returns the seat and the
        game's private snapshot (``data``)."""
        _check_uint("table", table, U64_MAX)
        if seat is not None:
            _check_uint("seat", seat, U32_MAX)
        payload = b"" if data is None else _payload(data)
        return _expect(await self._request(lambda id: Sit(id, table, seat, payload)), SitReply)

    async def play(
        self,
        game: str = "",
        seats: int | None = None,
        *,
        attrs: Mapping[str, str | int | float | bool] | None = None,
        private: bool = False,
        code: str | None = None,
        data: Any = None,
    ) -> PlayReply:
        """A seat at a table made on demand (docs/protocol.md §5f), in one of
        three forms:

        - ``play("holdem", 6, attrs={...})``: join or create: a seat at a public
          table of this game, seat count and attributes that has one free, else
          a new one;
        - ``play("holdem", 6, attrs={...}, private=True)``: a new private table;
          the reply's ``code`` is what friends join it with;
        - ``play(code="K7F3QX")``: a seat at the private table of that code.

        ``attrs`` are scalars (a new table takes them as its parameters;
        ``timing`` is its timing profile); ``data`` goes to the game with the
        seat, as in :meth:`sit`. Returns the table, the seat, the private
        snapshot (``data``), the code (private tables only) and whether this
        call ``created`` the table; the client is then seated as after ``sit``,
        and after a reconnect takes the seat back with ``sit(table)``. The
        server's refusals raise :class:`ReplyError`: 120 unknown game, 121
        unknown code, 116 table full, 107 a cap, 103 bad arguments."""
        _check_str("game", game)
        if seats is not None:
            _check_uint("seats", seats, U32_MAX)
        if code is not None:
            _check_str("code", code)
        if attrs is not None and not isinstance(attrs, Mapping):
            raise TypeError(f"attrs is a mapping, not {type(attrs).__name__}")
        wanted = b"{}" if attrs is None else _payload(dict(attrs))
        payload = b"" if data is None else _payload(data)
        reply = await self._request(lambda id: Play(id, game, seats, wanted, bool(private), code, payload))
        return _expect(reply, PlayReply)

    async def watch(self, table: int) -> bytes:
        """Watch ``table``; returns the game's public snapshot."""
        _check_uint("table", table, U64_MAX)
        return _expect(await self._request(lambda id: Watch(id, table)), WatchReply).data

    async def stand(self, table: int) -> None:
        """Give up the seat at ``table``, or stop watching it."""
        _check_uint("table", table, U64_MAX)
        _expect(await self._request(lambda id: Stand(id, table)), StandReply)

    async def act(self, table: int, data: Any) -> None:
        """Send a game action; returns once the game accepted it (a refusal
        raises :class:`ReplyError` with code 118)."""
        _check_uint("table", table, U64_MAX)
        payload = _payload(data)
        _expect(await self._request(lambda id: Act(id, table, payload)), ActReply)

    async def ping(self) -> float:
        """Round trip to the server; returns its duration in seconds."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        _expect(await self._request(lambda id: Ping(id)), PingReply)
        return loop.time() - start

    # --------------------------------------------------------- requests --

    def _check_closed(self) -> None:
        if self._core.state is State.CLOSED:
            raise ClientClosedError("client is closed") from self._close_error

    async def _start(self) -> None:
        """Raise if closed; connect first if :meth:`connect` was never called."""
        self._check_closed()
        if self._runner is None:
            await self.connect()

    async def _request(self, make: Callable[[int], Command]) -> ServerMessage:
        await self._start()
        fut: asyncio.Future[ServerMessage] | None = None
        id = 0
        try:
            async with asyncio.timeout(self._request_timeout):
                while self._core.state is not State.CONNECTED:
                    self._check_closed()
                    await self._wake.wait()
                transport = self._transport
                if transport is None:  # pragma: no cover - CONNECTED implies a transport
                    raise ConnectionLostError("not connected")
                id = self._core.next_id()
                fut = asyncio.get_running_loop().create_future()
                self._pending[id] = fut
                try:
                    await transport.send(encode(make(id), self._encoding))
                except TransportClosed as e:
                    raise ConnectionLostError(str(e)) from None
                reply = await fut
        except TimeoutError:
            raise RequestTimeoutError("no reply in time") from None
        finally:
            if id:
                self._pending.pop(id, None)
        if isinstance(reply, ErrorReply):
            raise reply_error(reply.code, reply.message)
        return reply

    async def _refresh_token(self, sub: Subscription) -> bool:
        """A fresh subscribe token for ``sub`` from its token function, if it
        has one; False if the function failed (the subscription then ends)."""
        if sub._token_source is None:
            return True
        try:
            token = await _fresh_token("subscribe token", sub._token_source, sub.channel)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("herald_client: the subscribe token function of %r failed: %r", sub.channel, e)
            if self._subs.get(sub.channel) is sub:
                final = None
                if sub._ready.done():  # a re-subscription cannot be made: tell the application
                    final = Unsubscribed(
                        sub.channel, ErrorCode.UNAUTHORIZED, f"subscribe token function failed: {e!r}"
                    )
                self._subs.pop(sub.channel, None)
                self._core.remove_subscription(sub.channel)
                sub._end(e, final)
            return False
        sub._core.token = token
        return True

    async def _send_subscribe(self, core: SubscriptionCore) -> None:
        """Send ``core``'s subscribe on the current connection, unless one was
        sent meanwhile (while a token function ran) or it ended."""
        if (
            self._core.state is State.CONNECTED
            and self._transport is not None
            and not core.removed
            and not core.pending_id
            and not core.active
        ):
            await self._send_quiet(self._core.subscribe_command(core))

    async def _send_quiet(self, cmd: Command) -> None:
        """Send without waiting for a reply; a dead connection is noticed by the reader."""
        transport = self._transport
        if transport is not None:
            with contextlib.suppress(TransportClosed):
                await transport.send(encode(cmd, self._encoding))

    def _drop_sub(self, channel: str, exc: BaseException | None) -> None:
        sub = self._subs.pop(channel, None)
        self._core.remove_subscription(channel)
        if sub is not None:
            sub._end(exc)

    # ----------------------------------------------------------- runner --

    async def _run(self) -> None:
        rotation = Rotation(len(self._urls), self._policy)
        tried = 0
        ever_connected = False
        reached = False
        try:
            while True:
                url = self._urls[rotation.url]
                tried += 1
                outcome = await self._session(url)
                reached = reached or outcome.opened
                ever_connected = ever_connected or outcome.connected
                if outcome.terminal is not None:
                    self._finish(outcome.terminal)
                    return
                if self._core.state is State.CLOSED:
                    self._finish(DisconnectedError(outcome.code, outcome.reason))
                    return
                if not ever_connected and not reached and tried >= len(self._urls):
                    # No URL could even be reached: report it rather than wait.
                    # (A server that was reached but refused with a "retry"
                    # code, 100/108/114, or 112 with a token function, is
                    # retried with backoff.)
                    err = ConnectError(f"could not connect to {', '.join(self._urls)}: {outcome.reason}")
                    err.__cause__ = outcome.error
                    self._core.close()
                    self._finish(err)
                    return
                wait = rotation.after(
                    connected=outcome.connected, refused=outcome.refused, connected_for=outcome.connected_for
                )
                if not wait:
                    # Did not get through, and not every URL failed yet in
                    # this round: the next URL at once.
                    log.debug("herald_client: %s failed (%s); trying the next URL", url, outcome.reason)
                    continue
                if rotation.exhausted():
                    self._core.close()
                    self._finish(ConnectionLostError(f"gave up after {rotation.attempt} attempts"))
                    return
                delay = rotation.delay()
                log.debug("herald_client: reconnecting in %.3fs (%s)", delay, outcome.reason)
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # pragma: no cover - a bug; do not die silently
            log.exception("herald_client: connection task failed")
            self._core.close()
            self._finish(HeraldError(f"connection task failed: {e!r}"))

    async def _session(self, url: str) -> _Outcome:
        """One connection, from opening to its end."""
        if self._token_source is not None:
            # A fresh token for every attempt: an expired one (3002, 112) is
            # replaced on reconnect.
            try:
                token = await _fresh_token("token", self._token_source)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("herald_client: the token function failed: %r", e)
                return _Outcome(False, None, f"token function failed: {e!r}", e)
            self._core.token = token
        try:
            transport = await open_transport(
                url,
                self._encoding,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
                ssl_context=self._ssl,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # TransportError, or anything a failed handshake raises
            if not isinstance(e, TransportError):
                log.debug("herald_client: opening %s failed", url, exc_info=True)
            return _Outcome(False, None, str(e) or type(e).__name__, e)
        self._transport = transport
        self._current_url = url
        self._disconnect_push = None
        loop = asyncio.get_running_loop()
        connected = False
        connected_at = 0.0
        code: int | None = None
        reason = ""
        terminal: HeraldError | None = None
        refused = False
        recv: asyncio.Task[str | bytes] | None = None
        try:
            await transport.send(encode(self._core.start_connect(), self._encoding))
            deadline = loop.time() + self._connect_timeout
            probe_sent = False
            while True:
                if not connected:
                    timeout: float | None = max(0.0, deadline - loop.time())
                else:
                    # Silence for ping_interval: probe with a ping; silence for
                    # twice that: the connection is dead (docs/protocol.md §5).
                    interval = self._info.ping_interval if self._info else 0
                    timeout = float(interval) if interval > 0 else None
                if recv is None:
                    # One receive at a time, never cancelled on a timeout, so
                    # that a timeout cannot lose half a frame.
                    recv = asyncio.ensure_future(transport.recv())
                done, _ = await asyncio.wait({recv}, timeout=timeout)
                if not done:
                    if not connected:
                        raise TransportClosed(None, "no connect reply in time")
                    if probe_sent:
                        raise TransportClosed(None, "server silent")
                    probe_sent = True
                    await transport.send(encode(Ping(self._core.next_id()), self._encoding))
                    continue
                frame = recv.result()
                recv = None
                probe_sent = False
                try:
                    msg = decode_server(frame, self._encoding)
                except DecodeError as e:
                    log.warning("herald_client: undecodable message from %s: %s", url, e)
                    raise TransportClosed(None, f"undecodable server message: {e}") from None
                except Exception as e:  # a decoder bug: still no crash, and logged as one
                    log.exception("herald_client: decoding a message from %s failed", url)
                    raise TransportClosed(None, f"undecodable server message: {e!r}") from None
                for event in self._core.receive(msg):
                    if isinstance(event, Connected):
                        connected = True
                        connected_at = loop.time()
                    await self._handle(event)
        except TransportClosed as e:
            code, reason = e.code, e.reason
            refused = isinstance(e, _Refused)
        except _Terminal as t:
            terminal = t.error
        finally:
            self._transport = None
            if recv is not None:
                if recv.done():
                    if not recv.cancelled():
                        recv.exception()  # retrieved: it ended this connection
                else:
                    recv.cancel()
            if terminal is not None or self._core.state is State.CLOSED:
                await transport.close()
            else:
                transport.abort()
        if self._disconnect_push is not None:
            code, reason = self._disconnect_push
        if terminal is not None:
            self._core.close()
        again = self._core.connection_lost(code)
        if again:
            self._wake.clear()
        else:
            self._wake.set()
        lost = ConnectionLostError(f"connection lost: {code} {reason}".rstrip())
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(lost)
        self._pending.clear()
        self._lobby_loads.clear()
        if connected and self._on_disconnected is not None:
            self._callback(self._on_disconnected, Disconnected(code, reason, again and terminal is None))
        connected_for = loop.time() - connected_at if connected else 0.0
        return _Outcome(
            connected, code, reason, None, terminal, opened=True, refused=refused, connected_for=connected_for
        )

    async def _handle(self, event: Event) -> None:
        if isinstance(event, Deliver):
            if (s := self._sub_of(event.sub)) is not None:
                await s._push(event.publication)
        elif isinstance(event, ReplyReceived):
            reply = event.reply
            # A lobby snapshot ends here, before any later push is applied.
            load = self._lobby_loads.pop(reply.id, None)
            if load is not None and isinstance(reply, LobbyReply):
                lobby = load.lobby
                lobby.finish(reply.seq, reply.tables)
                tables = tuple(sorted(lobby.tables.values(), key=lambda t: t.table))
                load.snapshot = LobbyReply(reply.id, lobby.seq, tables)
            fut = self._pending.pop(reply.id, None)
            if fut is not None and not fut.done():
                fut.set_result(reply)
        elif isinstance(event, SubscribeDone):
            if (s := self._sub_of(event.sub)) is not None:
                await s._push(event.subscribed)
                if not s._ready.done():
                    s._ready.set_result(event.subscribed)
        elif isinstance(event, JoinLeave):
            if (s := self._sub_of(event.sub)) is not None:
                await s._push(event.event)
        elif isinstance(event, Connected):
            self._info = event.reply
            self._wake.set()
            if self._first is not None and not self._first.done():
                self._first.set_result(None)
            if self._on_connected is not None:
                self._callback(self._on_connected, event.reply)
            # Fresh subscribe tokens first (for those with a token function),
            # then every subscription not yet sent on this connection.
            for s in list(self._subs.values()):
                if s._token_source is not None and not s._core.pending_id and not s._core.active:
                    await self._refresh_token(s)
            for cmd in self._core.resubscribe_commands():
                await self._send_quiet(cmd)
        elif isinstance(event, SubscribeFailed):
            error = reply_error(event.error.code, event.error.message)
            sub = self._subs.get(event.sub.channel)
            if sub is not None and sub._core is event.sub:
                del self._subs[event.sub.channel]
                final = None
                if sub._ready.done():  # a re-subscription failed: tell the application
                    final = Unsubscribed(sub.channel, event.error.code, event.error.message)
                sub._end(error, final)
        elif isinstance(event, SubscriptionEnded):
            sub = self._subs.get(event.sub.channel)
            if sub is not None and sub._core is event.sub:
                del self._subs[event.sub.channel]
                sub._end(reply_error(event.push.code, event.push.reason), event.push)
        elif isinstance(event, StaleSubscription):
            if event.channel not in self._subs:
                await self._send_quiet(Unsubscribe(0, event.channel))
        elif isinstance(event, ServerDisconnect):
            self._disconnect_push = (event.push.code, event.push.reason)
        elif isinstance(event, GamePush):
            push = event.push
            if isinstance(push, LobbyUpdate):
                for load in self._lobby_loads.values():
                    load.lobby.apply(push)
                if self._on_lobby_update is not None:
                    self._callback(self._on_lobby_update, push)
            elif isinstance(push, LobbyPage):
                for load in self._lobby_loads.values():
                    load.lobby.page(push)
                if self._on_lobby_page is not None:
                    self._callback(self._on_lobby_page, push)
            elif isinstance(push, Game):
                if self._on_game is not None:
                    self._callback(self._on_game, push)
            elif isinstance(push, Seat):
                if self._on_seat is not None:
                    self._callback(self._on_seat, push)
            elif self._on_unseat is not None:
                self._callback(self._on_unseat, push)
        elif isinstance(event, ConnectFailed):
            error = reply_error(event.error.code, event.error.message)
            retry = event.error.code in _RETRYABLE_CONNECT_ERRORS or (
                # An expired token is refreshed on the next attempt, if it can be.
                event.error.code == ErrorCode.TOKEN_EXPIRED and self._token_source is not None
            )
            if retry:
                raise _Refused(None, f"connect refused: {error}")
            raise _Terminal(error)

    def _sub_of(self, core: SubscriptionCore) -> Subscription | None:
        """The application's subscription for ``core``, if it still has it."""
        sub = self._subs.get(core.channel)
        return sub if sub is not None and sub._core is core else None

    def _callback(self, cb: Callable[[T], Any], arg: T) -> None:
        task = asyncio.get_running_loop().create_task(_invoke(cb, arg))
        self._callbacks.add(task)
        task.add_done_callback(self._callbacks.discard)

    def _finish(self, error: HeraldError) -> None:
        """The client is closed for good, because of ``error``."""
        self._core.close()
        if self._close_error is None:
            self._close_error = error
        self._wake.set()
        if self._first is not None and not self._first.done():
            self._first.set_exception(error)
            self._first.exception()  # retrieved: connect() re-raises it if awaiting
        closed = ClientClosedError(str(error))
        closed.__cause__ = error
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(closed)
        self._pending.clear()
        self._lobby_loads.clear()
        for sub in self._subs.values():
            sub._end(closed)


def _payload(data: Any) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except TypeError as e:
        raise TypeError(f"publish: data is bytes or a JSON-serializable value: {e}") from None
    except ValueError as e:  # NaN, infinities, circular references
        raise InvalidArgumentError(f"publish: data cannot be written as JSON: {e}") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError("publish: data holds a lone surrogate, which UTF-8 cannot carry") from None


def _check_str(what: str, value: object) -> None:
    """A string field: a ``str`` that UTF-8 can carry (no lone surrogates)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{what} holds a lone surrogate, which UTF-8 cannot carry") from None


def _check_uint(what: str, value: object, limit: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} is an int, not {type(value).__name__}")
    if not 0 <= value <= limit:
        raise InvalidArgumentError(f"{what} must be in 0..{limit}, not {value}")


def _position(what: str, value: Position | tuple[str, int] | None) -> Position | None:
    """A ``(epoch, offset)`` argument, checked."""
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != 2:
        raise TypeError(f"{what} is an (epoch, offset) pair, not {value!r}")
    epoch, offset = value
    _check_str(f"{what} epoch", epoch)
    _check_uint(f"{what} offset", offset, MAX_OFFSET)
    return Position(epoch, offset)


R = TypeVar("R", bound=ServerMessage)


def _expect(reply: ServerMessage, kind: type[R]) -> R:
    """The reply, if it is of the type the command calls for."""
    if not isinstance(reply, kind):
        raise ProtocolError(f"expected a {kind.__name__}, the server answered {reply!r}")
    return reply
