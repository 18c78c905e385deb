"""A Python peer for the end-to-end test, using the Python SDK (sdk/python).

Usage: chat_peer.py WS_URL CHANNEL

Subscribes to CHANNEL and prints every publication's data as one JSON line
on stdout (after a first line, "ready"). Every line read on stdin is
published to CHANNEL as it is (a JSON value). Ends when stdin closes.
"""

import asyncio
import json
import sys

from herald_client import Client


async def main(url: str, channel: str) -> None:
    async with Client(url) as client:

        def on_publication(pub) -> None:  # type: ignore[no-untyped-def]
            print(json.dumps({"offset": pub.offset, "data": json.loads(pub.data)}), flush=True)

        await client.subscribe(channel, on_publication)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            await client.publish(channel, json.loads(line))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
