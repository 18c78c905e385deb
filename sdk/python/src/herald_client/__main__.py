"""A command-line client: subscribe (one JSON line per event) or publish.

Why it exists: tests and scripts in other languages (a browser end-to-end
test, a shell script) can drive a real Herald client without writing Python —
spawn ``python -m herald_client subscribe URL CHANNEL``, wait for its
``subscribed`` line, and read publications as JSON lines.

    python -m herald_client subscribe ws://127.0.0.1:8080/ws chat [--count N]
    python -m herald_client publish ws://127.0.0.1:8080/ws chat '{"text":"hi"}'

``subscribe`` prints, one JSON object per line, flushed:
``{"subscribed":{"channel","epoch","offset"}}`` once the server agreed (and
again after each reconnect, with ``"recovered"``), then
``{"pub":{"channel","offset","data"}}`` per publication (``"b64"`` instead of
``"data"`` when the payload is not JSON), and ``{"resync":{...}}`` when
publications may have been lost. It exits after ``--count`` publications, or
runs until interrupted. ``publish`` sends DATA (JSON text, sent verbatim, or
any text with ``--text``) and prints ``{"epoch","offset"}``. Exit status: 0,
1 on a Herald error (printed to stderr), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import json_codec
from .client import Client
from .errors import HeraldError
from .messages import Publication
from .protocol import Subscribed


def _line(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _pub(p: Publication) -> dict[str, Any]:
    body: dict[str, Any] = {"channel": p.channel, "offset": p.offset}
    if json_codec.is_json(p.data):
        body["data"] = json.loads(p.data)
    else:
        body["b64"] = base64.b64encode(p.data).decode("ascii")
    return {"pub": body}


def _subscribed(s: Subscribed) -> dict[str, Any]:
    return {"channel": s.channel, "epoch": s.epoch, "offset": s.offset, "recovered": s.recovered}


async def _subscribe(args: argparse.Namespace) -> int:
    done = asyncio.Event()
    seen = 0

    def on_pub(p: Publication) -> None:
        nonlocal seen
        _line(_pub(p))
        seen += 1
        if args.count and seen >= args.count:
            done.set()

    async with Client(args.url, encoding=args.encoding, token=args.token) as client:
        await client.subscribe(
            args.channel,
            on_pub,
            on_subscribed=lambda s: _line({"subscribed": _subscribed(s)}),
            on_resync=lambda s: _line({"resync": _subscribed(s)}),
        )
        await done.wait()
    return 0


async def _publish(args: argparse.Namespace) -> int:
    data: bytes = args.data.encode("utf-8")
    if not args.text and not json_codec.is_json(data):
        print(
            f"herald_client: DATA is not JSON text (use --text to send it as it is): {args.data!r}",
            file=sys.stderr,
        )
        return 2
    async with Client(args.url, encoding=args.encoding, token=args.token) as client:
        epoch, offset = await client.publish(args.channel, data)
    _line({"epoch": epoch, "offset": offset})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m herald_client", description=(__doc__ or "").split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("subscribe", "publish"):
        p = sub.add_parser(name)
        p.add_argument("url", help="ws://host:port/ws, wss://..., or tcp://host:port (binary)")
        p.add_argument("channel")
        p.add_argument(
            "--encoding", choices=["json", "binary"], default=None, help="default: binary for tcp://"
        )
        p.add_argument("--token", default=None, help="sent in connect")
        if name == "subscribe":
            p.add_argument(
                "--count", type=int, default=0, help="exit after this many publications (0: never)"
            )
        else:
            p.add_argument("data", help="JSON text, published verbatim")
            p.add_argument("--text", action="store_true", help="publish DATA as it is, JSON or not")
    args = parser.parse_args(argv)
    if args.encoding is None:
        args.encoding = "binary" if args.url.startswith("tcp:") else "json"
    try:
        return asyncio.run(_subscribe(args) if args.command == "subscribe" else _publish(args))
    except HeraldError as e:
        print(f"herald_client: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
