"""Arguments the protocol cannot carry raise a clear exception before anything
is sent, and the connection goes on; arguments it can carry but the server
refuses raise the ReplyError of the server's code."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import pytest
from conftest import Server

from herald_client import Client, HeraldError, InvalidArgumentError, InvalidChannelError, Position


async def test_bad_arguments_raise_before_sending(server: Server) -> None:
    async with Client(server.ws_url) as c:
        bad: list[tuple[Any, type[Exception]]] = [
            (c.publish("c", object()), TypeError),
            (c.publish("c", {"x": {1, 2}}), TypeError),
            (c.publish("c", float("nan")), InvalidArgumentError),
            (c.publish("c", "\ud800"), InvalidArgumentError),
            (c.publish(7, 1), TypeError),  # type: ignore[arg-type]
            (c.subscribe("\udfff"), InvalidArgumentError),
            (c.subscribe(b"bytes"), TypeError),  # type: ignore[arg-type]
            (c.subscribe("c", since=("epoch",)), TypeError),  # type: ignore[arg-type]
            (c.subscribe("c", since=("epoch", -1)), InvalidArgumentError),
            (c.history("c", limit=-1), InvalidArgumentError),
            (c.history("c", limit=2**32), InvalidArgumentError),
            (c.history("c", limit="10"), TypeError),  # type: ignore[arg-type]
            (c.history("c", since=(1, 2)), TypeError),  # type: ignore[arg-type]
            (c.history("c", since=("e", 2**64)), InvalidArgumentError),
            (c.presence(None), TypeError),  # type: ignore[arg-type]
            (c.presence_stats(7), TypeError),  # type: ignore[arg-type]
            (c.unsubscribe(1.5), TypeError),  # type: ignore[arg-type]
        ]
        for call, exc in bad:
            with pytest.raises(exc):
                await call
        assert issubclass(InvalidArgumentError, ValueError) and issubclass(InvalidArgumentError, HeraldError)
        assert c.subscriptions == {}
        # Nothing reached the server; the connection is fine.
        assert await c.publish("bad.input.after", [1]) == Position(
            (await c.history("bad.input.after")).epoch, 1
        )


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("http://127.0.0.1:1/ws",), {}),
        (("127.0.0.1:1",), {}),
        (([],), {}),
        (("tcp://127.0.0.1:1",), {"encoding": "json"}),
        (("ws://127.0.0.1:1/ws",), {"encoding": "xml"}),
        (("ws://127.0.0.1:1/ws",), {"token": "\ud800"}),
    ],
)
def test_bad_client_options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        Client(*args, **kwargs)


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_channels_the_server_refuses(server: Server, encoding: str) -> None:
    async with Client(server.ws_url, encoding=encoding) as c:  # type: ignore[arg-type]
        for channel in ["", "a b", "ünï", "news.>.x", "a..*", "x" * 256]:
            with pytest.raises(InvalidChannelError):
                await c.subscribe(channel)
        with pytest.raises(InvalidChannelError):
            await c.history("news.*")
        await c.ping()


def test_the_package_is_typed() -> None:
    """PEP 561: the installed package carries py.typed."""
    assert files("herald_client").joinpath("py.typed").is_file()
