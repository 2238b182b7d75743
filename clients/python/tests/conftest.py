"""Fixtures: the live server test.sh started (ARCHMAX_BASE_URL, ARCHMAX_TOKEN) and a
cutting proxy in front of it for the reconnect tests."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from typing import Iterator

import pytest

from archmax_client import Client


@pytest.fixture(scope="session")
def base_url() -> str:
    url = os.environ.get("ARCHMAX_BASE_URL")
    if not url:
        pytest.fail("ARCHMAX_BASE_URL is not set: run the tests through clients/python/test.sh")
    return url


@pytest.fixture(scope="session")
def token() -> str:
    value = os.environ.get("ARCHMAX_TOKEN")
    if not value:
        pytest.fail("ARCHMAX_TOKEN is not set: run the tests through clients/python/test.sh")
    return value


@pytest.fixture
def client(base_url: str, token: str) -> Iterator[Client]:
    with Client(base_url, token=token) as archmax:
        yield archmax


@pytest.fixture
def session_id() -> str:
    """A fresh session id, so tests never meet each other's sessions."""
    return f"py-{secrets.token_hex(6)}"


class CuttingProxy:
    """A TCP proxy to the server that cuts the first event stream it carries after
    `cut_after` bytes of the answer (mid-frame, as a dropped connection would), and passes
    everything else through whole. `event_streams` counts the event streams it carried."""

    def __init__(self, upstream: str, cut_after: int) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._cut_after = cut_after
        self._lock = threading.Lock()
        self.event_streams = 0
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stopped = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(downstream,), daemon=True).start()

    def _serve(self, downstream: socket.socket) -> None:
        upstream = socket.create_connection(self._upstream)
        first = downstream.recv(65536)
        limit = None
        if b"/events" in first.split(b"\r\n", 1)[0]:
            with self._lock:
                self.event_streams += 1
                if self.cuts == 0:
                    self.cuts = 1
                    limit = self._cut_after
        upstream.sendall(first)

        def pump_up() -> None:
            try:
                while chunk := downstream.recv(65536):
                    upstream.sendall(chunk)
            except OSError:
                pass

        threading.Thread(target=pump_up, daemon=True).start()
        sent = 0
        try:
            while chunk := upstream.recv(65536):
                if limit is not None and sent + len(chunk) >= limit:
                    downstream.sendall(chunk[: limit - sent])
                    break
                downstream.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        finally:
            for sock in (downstream, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


@pytest.fixture
def cutting_proxy(base_url: str) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(base_url, cut_after=2500)
    yield proxy
    proxy.close()
