"""The client applies its backoff policy between attempts: the attempt count
grows while attempts fail (so the waits grow exponentially, with jitter, see
test_protocol.py) and restarts after a successful connect."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

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


async def test_attempts_grow_and_restart_after_success() -> None:
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

    policy = RecordingPolicy()
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
    # grows) and 4; after 4 had connected, the count restarted for 5.
    assert policy.attempts == [0, 1, 2, 3, 0]
