"""A pass-through proxy that records what an OpenAI-compatible client and a real server exchanged.

It forwards every request unchanged to ``upstream`` and keeps each request body with the reply
body, so a test against a real model server (``tests/support/llama_server.py``) can assert the wire: the
``response_format`` sent, the raw reply text, ``finish_reason`` and ``usage``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import httpx

from tests.support.fakes.server import FakeServer, Request, Response


@dataclass
class Exchange:
    """One request and the upstream's reply."""

    path: str
    request: dict | None
    status: int
    reply: dict | None


class RecordingProxy(FakeServer):
    """Forwards to ``upstream`` (``http://host:port``) and records every exchange."""

    name = "recording-proxy"

    def __init__(self, upstream: str, *, timeout_s: float = 1800.0):
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._client = httpx.Client(timeout=timeout_s)
        self._record_lock = threading.Lock()

    def route(self, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k in ("content-type", "authorization")}
        reply = self._client.request(request.method, self.upstream + request.path, content=request.body,
                                     headers=headers)
        try:
            body = reply.json()
        except ValueError:
            body = None
        with self._record_lock:
            self.exchanges.append(Exchange(request.path, request.json(), reply.status_code, body))
        return Response(reply.status_code, reply.content, content_type=reply.headers.get("content-type", ""))

    def completions(self) -> list[Exchange]:
        """The chat completion exchanges, in order."""
        with self._record_lock:
            return [e for e in self.exchanges if e.path.rstrip("/").endswith("/chat/completions")]

    def stop(self) -> None:
        super().stop()
        self._client.close()
