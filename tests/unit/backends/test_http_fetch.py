"""The direct fetcher: SSRF guard, redirects, size cap, content types, politeness, retries."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from hifirag_core.backends.factory import build_fetcher
from hifirag_core.backends.http_fetch import HttpFetcher, address_refusal, classify_body
from hifirag_core.config import build_config
from hifirag_core.limits import RunGuards
from tests.support.fakes.server import Fault, Response
from tests.support.fakes.site import SiteFake

HTML = "<!DOCTYPE html><html><head><title>T</title></head><body><h1>Hello</h1></body></html>"

ROUTES = {
    "/page": Response(200, HTML, content_type="text/html; charset=iso-8859-1"),
    "/plain": Response(200, "just text", content_type="text/plain"),
    "/doc.pdf": Response(200, b"%PDF-1.7 binary...", content_type="application/pdf"),
    "/image": Response(200, b"\x89PNG\r\n\x1a\n....", content_type="image/png"),
    "/pdf-as-html": Response(200, b"%PDF-1.5 lies", content_type="text/html"),
    "/html-as-pdf": Response(200, b"no signature here", content_type="application/pdf"),
    "/page-as-pdf": Response(200, b"<html><head><title>Just a moment...</title></head></html>",
                             content_type="application/pdf"),
    "/big.pdf": Response(200, b"%PDF-1.7\n" + b"0" * 5000, content_type="application/pdf"),
    "/untyped": Response(200, HTML.encode(), content_type=""),
    "/big": Response(200, "<html>" + "x" * 5000 + "</html>", content_type="text/html"),
    "/big-chunked": Response(200, "<html>" + "x" * 5000 + "</html>", content_type="text/html", chunked=True),
    "/forbidden": Response(403, "no", content_type="text/plain"),
    "/r1": SiteFake.redirect("/r2", 301),
    "/r2": SiteFake.redirect("http://other.test:{port}/page"),
    "/loop": SiteFake.redirect("/loop"),
    "/to-internal": SiteFake.redirect("http://internal.test/secret"),
    "/to-metadata": SiteFake.redirect("http://169.254.169.254/latest/meta-data/"),
}


@pytest.fixture
def site() -> Iterator[SiteFake]:
    with SiteFake(ROUTES) as fake:
        port = fake.base_url.rsplit(":", 1)[1]
        fake.routes["/r2"] = SiteFake.redirect(f"http://other.test:{port}/page")
        yield fake


class Resolver:
    """Test DNS: names to addresses, with a name that changes its answer after the first lookup."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.table = {"site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"], "internal.test": ["10.0.0.5"],
                      "mixed.test": ["127.0.0.1", "192.168.1.20"], "v6meta.test": ["fd00:ec2::254"]}

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host == "rebind.test":
            return ["127.0.0.1"] if self.calls.count(host) == 1 else ["10.1.2.3"]
        if host not in self.table:
            raise OSError("Name or service not known")
        return self.table[host]


def make_fetcher(make_guards, *, allow_loopback: bool = True, resolver: Resolver | None = None,
                 max_bytes: int = 100_000, max_redirects: int = 3, delay: float = 0.0, timeout: float = 5.0,
                 clock=None, sleep=None) -> HttpFetcher:
    cfg = build_config(overrides={"limits": {"retries": 1}})
    guards = make_guards(cfg)
    kwargs = {}
    if clock is not None:
        kwargs = {"clock": clock, "sleep": sleep}
    return HttpFetcher(user_agent="Mozilla/5.0 (compatible; HiFiRAG-test/1.0)", timeout_s=timeout,
                       max_bytes=max_bytes, max_redirects=max_redirects, politeness_delay_s=delay,
                       guard=guards.guard("http"), allow_loopback=allow_loopback, resolver=resolver or Resolver(),
                       **kwargs)


def url(site: SiteFake, path: str, host: str = "site.test") -> str:
    return f"http://{host}:{site.base_url.rsplit(':', 1)[1]}{path}"


def test_html_page(site: SiteFake, make_guards) -> None:
    result = make_fetcher(make_guards).fetch(url(site, "/page"))
    assert (result.status, result.kind, result.http_status, result.encoding, result.fetcher) == (
        "ok", "html", 200, "iso-8859-1", "http")
    assert result.body == HTML.encode() and result.final_url == url(site, "/page")
    request = site.requests[-1]
    assert request.headers["user-agent"] == "Mozilla/5.0 (compatible; HiFiRAG-test/1.0)"
    assert request.headers["host"].startswith("site.test")
    assert "text/html" in request.headers["accept"]


@pytest.mark.parametrize(("path", "status", "kind"), [
    ("/plain", "ok", "text"),
    ("/doc.pdf", "ok", "pdf"),
    ("/image", "unsupported_type", "binary"),
    ("/pdf-as-html", "ok", "pdf"),
    ("/html-as-pdf", "unsupported_type", "binary"),
    ("/page-as-pdf", "ok", "html"),  # an error or challenge page under a PDF's type: judged as a page
    ("/untyped", "ok", "html"),
])
def test_content_types(site: SiteFake, make_guards, path: str, status: str, kind: str) -> None:
    result = make_fetcher(make_guards).fetch(url(site, path))
    assert (result.status, result.kind) == (status, kind)
    assert (result.body is None) == (status != "ok")


@pytest.mark.parametrize("path", ["/big", "/big-chunked", "/big.pdf"])
def test_size_cap(site: SiteFake, make_guards, path: str) -> None:
    result = make_fetcher(make_guards, max_bytes=1000).fetch(url(site, path))
    assert result.status == "too_large" and result.body is None and "1000 bytes" in result.error


def test_http_errors(site: SiteFake, make_guards, sleeps) -> None:
    fetcher = make_fetcher(make_guards)
    missing = fetcher.fetch(url(site, "/nothing"))
    assert (missing.status, missing.http_status) == ("not_found", 404)
    forbidden = fetcher.fetch(url(site, "/forbidden"))
    assert (forbidden.status, forbidden.http_status) == ("http_error", 403)
    assert sleeps.calls == []  # neither is retried


def test_5xx_and_429_are_retried(site: SiteFake, make_guards, sleeps) -> None:
    site.inject(Fault("status", Response(503, "busy", {"Retry-After": "2"})))
    result = make_fetcher(make_guards).fetch(url(site, "/page"))
    assert result.status == "ok" and sleeps.calls == [2.0] and site.count() == 2
    site.inject(Fault("status", Response(500, "down"), times=2))
    failed = make_fetcher(make_guards).fetch(url(site, "/page"))
    assert failed.status == "http_error" and "HTTP 500" in failed.error


def test_timeout(site: SiteFake, make_guards) -> None:
    site.inject(Fault("delay", seconds=5, times=2))
    result = make_fetcher(make_guards, timeout=0.3).fetch(url(site, "/page"))
    assert result.status == "timeout" and result.body is None


def test_redirects_are_followed_and_each_hop_checked(site: SiteFake, make_guards) -> None:
    resolver = Resolver()
    result = make_fetcher(make_guards, resolver=resolver).fetch(url(site, "/r1"))
    assert result.status == "ok" and result.final_url == url(site, "/page", host="other.test")
    assert result.url == url(site, "/r1")
    assert "other.test" in resolver.calls  # the second host was resolved and checked too


def test_redirect_limit(site: SiteFake, make_guards) -> None:
    result = make_fetcher(make_guards, max_redirects=3).fetch(url(site, "/loop"))
    assert result.status == "failed" and "more than 3 redirects" in result.error
    assert site.count() == 4


@pytest.mark.parametrize(("path", "reason"), [
    ("/to-internal", "10.0.0.5 is a private address"),
    ("/to-metadata", "169.254.169.254 is a cloud metadata address"),
])
def test_redirect_to_an_internal_address_is_refused(site: SiteFake, make_guards, path: str, reason: str) -> None:
    result = make_fetcher(make_guards).fetch(url(site, path))
    assert result.status == "refused" and reason in result.error and result.body is None


def test_loopback_needs_the_explicit_flag(site: SiteFake, make_guards) -> None:
    result = make_fetcher(make_guards, allow_loopback=False).fetch(url(site, "/page"))
    assert result.status == "refused" and "loopback" in result.error
    direct = make_fetcher(make_guards, allow_loopback=False).fetch(site.base_url + "/page")
    assert direct.status == "refused"
    assert site.count() == 0


@pytest.mark.parametrize(("target", "reason"), [
    ("http://internal.test/", "private address"),
    ("http://mixed.test/", "private address"),  # one bad answer is enough
    ("http://v6meta.test/", "cloud metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata host"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
    ("http://[::ffff:10.0.0.1]/", "private address"),
    ("http://0.0.0.0/", "reserved address"),
    ("http://nowhere.test/", "does not resolve"),
    ("file:///etc/passwd", "not an http(s) URL"),
    ("ftp://site.test/x", "not an http(s) URL"),
])
def test_ssrf_guard_refuses_internal_targets(make_guards, target: str, reason: str) -> None:
    result = make_fetcher(make_guards).fetch(target)
    assert result.status == "refused" and reason in result.error


def test_dns_answer_that_changes_after_the_check_is_refused_at_connect(site: SiteFake, make_guards) -> None:
    resolver = Resolver()
    result = make_fetcher(make_guards, resolver=resolver).fetch(url(site, "/page", host="rebind.test"))
    assert result.status == "refused" and "10.1.2.3" in result.error
    assert resolver.calls.count("rebind.test") == 2 and site.count() == 0


def test_politeness_delay_per_host(site: SiteFake, make_guards) -> None:
    now = [100.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    fetcher = make_fetcher(make_guards, delay=2.0, clock=lambda: now[0], sleep=sleep)
    fetcher.fetch(url(site, "/page"))
    fetcher.fetch(url(site, "/plain"))
    fetcher.fetch(url(site, "/page", host="other.test"))
    assert waits == [2.0]


@pytest.mark.parametrize(("address", "allow", "refused"), [
    ("8.8.8.8", False, None),
    ("2606:4700::1111", False, None),
    ("127.0.0.1", False, "loopback address"),
    ("127.0.0.1", True, None),
    ("::1", True, None),
    ("10.1.1.1", True, "private address"),
    ("172.16.0.1", False, "private address"),
    ("192.168.0.1", False, "private address"),
    ("169.254.1.1", False, "link-local address"),
    ("100.100.100.200", False, "cloud metadata address"),
    ("100.64.0.1", False, "shared (carrier-grade NAT) address"),
    ("fe80::1", False, "link-local address"),
    ("fc00::1", False, "private address"),
    ("::ffff:127.0.0.1", False, "loopback address"),
    ("224.0.0.1", False, "reserved address"),
])
def test_address_refusal(address: str, allow: bool, refused: str | None) -> None:
    assert address_refusal(ipaddress.ip_address(address), allow_loopback=allow) == refused


def test_classify_body_trusts_bytes() -> None:
    assert classify_body("application/octet-stream", b"<!DOCTYPE html><html>") == ("html", "ok", None)
    assert classify_body(None, b"\x00\x01\x02")[1] == "unsupported_type"
    assert classify_body("text/html", b"ok\x00binary")[0] == "binary"


def test_factory_builds_the_guarded_fetcher_without_loopback() -> None:
    cfg = build_config(overrides={"backends": {"fetch": "http"}})
    fetcher = build_fetcher(cfg, guards=RunGuards(cfg.limits, sleep=lambda s: None))
    assert isinstance(fetcher, HttpFetcher)
    assert fetcher.fetch("http://127.0.0.1:9/").status == "refused"
