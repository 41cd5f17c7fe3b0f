"""A threaded HTTP server on 127.0.0.1 for fakes of external services, with fault injection.

Each fake subclasses :class:`FakeServer` and implements :meth:`FakeServer.route`. The base class
records every request, applies latency and a server-side requests-per-minute limit, and injects
faults queued with :meth:`FakeServer.inject`: an HTTP status with a body and ``Retry-After``, a
delay longer than the client's timeout, a reply whose body is cut short, a dropped connection,
or any replacement response. A streamed reply (server-sent events, ``Response.events``) goes out one
event per chunk, ``Response.event_gap_s`` apart; cut short, its connection closes mid-event.

A fake of an ``https://`` service whose client cannot be pointed elsewhere but takes a proxy (ddgs) lists the
service's hosts in ``tunnel_hosts`` and sets ``tls`` (``tests/support/fakes/tls.py``): it then answers ``CONNECT
host:443`` for them, ends the tunnel's TLS with a certificate its CA signed, and serves the requests that
come through as any other (other hosts are refused with 403).
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def param(self, name: str, default: str | None = None) -> str | None:
        """The first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default

    def form(self) -> dict[str, str]:
        """The body as an urlencoded form."""
        return {k: v[0] for k, v in parse_qs(self.body.decode("utf-8", "replace")).items()}

    def json(self) -> Any:
        """The body as JSON (None when it is not)."""
        try:
            return json.loads(self.body or b"null")
        except json.JSONDecodeError:
            return None


@dataclass
class Response:
    """What the fake sends back."""

    status: int = 200
    body: bytes | str | dict | list = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    chunked: bool = False  # send with Transfer-Encoding: chunked (no Content-Length)
    # a stream: each event (``data: ...`` and its blank line) one chunk, ``event_gap_s`` after the one before
    events: list[bytes] | None = None
    event_gap_s: float = 0.0

    def encoded(self) -> tuple[bytes, str]:
        """Body bytes and content type (``content_type=""`` sends no Content-Type header)."""
        if isinstance(self.body, (dict, list)):
            default, data = "application/json; charset=UTF-8", json.dumps(self.body).encode()
        elif isinstance(self.body, str):
            default, data = "text/plain; charset=utf-8", self.body.encode()
        else:
            default, data = "application/octet-stream", self.body
        return data, default if self.content_type is None else self.content_type


@dataclass
class Fault:
    """A misbehaviour to apply to matching requests, ``times`` times.

    kind: ``status`` (send ``response``), ``delay`` (wait ``seconds`` then answer normally),
    ``truncate`` (answer normally but cut the body to ``keep`` of its length; a stream: ``keep`` of its
    events, then half of the next, then the connection closes without ending the body), ``unfinished``
    (a stream only: ``keep`` of its events, then the body ends cleanly, as a proxy that gave up would end
    it), ``drop`` (close the connection without answering).
    """

    kind: str
    response: Response | None = None
    seconds: float = 0.0
    keep: float = 0.5
    times: int = 1
    match: Callable[[Request], bool] | None = None


class _SocketWriter(io.BufferedIOBase):
    """Writes straight to a socket with ``sendall`` (the handler's ``wfile`` once a tunnel's TLS is up)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class _QuietServer(ThreadingHTTPServer):
    """Clients that give up mid-reply (the timeout tests) are expected here, not worth a traceback."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        pass


class FakeServer:
    """Base class: a real HTTP server on a random loopback port."""

    name = "fake"
    tunnel_hosts: frozenset[str] = frozenset()  # hosts served through CONNECT (with ``tls`` set)

    def __init__(self, *, latency: float | Callable[[Request], float] = 0.0, rpm: int | None = None):
        self.latency = latency
        self.rpm = rpm
        self.requests: list[Request] = []
        self.rate_limited_count = 0  # requests answered with the rpm limit's 429
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._starts: dict[str, deque[float]] = {}
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.tls: Any = None  # tests.support.fakes.tls.FakeCertificates of ``tunnel_hosts``
        self.tunnels: list[str] = []  # the CONNECT targets asked for, in order

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        handler = _make_handler(self)
        server = _QuietServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=f"{self.name}-fake", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; pending delays end at once."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- faults and bookkeeping -------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        """Queue a fault; faults apply in the order queued."""
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    def fail_after_first(self, path: str, *, too_many: Response, error: Response) -> None:
        """The first request to ``path`` is answered; every one after it meets ``too_many`` (a 429), then
        ``error`` (a 500) on its retry, and so on, turn by turn."""
        state = {"n": 0, "next": ""}

        def rate_limited(request: Request) -> bool:
            if not request.path.startswith(path):
                return False
            state["n"] += 1
            state["next"] = "" if state["n"] == 1 else ("429" if state["n"] % 2 == 0 else "500")
            return state["next"] == "429"

        self.inject(Fault("status", times=10**6, match=rate_limited, response=too_many))
        self.inject(Fault("status", times=10**6, response=error,
                          match=lambda r: r.path.startswith(path) and state["next"] == "500"))

    def count(self, predicate: Callable[[Request], bool] | None = None) -> int:
        """How many requests (matching ``predicate``) arrived."""
        with self._lock:
            return sum(1 for r in self.requests if predicate is None or predicate(r))

    def _take_fault(self, request: Request) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.match is None or fault.match(request):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def rpm_window(self, request: Request) -> tuple[str, int | None]:
        """The sliding window ``request`` counts against and its limit (None: unlimited).

        One window for the whole service by default; a fake whose real service limits each
        model (or endpoint) separately overrides this.
        """
        return "", self.rpm

    def _over_rpm(self, request: Request) -> float | None:
        """Seconds until a start is allowed when the server-side rpm limit is reached."""
        window, limit = self.rpm_window(request)
        if not limit:
            return None
        with self._lock:
            now = time.monotonic()
            starts = self._starts.setdefault(window, deque())
            while starts and now - starts[0] >= 60.0:
                starts.popleft()
            if len(starts) >= limit:
                self.rate_limited_count += 1
                return starts[0] + 60.0 - now
            starts.append(now)
        return None

    def sleep(self, seconds: float) -> None:
        """Wait, but wake up when the server stops."""
        if seconds > 0:
            self._stop.wait(seconds)

    # --- to implement -----------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        """The normal reply to a request."""
        raise NotImplementedError

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        """The reply when the server-side rpm limit is hit (each fake uses its service's format)."""
        return Response(429, {"error": "rate limited"}, {"Retry-After": str(max(1, int(retry_after + 0.999)))})

    def request_latency(self, request: Request) -> float:
        """Seconds to wait before answering this request."""
        return self.latency(request) if callable(self.latency) else float(self.latency)


def _make_handler(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real services

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_CONNECT(self) -> None:  # noqa: N802
            """A tunnel to a host the fake serves: TLS ended here, then requests as usual."""
            host = self.path.rsplit(":", 1)[0].lower()
            with fake._lock:
                fake.tunnels.append(self.path)
            if fake.tls is None or host not in fake.tunnel_hosts:
                self.send_response(403, "Forbidden")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.close_connection = True
                return
            self.send_response(200, "Connection established")
            self.end_headers()
            try:
                self.connection = fake.tls.server_context().wrap_socket(self.connection, server_side=True)
            except OSError:
                self.close_connection = True
                return
            self.rfile = self.connection.makefile("rb", self.rbufsize)
            self.wfile = _SocketWriter(self.connection)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Request(self.command, parts.path, parse_qs(parts.query, keep_blank_values=True),
                              {k.lower(): v for k, v in self.headers.items()}, body)
            with fake._lock:
                fake.requests.append(request)
            fault = fake._take_fault(request)
            if fault is not None and fault.kind == "drop":
                self.close_connection = True
                return
            if fault is not None and fault.kind == "delay":
                fake.sleep(fault.seconds)
            if fault is not None and fault.kind == "status" and fault.response is not None:
                self._send(fault.response)
                return
            wait = fake._over_rpm(request)
            if wait is not None:
                self._send(fake.rate_limited(request, wait))
                return
            fake.sleep(fake.request_latency(request))
            try:
                response = fake.route(request)
            except Exception as exc:  # a bug in a fake must show up as a 500, not a hang
                response = Response(500, {"error": {"code": 500, "message": f"fake crashed: {exc!r}",
                                                    "status": "INTERNAL"}})
            if response.events is not None:
                cut = fault.kind if fault is not None and fault.kind in ("truncate", "unfinished") else None
                self._send_events(response, cut, fault.keep if fault is not None else 1.0)
                return
            self._send(response, keep=fault.keep if fault is not None and fault.kind == "truncate" else None)

        def _send_events(self, response: Response, cut: str | None, keep: float) -> None:
            """A server-sent event stream, each event one chunk; ``cut``: ``truncate`` or ``unfinished``."""
            events = list(response.events or [])
            if cut is not None:
                kept = max(1, int(len(events) * keep))
                half = events[kept][: len(events[kept]) // 2] if cut == "truncate" and kept < len(events) else b""
                events = events[:kept] + ([half] if half else [])
            try:
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type or "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                for i, event in enumerate(events):
                    if i:
                        fake.sleep(response.event_gap_s)
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                if cut == "truncate":
                    self.close_connection = True  # no closing chunk: the body never ends
                    return
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _send(self, response: Response, keep: float | None = None) -> None:
            data, content_type = response.encoded()
            if keep is not None:
                data = data[: max(1, int(len(data) * keep))]
            try:
                self.send_response(response.status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                if response.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(data)))
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command == "HEAD":
                    return
                if not response.chunked:
                    self.wfile.write(data)
                    return
                for start in range(0, len(data), 1024):
                    piece = data[start : start + 1024]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

    return Handler
