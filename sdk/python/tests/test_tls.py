"""``wss://``: the same client over WebSocket with TLS (``herald serve
--tls-cert/--tls-key``), trusting a test CA through ``Client(ssl=...)``; a
server the client does not trust is a connect error, not a hang."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from conftest import Server, herald_bin
from helpers import wait_until

from herald_client import Client, ConnectError, Publication


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_server(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    d: Path = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(key))
    trust = ssl.create_default_context()
    ca.configure_trust(trust)
    s = Server(herald_bin(), extra=["--tls-cert", str(cert), "--tls-key", str(key)], tls=trust)
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize("encoding", ["json", "binary"])
async def test_pubsub_over_wss(tls_server: Server, encoding: str) -> None:
    assert tls_server.ws_url.startswith("wss://")
    got: list[Publication] = []
    async with Client(tls_server.ws_url, encoding=encoding, ssl=tls_server.tls) as c:  # type: ignore[arg-type]
        await c.subscribe(f"tls.{encoding}", got.append)
        await c.publish(f"tls.{encoding}", {"secure": True})
        await wait_until(lambda: len(got) == 1, what="the publication")
        assert got[0].json() == {"secure": True}


async def test_untrusted_certificate_is_a_connect_error(tls_server: Server) -> None:
    c = Client(tls_server.ws_url, connect_timeout=5)  # the system CAs do not know the test CA
    with pytest.raises(ConnectError) as info:
        await c.connect()
    transport_error = info.value.__cause__
    assert transport_error is not None
    assert isinstance(transport_error.__cause__, ssl.SSLCertVerificationError)
