"""The client applies its backoff policy between attempts: the attempt count
grows while attempts fail (so the waits grow exponentially, with jitter, see
test_protocol.py) and restarts after a connection that lasted
``stable_after`` seconds; one ended sooner counts as a failure, so a server
that accepts and at once closes is not hammered at the initial rate."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from fake_server import FakeConn, FakeServer, serve_forever
from helpers import wait_until

from herald_client import Client, ReconnectPolicy, State


@dataclass(frozen=True)
class RecordingPolicy(ReconnectPolicy):
    """Records the attempt number of every wait; waits briefly."""

    attempts: list[int] = field(default_factory=list)

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        self.attempts.append(attempt)
        assert 0 <= super().delay(attempt, rand) <= min(self.max_delay, self.initial_delay * 2**attempt)
        return 0.01


@pytest.mark.parametrize(
    ("stable_after", "expected"),
    [
        (0.0, [0, 1, 2, 3, 0]),  # connection 4 connected: the count restarts
        (60.0, [0, 1, 2, 3, 4]),  # connection 4 lasted less than a minute: one more failure
    ],
)
async def test_attempts_grow_and_restart_after_success(stable_after: float, expected: list[int]) -> None:
    async def script(conn: FakeConn) -> None:
        # Connections 1-3 are refused after the handshake's transport opened
        # (closed at once); 4 works until the server drops it; 5 works.
        if conn.index in (1, 2, 3):
            await conn.close()
            return
        if conn.index == 4:
            await conn.handshake()
            await conn.close(3001, "slow consumer")
            return
        await serve_forever(conn)

    policy = RecordingPolicy(stable_after=stable_after)
    async with (
        FakeServer(script, transport="tcp") as fake,
        Client(fake.url, encoding="binary", reconnect=policy) as c,  # connection 0
    ):
        await c.ping()
        assert policy.attempts == []
        fake.conns[0].writer.transport.abort()  # type: ignore[union-attr]  # a drop
        await wait_until(lambda: len(fake.conns) == 6 and c.state is State.CONNECTED, what="connection 5")
        await c.ping()
    # After the drop: waits before connections 1, 2, 3 (failed: the count
    # grows), 4 and 5.
    assert policy.attempts == expected
