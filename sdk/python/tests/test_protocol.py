"""The I/O-free client state machine: states, reconnect rules, backoff,
recovery positions, duplicate skipping and routing — no sockets needed."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from herald_client.codes import DisconnectCode, should_reconnect
from herald_client.messages import (
    ConnectReply,
    Disconnect,
    ErrorReply,
    Item,
    Join,
    PingReply,
    Position,
    Publication,
    SubscribeReply,
    Unsubscribed,
)
from herald_client.protocol import (
    ClientCore,
    Connected,
    ConnectFailed,
    Deliver,
    JoinLeave,
    ReconnectPolicy,
    ReplyReceived,
    Rotation,
    ServerDisconnect,
    StaleSubscription,
    State,
    SubscribeDone,
    SubscribeFailed,
    SubscriptionEnded,
    channel_matches,
)


@pytest.mark.parametrize(
    ("code", "again"),
    [
        (None, True),
        (1000, True),
        (1001, True),
        (1002, False),
        (1006, True),
        (1007, False),
        (1009, False),
        (1011, True),
        (3000, True),
        (3001, True),
        (3004, True),
        (3277, True),
        (3499, True),
        (3500, False),
        (3503, False),
        (3999, False),
        (4000, True),
    ],
)
def test_reconnect_rule(code: int | None, again: bool) -> None:
    assert should_reconnect(code) is again


def test_backoff_is_full_jitter_and_bounded() -> None:
    p = ReconnectPolicy(initial_delay=0.5, max_delay=8.0, multiplier=2.0)
    assert [p.delay(n, lambda: 1.0) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert p.delay(3, lambda: 0.0) == 0.0
    assert p.delay(10_000, lambda: 1.0) == 8.0  # no overflow
    for n in range(20):
        assert 0.0 <= p.delay(n) <= min(8.0, 0.5 * 2**n)


def one() -> float:
    """A "random" draw at the top: the delay is its upper bound."""
    return 1.0


def test_rotation_skips_unreachable_urls_and_backs_off_per_round() -> None:
    """Several URLs: an attempt that does not get through goes to the next URL
    at once; a whole round of them waits the backoff delay, the n-th
    consecutive failed round the n-th delay (the same rule as TypeScript)."""
    r = Rotation(3, ReconnectPolicy(initial_delay=5.0, max_delay=40.0, max_attempts=3))
    urls = [r.url]
    # The first connect: URL 0 and 1 dead, 2 connects — no wait.
    assert r.after(connected=False) is False
    urls.append(r.url)
    assert r.after(connected=False) is False
    urls.append(r.url)
    assert urls == [0, 1, 2] and r.attempt == 0
    # Connected on 2 for a moment (less than stable_after), then dropped: wait,
    # then the next URL (0).
    assert r.after(connected=True, connected_for=0.1) is True
    assert (r.url, r.delay(one), r.attempt) == (0, 5.0, 1)
    # A whole round fails: the next URL at once twice, then the next delay.
    rounds = []
    for _ in range(2):
        waits = [r.after(connected=False) for _ in range(3)]
        assert waits == [False, False, True]
        assert not r.exhausted()
        rounds.append(r.delay(one))
    assert rounds == [10.0, 20.0] and r.url == 0
    # max_attempts (3) failed rounds: give up after the next round.
    assert [r.after(connected=False) for _ in range(3)] == [False, False, True]
    assert r.exhausted()


def test_rotation_refusals_and_stable_connections() -> None:
    r = Rotation(2, ReconnectPolicy(initial_delay=1.0, stable_after=5.0))
    # A server reached that refused connect with a "retry" code waits the
    # delay (it is up; another node may not refuse) and starts a new round.
    assert r.after(connected=False) is False  # URL 0 dead
    assert r.after(connected=False, refused=True) is True  # URL 1 refused
    assert (r.url, r.delay(one)) == (0, 1.0)
    assert r.after(connected=False) is False, "a new round after the refusal"
    # A connection that lasted stable_after restarts the count.
    assert r.after(connected=True, connected_for=5.0) is True
    assert (r.attempt, r.delay(one)) == (0, 1.0)
    # One URL: every failure is a whole round.
    single = Rotation(1, ReconnectPolicy(initial_delay=1.0))
    assert [single.after(connected=False) for _ in range(3)] == [True, True, True]
    assert single.url == 0
    with pytest.raises(ValueError):
        Rotation(0, ReconnectPolicy())


@pytest.mark.parametrize(
    ("pattern", "channel", "match"),
    [
        ("news.*", "news.sport", True),
        ("news.*", "news", False),
        ("news.*", "news.sport.uk", False),
        ("news.>", "news.sport", True),
        ("news.>", "news.sport.uk", True),
        ("news.>", "news", False),
        (">", "anything", True),
        (">", "a.b.c", True),
        ("*.b", "a.b", True),
        ("*.b", "a.c", False),
        ("a.*.c", "a.b.c", True),
        ("news.sport", "news.sport", True),
    ],
)
def test_channel_matches(pattern: str, channel: str, match: bool) -> None:
    assert channel_matches(pattern, channel) is match


def state_of(core: ClientCore) -> State:
    """The state, read through a call (so the type checker does not pin it)."""
    return core.state


def connected_core() -> ClientCore:
    core = ClientCore(token="t", name="n")
    assert core.state is State.DISCONNECTED
    cmd = core.start_connect()
    assert (cmd.token, cmd.name) == ("t", "n") and cmd.id
    assert state_of(core) is State.CONNECTING
    events = core.receive(ConnectReply(cmd.id, "c1", "0.1.0", 25))
    assert events == [Connected(ConnectReply(cmd.id, "c1", "0.1.0", 25))]
    assert state_of(core) is State.CONNECTED
    return core


def offsets(events: Sequence[object]) -> list[int]:
    return [e.publication.offset for e in events if isinstance(e, Deliver)]


def test_states() -> None:
    core = connected_core()
    assert core.connection_lost(None) is True
    assert core.state is State.DISCONNECTED
    core.start_connect()
    assert core.connection_lost(3500) is False
    assert state_of(core) is State.CLOSED
    with pytest.raises(RuntimeError):
        core.start_connect()


@pytest.mark.parametrize("code", [DisconnectCode.BROKER_STATE_LOST, 3277])
def test_broker_state_lost_reconnects_and_recovers(code: int) -> None:
    """3004 (and any unknown code of 3000–3499): reconnect, re-subscribe with
    recovery; the recovery tells whether anything was lost."""
    assert DisconnectCode(3004).name == "BROKER_STATE_LOST"
    core = connected_core()
    sub = core.add_subscription("news")
    core.receive(SubscribeReply(core.subscribe_command(sub).id, "e", 7))
    # Raw TCP gets the code in a disconnect push, WebSocket as its close code.
    push = Disconnect(code, "broker state lost")
    assert core.receive(push) == [ServerDisconnect(push)]
    assert core.connection_lost(code) is True
    assert state_of(core) is State.DISCONNECTED
    core.start_connect()
    core.receive(ConnectReply(core._connect_id, "c2", "v", 25))
    [cmd] = core.resubscribe_commands()
    assert cmd.recover == Position("e", 7)
    [done] = core.receive(SubscribeReply(cmd.id, "e", 9, False))
    assert isinstance(done, SubscribeDone) and done.subscribed.needs_resync


def test_connect_refused() -> None:
    core = ClientCore()
    cmd = core.start_connect()
    assert core.receive(ErrorReply(cmd.id, 101, "no")) == [ConnectFailed(ErrorReply(cmd.id, 101, "no"))]
    assert core.state is State.CONNECTING


def test_ids_are_non_zero_and_wrap() -> None:
    core = ClientCore()
    core._last_id = 0xFFFF_FFFE
    assert [core.next_id(), core.next_id(), core.next_id()] == [0xFFFF_FFFF, 1, 2]


def test_recovery_delivers_missed_publications_once_in_order() -> None:
    core = connected_core()
    sub = core.add_subscription("news")
    cmd = core.subscribe_command(sub)
    assert cmd.recover is None
    events = core.receive(SubscribeReply(cmd.id, "e", 5))
    assert isinstance(events[0], SubscribeDone) and not events[0].subscribed.needs_resync
    assert sub.position == Position("e", 5)

    assert offsets(core.receive(Publication("news", 6, b"6"))) == [6]
    assert offsets(core.receive(Publication("news", 7, b"7"))) == [7]
    assert offsets(core.receive(Publication("news", 7, b"7"))) == []  # duplicate

    core.connection_lost(None)
    assert offsets(core.receive(Publication("news", 8, b"8"))) == []  # not active
    core.start_connect()
    assert core.resubscribe_commands() == []  # only after the connect reply
    connect_id = core._connect_id
    core.receive(ConnectReply(connect_id, "c2", "0.1.0", 25))
    [again] = core.resubscribe_commands()
    assert again.recover == Position("e", 7) and again.channel == "news"
    assert core.resubscribe_commands() == []  # not twice on one connection

    reply = SubscribeReply(again.id, "e", 9, True, tuple(Item(o, str(o).encode()) for o in (6, 7, 8, 9)))
    events = core.receive(reply)
    done = events[0]
    assert isinstance(done, SubscribeDone)
    assert done.subscribed.recovered and done.subscribed.resubscribed
    assert not done.subscribed.needs_resync
    assert offsets(events) == [8, 9]  # 6 and 7 were delivered before
    assert offsets(core.receive(Publication("news", 9, b"9"))) == []
    assert offsets(core.receive(Publication("news", 10, b"10"))) == [10]


def test_epoch_change_resets_positions_and_asks_for_resync() -> None:
    core = connected_core()
    sub = core.add_subscription("news")
    core.receive(SubscribeReply(core.subscribe_command(sub).id, "old", 40))
    core.connection_lost(None)
    core.start_connect()
    core.receive(ConnectReply(core._connect_id, "c", "v", 25))
    [cmd] = core.resubscribe_commands()
    assert cmd.recover == Position("old", 40)
    events = core.receive(SubscribeReply(cmd.id, "new", 2, False, (Item(1, b"a"), Item(2, b"b"))))
    done = events[0]
    assert isinstance(done, SubscribeDone) and done.subscribed.needs_resync
    assert offsets(events) == [1, 2]
    assert sub.position == Position("new", 2)
    assert offsets(core.receive(Publication("news", 3, b"c"))) == [3]


def test_no_recover_option_and_since() -> None:
    core = connected_core()
    plain = core.add_subscription("a", recover=False)
    core.receive(SubscribeReply(core.subscribe_command(plain).id, "e", 3))
    since = core.add_subscription("b", since=Position("e", 1))
    cmd = core.subscribe_command(since)
    assert cmd.recover == Position("e", 1)
    events = core.receive(SubscribeReply(cmd.id, "e", 3, True, (Item(2, b"x"), Item(3, b"y"))))
    assert offsets(events) == [2, 3]
    core.connection_lost(None)
    core.start_connect()
    core.receive(ConnectReply(core._connect_id, "c", "v", 25))
    cmds = {c.channel: c for c in core.resubscribe_commands()}
    assert cmds["a"].recover is None  # recover=False: a fresh subscribe...
    events = core.receive(SubscribeReply(cmds["a"].id, "e", 9))
    assert isinstance(events[0], SubscribeDone) and events[0].subscribed.needs_resync  # ...told so
    assert cmds["b"].recover == Position("e", 3)


def test_patterns_route_and_never_recover() -> None:
    core = connected_core()
    exact = core.add_subscription("news.sport")
    pattern = core.add_subscription("news.*", join_leave=False)
    core.receive(SubscribeReply(core.subscribe_command(exact).id, "e", 0))
    core.receive(SubscribeReply(core.subscribe_command(pattern).id, "", 0))
    events = core.receive(Publication("news.sport", 1, b"x"))
    assert [e.sub.channel for e in events if isinstance(e, Deliver)] == ["news.sport", "news.*"]
    events = core.receive(Publication("news.other", 1, b"y"))
    assert [e.sub.channel for e in events if isinstance(e, Deliver)] == ["news.*"]
    assert core.receive(Publication("sport", 1, b"z")) == []
    joins = core.receive(Join("news.sport", "c9", "u"))
    assert [e.sub.channel for e in joins if isinstance(e, JoinLeave)] == ["news.sport", "news.*"]

    core.connection_lost(None)
    core.start_connect()
    core.receive(ConnectReply(core._connect_id, "c", "v", 25))
    cmds = {c.channel: c for c in core.resubscribe_commands()}
    assert cmds["news.*"].recover is None
    assert cmds["news.sport"].recover == Position("e", 1)
    events = core.receive(SubscribeReply(cmds["news.*"].id, "", 0))
    assert isinstance(events[0], SubscribeDone) and events[0].subscribed.needs_resync


def test_subscription_failures_and_endings() -> None:
    core = connected_core()
    bad = core.add_subscription("bad name")
    cmd = core.subscribe_command(bad)
    [failed] = core.receive(ErrorReply(cmd.id, 109, "invalid channel"))
    assert isinstance(failed, SubscribeFailed) and "bad name" not in core.subscriptions

    dropped = core.add_subscription("gone")
    cmd = core.subscribe_command(dropped)
    core.remove_subscription("gone")
    assert core.receive(SubscribeReply(cmd.id, "e", 0)) == [StaleSubscription("gone")]

    ended = core.add_subscription("ended")
    core.receive(SubscribeReply(core.subscribe_command(ended).id, "e", 0))
    [event] = core.receive(Unsubscribed("ended", 104, "permission denied"))
    assert isinstance(event, SubscriptionEnded) and "ended" not in core.subscriptions

    assert core.receive(Disconnect(3001, "slow")) == [ServerDisconnect(Disconnect(3001, "slow"))]
    assert core.receive(PingReply(77)) == [ReplyReceived(PingReply(77))]
