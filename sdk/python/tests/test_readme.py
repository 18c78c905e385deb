"""The README's quick start runs as written (against a test server's URL)."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path
from typing import Any

from conftest import Server
from helpers import wait_until

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_quick_start(server: Server) -> None:
    lines = [line[4:] for line in README.read_text(encoding="utf-8").splitlines() if line.startswith(">>> ")]
    assert len(lines) == 5, "the quick start is five lines"
    assert "ws://127.0.0.1:8080/ws" in lines[1]
    lines[1] = lines[1].replace("ws://127.0.0.1:8080/ws", server.ws_url)
    *body, last = lines
    assert last == "await client.close()"
    scope: dict[str, Any] = {}
    out = io.StringIO()

    async def run(code: str) -> None:
        compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(compiled, scope)  # a coroutine when the code awaits
        if result is not None:
            await result

    with contextlib.redirect_stdout(out):
        for line in body:
            await run(line)
        # A publish reply may precede the publisher's own copy (§5): wait for it.
        await wait_until(lambda: "news" in out.getvalue(), what="the callback's print")
        await run(last)
    channel, offset, data = out.getvalue().split(" ", 2)
    assert channel == "news" and int(offset) >= 1 and data.strip() == "{'text': 'hello'}"
