"""Direct page fetching with httpx, safe to point at URLs that came from a search engine.

* **SSRF guard.** Only ``http``/``https``. The host is resolved and every address checked before
  each hop; the same check runs again inside the connection itself (a custom httpcore network
  backend connects to the address it validated), so a DNS answer that changes between check and
  connect, or a redirect to an internal host, cannot reach loopback, private, link-local,
  shared (CGNAT), multicast, reserved or cloud-metadata addresses. Environment proxies are
  ignored, since a proxy would connect on our behalf and bypass the check. Tests opt in to
  loopback with ``allow_loopback=True``; everything else stays refused.
* **Redirects** are followed by hand, at most ``max_redirects``, each hop checked.
* **Size cap**: the body is streamed and dropped once it passes ``max_bytes``.
* **Content types**: HTML, plain text and PDF bodies are returned (a PDF within the same size
  cap; sectioning parses it); other binaries are recorded with their kind and ``unsupported_type``
  without being downloaded.
* **Politeness**: request starts to the same host are spaced by ``politeness_delay_s``.
* **Retries** (through the guard) on 429, 5xx and timeouts; other statuses are final.

``fetch`` never raises for a fetch failure: the ``FetchResult`` status says what happened.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import typing
from collections.abc import Callable
from email.message import Message
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.errors import BackendError, error_status
from hifirag_core.limits import ProviderGuard, Sleep
from hifirag_core.secrets import redact
from hifirag_core.types import FetchResult, FetchStatus

Resolver = Callable[[str, int], list[str]]

# Cloud metadata endpoints; most are link-local anyway, listed so the refusal says what they are.
_METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
    "169.254.170.2",  # AWS ECS task metadata
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "100.100.100.200",  # Alibaba Cloud
))
_METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data", "metadata.azure.com"})
_SHARED_SPACE = ipaddress.ip_network("100.64.0.0/10")

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown"})
_NOT_FOUND = frozenset({404, 410})


class BlockedAddressError(Exception):
    """The URL's host resolves to an address the fetcher refuses to contact."""


def address_refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, *, allow_loopback: bool) -> str | None:
    """Why ``ip`` must not be contacted, or None when it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return None if allow_loopback else "loopback address"
    if ip in _METADATA_ADDRESSES:
        return "cloud metadata address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved:
        return "reserved address"
    if ip.is_private:
        return "private address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED_SPACE:
        return "shared (carrier-grade NAT) address"
    if not ip.is_global:
        return "non-global address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def checked_addresses(host: str, port: int, *, resolver: Resolver, allow_loopback: bool) -> list[str]:
    """The host's addresses, or ``BlockedAddressError`` if any of them is refused."""
    name = host.strip("[]").rstrip(".").lower()
    if name in _METADATA_HOSTS:
        raise BlockedAddressError(f"{host}: cloud metadata host")
    try:
        addresses = [str(ipaddress.ip_address(name))]
    except ValueError:
        try:
            addresses = resolver(name, port)
        except OSError as exc:
            raise BlockedAddressError(f"{host}: does not resolve ({exc})") from None
    if not addresses:
        raise BlockedAddressError(f"{host}: resolves to no address")
    # Refuse when any answer is internal: the connection could otherwise land on it.
    for address in addresses:
        reason = address_refusal(ipaddress.ip_address(address.split("%")[0]), allow_loopback=allow_loopback)
        if reason:
            raise BlockedAddressError(f"{host}: {address} is a {reason}")
    return addresses


class _GuardedNetworkBackend(httpcore.SyncBackend):
    """Connects only to addresses that pass the SSRF check, resolving the host itself."""

    def __init__(self, resolver: Resolver, allow_loopback: bool):
        self._resolver = resolver
        self._allow_loopback = allow_loopback

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: typing.Iterable[typing.Any] | None = None) -> httpcore.NetworkStream:
        addresses = checked_addresses(host, port, resolver=self._resolver, allow_loopback=self._allow_loopback)
        # TLS still verifies the certificate against the original host name (httpcore passes it
        # as server_hostname), so connecting to the checked address changes nothing else.
        return super().connect_tcp(addresses[0], port, timeout=timeout, local_address=local_address,
                                   socket_options=socket_options)


class _GuardedTransport(httpx.HTTPTransport):
    """An httpx transport whose connection pool uses the guarded network backend."""

    def __init__(self, resolver: Resolver, allow_loopback: bool, max_connections: int = 20):
        super().__init__(trust_env=False)
        # httpx.HTTPTransport builds its pool without a way to pass a network backend; replacing
        # the pool with an equivalent one that has it is the least invasive hook.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            network_backend=_GuardedNetworkBackend(resolver, allow_loopback),
        )


class DomainPacer:
    """Spaces request starts to the same host by ``delay`` seconds, across threads."""

    def __init__(self, delay: float, *, clock: Callable[[], float] = time.monotonic, sleep: Sleep = time.sleep):
        self.delay = delay
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep

    def wait(self, host: str) -> None:
        """Block until a request to ``host`` may start, reserving the slot after it."""
        if self.delay <= 0:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next.get(host, now))
            self._next[host] = start + self.delay
        if start > now:
            self._sleep(start - now)


def declared_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type header."""
    if not content_type:
        return None
    msg = Message()
    msg["content-type"] = content_type
    charset = msg.get_param("charset")
    return str(charset) if isinstance(charset, str) and charset else None


def media_type(content_type: str | None) -> str:
    """``text/html`` from ``text/html; charset=utf-8`` (lower-cased, empty when absent)."""
    return (content_type or "").split(";")[0].strip().lower()


def declared_kind(content_type: str | None) -> str | None:
    """The kind a Content-Type announces before any byte is read: html, text, pdf, binary, or None."""
    mt = media_type(content_type)
    if not mt:
        return None
    if mt in _HTML_TYPES:
        return "html"
    if mt in _TEXT_TYPES:
        return "text"
    if mt == "application/pdf" or mt == "application/x-pdf":
        return "pdf"
    return "binary"


def classify_body(content_type: str | None, body: bytes) -> tuple[str, FetchStatus, str | None]:
    """Kind, status and error for a downloaded body, trusting the bytes over the header."""
    head = body[:1024].lstrip()
    kind = declared_kind(content_type)
    # PDF readers accept the signature anywhere in the first 1024 bytes; a page that merely quotes
    # it is still a page
    if head.startswith(b"%PDF-") or (kind in ("pdf", "binary", None) and b"%PDF-" in body[:1024]):
        return "pdf", "ok", None
    lowered = head[:512].lower()
    looks_html = lowered.startswith((b"<!doctype html", b"<html", b"<?xml")) or b"<html" in lowered or b"<body" in lowered
    if kind in (None, "binary", "pdf") and looks_html:  # an error or challenge page under any type
        return "html", "ok", None
    if kind is None:
        if b"\x00" in head:
            return "binary", "unsupported_type", "binary content"
        return "text", "ok", None
    if kind in ("html", "text"):
        if b"\x00" in head[:512]:
            return "binary", "unsupported_type", f"binary bytes under {media_type(content_type)}"
        return kind, "ok", None
    if kind == "pdf":
        return "binary", "unsupported_type", "declared a PDF, but the bytes are not one"
    return kind, "unsupported_type", f"content type {media_type(content_type)} is not parsed as text"


def fetch_status_for_error(exc: BaseException) -> FetchStatus:
    """The fetch status for an error that ended a fetch after retries."""
    status = error_status(exc)
    if status in ("budget_exceeded", "deadline_exceeded"):
        return status  # type: ignore[return-value]
    if status == "timeout":
        return "timeout"
    if getattr(exc, "status_code", None) is not None or "HTTP" in str(exc):
        return "http_error"
    return "failed"


class _Hop(typing.NamedTuple):
    status: int
    headers: httpx.Headers
    body: bytes | None
    location: str | None
    kind: str | None
    fetch_status: FetchStatus
    error: str | None


class HttpFetcher:
    """A ``Fetcher`` that goes to the page's own server."""

    name = "http"

    def __init__(self, *, user_agent: str, timeout_s: float, max_bytes: int, max_redirects: int,
                 politeness_delay_s: float, guard: ProviderGuard, allow_loopback: bool = False,
                 resolver: Resolver = system_resolver, clock: Callable[[], float] = time.monotonic,
                 sleep: Sleep = time.sleep):
        self._guard = guard
        self._timeout = timeout_s
        self._max_bytes = max_bytes
        self._max_redirects = max_redirects
        self._resolver = resolver
        self._allow_loopback = allow_loopback
        self._pacer = DomainPacer(politeness_delay_s, clock=clock, sleep=sleep)
        self._client = httpx.Client(
            transport=_GuardedTransport(resolver, allow_loopback),
            follow_redirects=False,
            trust_env=False,
            timeout=timeout_s,
            headers={
                "User-Agent": user_agent,
                "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,"
                          "application/pdf;q=0.8,*/*;q=0.5",
                "Accept-Language": "en;q=1.0, *;q=0.5",
            },
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _get(self, url: str, timeout: float) -> _Hop:
        try:
            with self._client.stream("GET", url, timeout=timeout) as response:
                status = response.status_code
                if 300 <= status < 400 and response.headers.get("location"):
                    return _Hop(status, response.headers, None, response.headers["location"], None, "ok", None)
                if status == 429 or status >= 500:
                    body = response.read()[:2000].decode("utf-8", "replace")
                    raise error_for_status("http", status, response.headers, body)
                if not 200 <= status < 300:
                    fs: FetchStatus = "not_found" if status in _NOT_FOUND else "http_error"
                    return _Hop(status, response.headers, None, None, None, fs, f"HTTP {status}")
                content_type = response.headers.get("content-type")
                announced = declared_kind(content_type)
                if announced == "binary":
                    # Not downloaded: nothing downstream reads images, archives or executables.
                    return _Hop(status, response.headers, None, None, announced, "unsupported_type",
                                f"content type {media_type(content_type)} is not parsed as text")
                length = response.headers.get("content-length")
                if length and length.isdigit() and int(length) > self._max_bytes:
                    return _Hop(status, response.headers, None, None, announced, "too_large",
                                f"Content-Length {length} exceeds {self._max_bytes} bytes")
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self._max_bytes:
                        return _Hop(status, response.headers, None, None, announced, "too_large",
                                    f"body exceeds {self._max_bytes} bytes")
                    chunks.append(chunk)
        except httpx.TransportError as exc:
            raise transport_error("http", exc) from None
        body = b"".join(chunks)
        kind, fetch_status, error = classify_body(content_type, body)
        return _Hop(status, response.headers, body if fetch_status == "ok" else None, None, kind, fetch_status, error)

    def fetch(self, url: str) -> FetchResult:
        """Fetch ``url``, following at most ``max_redirects`` checked redirects."""
        current = url
        for _ in range(self._max_redirects + 1):
            parts = urlsplit(current)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                return FetchResult(url=url, status="refused", fetcher=self.name, final_url=current,
                                   error=f"not an http(s) URL: {current[:200]}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                checked_addresses(parts.hostname, port, resolver=self._resolver, allow_loopback=self._allow_loopback)
                self._pacer.wait(parts.hostname.lower())
                hop, _ = self._guard.call(lambda t, u=current: self._get(u, t), timeout=self._timeout, paid=False)
            except BlockedAddressError as exc:
                return FetchResult(url=url, status="refused", fetcher=self.name, final_url=current,
                                   error=f"refused: {exc}")
            except BackendError as exc:
                return FetchResult(url=url, status=fetch_status_for_error(exc), fetcher=self.name,
                                   final_url=current, http_status=getattr(exc, "status_code", None),
                                   error=f"{error_status(exc)}: {redact(str(exc))}")
            if hop.location is not None:
                current = urljoin(current, hop.location.strip())
                continue
            content_type = hop.headers.get("content-type")
            return FetchResult(url=url, status=hop.fetch_status, fetcher=self.name, final_url=current,
                               http_status=hop.status, content_type=content_type,
                               body=hop.body if hop.fetch_status == "ok" else None, kind=hop.kind,
                               encoding=declared_charset(content_type), error=hop.error,
                               last_modified=hop.headers.get("last-modified"))
        return FetchResult(url=url, status="failed", fetcher=self.name, final_url=current,
                           error=f"more than {self._max_redirects} redirects")


def build(cfg, guards, env, *, allow_loopback: bool = False) -> HttpFetcher:
    """The fetcher of the ``http`` row (hifirag_core.backend_registry); needs no key."""
    return HttpFetcher(user_agent=cfg.fetch.user_agent, timeout_s=cfg.fetch.timeout_s, max_bytes=cfg.fetch.max_bytes,
                       max_redirects=cfg.fetch.max_redirects, politeness_delay_s=cfg.fetch.politeness_delay_s,
                       guard=guards.guard("http"), allow_loopback=allow_loopback)
