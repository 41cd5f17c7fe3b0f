"""Who may use the service: requests to its own names, from its own pages or no page, and beyond loopback
only with its token.

A web page open in the user's browser can send requests to ``127.0.0.1``: a cross-site form or ``fetch``
(refused by the JSON-only bodies of ``/run`` and ``/evaluate`` and by the Origin check), or, through DNS
rebinding, same-origin requests under its own host name (refused by the Host check). Beyond loopback anyone
on the network can connect, so every route but liveness and the sign-in needs the token, from
``$HIFIRAG_SERVICE_TOKEN`` only: as ``Authorization: Bearer`` for the API, in an HttpOnly, SameSite=Strict
cookie (set by ``GET /session``) for the pages. The token is compared in constant time and never written
anywhere; the cookie holds a value derived from it, not the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from hifirag_core.config import ConfigError
from hifirag_core.secrets import SECRETS, Secret

TOKEN_ENV = SECRETS["service_token"].env[0]
HOSTS_ENV = "HIFIRAG_ALLOWED_HOSTS"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
MIN_TOKEN_CHARS = 16
COOKIE = "hifirag_session"
# Open without the token: liveness (its details need the token), the sign-in page and what it loads.
PUBLIC_PATHS = frozenset({"/health", "/signin", "/session", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
_COOKIE_LABEL = b"hifirag-service-session-v1"


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` reaches only this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_port(value: str) -> tuple[str, str]:
    """A ``Host`` header's or an origin's netloc's host (lowercased, without brackets or final dot) and port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:5010
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, port = value.split(":")
    else:
        name, port = value, ""
    return name.rstrip("."), port


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without port, brackets or final dot, lowercased."""
    return _host_port(header)[0]


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def split_names(values: Iterable[str]) -> tuple[str, ...]:
    """Host names given as several values, each possibly a comma- or space-separated list."""
    return tuple(host_name(n) for v in values for n in v.replace(",", " ").split() if n)


@dataclass(frozen=True)
class Access:
    """The names the service answers to and its token (None: loopback without a token)."""

    hosts: frozenset[str]
    any_address: bool  # bound to every interface: any IP literal is one of its addresses
    token: Secret | None

    @classmethod
    def for_bind(cls, bind_host: str, extra_hosts: Iterable[str] = (), token: Secret | None = None) -> Access:
        """The access of a service listening on ``bind_host``; ConfigError when it needs a token it lacks."""
        if token is None and not is_loopback(bind_host):
            raise ConfigError(
                f"listening on {bind_host} (beyond loopback) needs a token: set the environment "
                f"variable {TOKEN_ENV} (at least {MIN_TOKEN_CHARS} characters, e.g. from "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`), or listen on "
                "127.0.0.1"
            )
        if token is not None and len(token.reveal()) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"{TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters; use a longer random value"
            )
        bound = host_name(bind_host)
        hosts = set(LOOPBACK_NAMES) | set(split_names(extra_hosts))
        if bound not in WILDCARDS:
            hosts.add(bound)
        return cls(frozenset(hosts), bound in WILDCARDS, token)

    def host_allowed(self, header: str | None) -> bool:
        """A ``Host`` naming this service (a rebinding page's host name does not)."""
        name = host_name(header or "")
        return bool(name) and (name in self.hosts or (self.any_address and _is_ip(name)))

    def origin_allowed(self, origin: str, host_header: str, scheme: str = "http") -> bool:
        """An ``Origin`` that is this service's own: the very scheme, host and port the request went to."""
        parts = urlsplit(origin.strip().lower())
        if parts.scheme != scheme or not parts.netloc:
            return False
        default = "443" if scheme == "https" else "80"
        (name, port), (host, host_port) = _host_port(parts.netloc), _host_port(host_header)
        return (name, port or default) == (host, host_port or default)

    def session_value(self) -> str:
        """What the sign-in cookie holds: derived from the token, so the cookie never carries the token."""
        assert self.token is not None
        return hmac.new(self.token.reveal().encode(), _COOKIE_LABEL, hashlib.sha256).hexdigest()

    def bearer_ok(self, authorization: str | None) -> bool:
        """``Authorization: Bearer <token>``, compared in constant time."""
        if self.token is None or not authorization:
            return False
        scheme, _, given = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.reveal().encode()
        )

    def signed_in(self, headers: Headers) -> bool:
        """The request carries the token (a bearer header or the sign-in cookie); always so without a token."""
        if self.token is None:
            return True
        if self.bearer_ok(headers.get("authorization")):
            return True
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        return cookie is not None and hmac.compare_digest(cookie.encode(), self.session_value().encode())


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class AccessGuard:
    """The ASGI layer that refuses a foreign Host (421), a foreign Origin (403) and, when the service has a
    token, a request without it (401; a page is sent to the sign-in). ``scope["state"]["signed_in"]`` tells
    the routes (``/health``) whether the request carries the token."""

    def __init__(self, app: ASGIApp, access: Access):
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # the service has none; refuse rather than pass unchecked
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The response refusing the request, or None to let it through (marking whether it is signed in)."""
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.access.host_allowed(host):
            return _refuse(
                421,
                f"this service does not answer to the host name {host_name(host or '')!r}; "
                f"it answers to {', '.join(sorted(self.access.hosts))}; add a name with "
                f"`hifirag serve --allow-host NAME` or ${HOSTS_ENV}",
            )
        origin = headers.get("origin")
        if origin is not None and not self.access.origin_allowed(
            origin, host or "", scope.get("scheme", "http")
        ):
            return _refuse(
                403,
                "cross-origin requests are refused: only this service's own pages may call it from a browser",
            )
        signed_in = self.access.signed_in(headers)
        scope.setdefault("state", {})["signed_in"] = signed_in
        path = scope.get("path", "")
        if signed_in or path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        if scope.get("method") == "GET" and "text/html" in headers.get("accept", ""):
            return RedirectResponse("/signin", status_code=303)
        return _refuse(
            401,
            f"this service needs its token: send `Authorization: Bearer TOKEN` (the value of "
            f"{TOKEN_ENV} where the service runs), or sign in at /signin",
            headers={"WWW-Authenticate": 'Bearer realm="hifirag"'},
        )


def session_response(access: Access, authorization: str | None, https: bool) -> Response:
    """``GET /session``: with the right bearer token, the sign-in cookie (HttpOnly, SameSite=Strict); else 401."""
    if access.token is None:
        return Response(status_code=204)
    if not access.bearer_ok(authorization):
        return _refuse(401, "wrong or missing token", headers={"WWW-Authenticate": 'Bearer realm="hifirag"'})
    response = Response(status_code=204, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE, access.session_value(), httponly=True, samesite="strict", secure=https, path="/"
    )
    return response
