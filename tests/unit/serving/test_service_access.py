"""Who may use `hifirag serve` (issue 38): JSON bodies only, its own host names and origin, its token beyond loopback.

The app in this process over a real `Service` whose answerer records what it is asked, driven by a real HTTP
client (Starlette's TestClient, httpx underneath); the service's lifespan is not started, so an admitted
question would show as a call to the answerer, and none must arrive from a refused request.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from starlette.testclient import TestClient
from typer.testing import CliRunner

from flows.cli import app as cli
from hifirag_core.config import ConfigError
from hifirag_core.secrets import Secret
from hifirag_core.serving import access as access_module
from hifirag_core.serving.access import COOKIE, TOKEN_ENV, Access
from hifirag_core.serving.app import create_app
from hifirag_core.serving.service import Service
from hifirag_core.serving.settings import ServiceSettings
from tests.support.sitegen import write_examples

TOKEN = "tok-" + "s3cr3t-value-for-tests-" * 2
QUESTION = {"question": "How do I vacuum a PostgreSQL table?"}
HOME = "http://127.0.0.1:5010"


class RecordingAnswerer:
    """Counts the questions that reached the pipeline."""

    def __init__(self):
        self.asked: list[str] = []

    def warm_up(self, plan) -> None:
        pass

    def answer(self, question, plan, observer):
        self.asked.append(question.query)
        raise RuntimeError("no pipeline in this test")


@pytest.fixture
def service(tmp_path: Path) -> Service:
    examples = write_examples(tmp_path / "examples.jsonl")
    settings = ServiceSettings(data_root=tmp_path / "data", overrides=(f"generation.examples={examples}",))
    return Service(settings, RecordingAnswerer())


def _client(service: Service, access: Access | None = None, base_url: str = HOME) -> TestClient:
    return TestClient(create_app(service, access), base_url=base_url)


def _fastapi(asgi):
    while not hasattr(asgi, "routes"):
        asgi = asgi.app
    return asgi


# --- no cross-site requests ----------------------------------------------------------------------------


def test_a_cross_site_text_plain_post_is_refused_and_starts_nothing(service):
    client = _client(service)
    # what a form or a no-cors fetch on another site can send: a simple request, text/plain, its own Origin
    for path, body in (("/run", QUESTION), ("/evaluate", {"query": "q", "iid": "V_1"})):
        response = client.post(
            path,
            content=json.dumps(body),
            headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
        )
        assert response.status_code == 403 and "cross-origin" in response.json()["error"]
        # without an Origin (an older browser, a plain client) the type alone refuses it
        response = client.post(path, content=json.dumps(body), headers={"Content-Type": "text/plain"})
        assert response.status_code == 415
        assert (
            "Content-Type: application/json" in response.json()["error"]
            and "text/plain" in response.json()["error"]
        )
        form = client.post(path, data={"question": "q"})  # a form post
        assert form.status_code == 415
    assert service.answerer.asked == [] and service.gate.in_flight == 0


def test_a_rebinding_host_is_refused_on_every_route(service):
    client = _client(service)
    rebound = {"Host": "attacker.example:5010"}  # a DNS-rebinding page: same origin, its own host name
    for method, path in (
        ("GET", "/health"),
        ("GET", "/"),
        ("GET", "/runs/x"),
        ("GET", "/snapshots/" + "0" * 64),
        ("POST", "/run"),
        ("POST", "/evaluate"),
    ):
        response = client.request(method, path, headers=rebound, json=QUESTION)
        assert response.status_code == 421, (method, path)
        assert "attacker.example" in response.json()["error"] and "--allow-host" in response.json()["error"]
    assert service.answerer.asked == []


def test_loopback_names_the_bound_address_and_added_names_are_the_services_own(service):
    client = _client(service, Access.for_bind("127.0.0.1", ["ask.example.org, other.example"]))
    for host in (
        "127.0.0.1:5010",
        "localhost:5010",
        "LOCALHOST.",
        "[::1]:5010",
        "ask.example.org",
        "other.example:80",
    ):
        assert client.get("/health", headers={"Host": host}).status_code == 200, host
    assert client.get("/health", headers={"Host": "10.0.0.7:5010"}).status_code == 421
    # bound to one address: that address counts, no other
    bound = Access.for_bind("10.0.0.7", token=Secret(TOKEN_ENV, TOKEN))
    assert bound.host_allowed("10.0.0.7:5010") and not bound.host_allowed("10.0.0.8:5010")
    # bound to every interface: any address literal is one of its own, a name only when added
    everywhere = Access.for_bind("0.0.0.0", token=Secret(TOKEN_ENV, TOKEN))
    assert everywhere.host_allowed("192.168.1.20:5010") and everywhere.host_allowed("[fe80::1]:5010")
    assert not everywhere.host_allowed("rebind.attacker.example") and not everywhere.host_allowed("")


def test_the_services_own_origin_passes_and_any_other_is_refused(service):
    client = _client(service)
    same = client.post("/run", json={}, headers={"Origin": HOME})  # its own ask page: reaches the body check
    assert same.status_code == 422
    for origin in (
        "http://127.0.0.1:8080",
        "https://127.0.0.1:5010",
        "http://localhost:5010",
        "null",
        "http://evil.example",
    ):
        assert client.post("/run", json=QUESTION, headers={"Origin": origin}).status_code == 403, origin
    assert (
        client.post("/run", json={}, headers={"Content-Type": "application/json; charset=utf-8"}).status_code
        == 422
    )
    assert service.answerer.asked == []


def test_every_route_is_a_get_but_the_two_posts(service):
    routes = {r.path: r.methods for r in _fastapi(create_app(service)).routes if isinstance(r, APIRoute)}
    posts = {path for path, methods in routes.items() if methods != {"GET"}}
    assert posts == {"/run", "/evaluate"} and all(routes[p] == {"POST"} for p in posts)
    client = _client(service)
    assert client.put("/run", json=QUESTION).status_code == 405
    assert client.post("/health").status_code == 405 and client.delete("/runs/x").status_code == 405


# --- a token beyond loopback ---------------------------------------------------------------------------


def test_beyond_loopback_without_a_token_is_an_error_naming_the_variable():
    for host in ("0.0.0.0", "::", "192.168.1.20", "myhost.example"):
        with pytest.raises(ConfigError, match=TOKEN_ENV):
            Access.for_bind(host)
    with pytest.raises(ConfigError, match="shorter than 16"):
        Access.for_bind("0.0.0.0", token=Secret(TOKEN_ENV, "short-one"))
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert Access.for_bind(host).token is None


def test_serve_on_every_interface_without_the_token_exits_2_naming_it(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--data-root", str(tmp_path)])
    assert result.exit_code == 2
    assert TOKEN_ENV in result.output and "0.0.0.0" in result.output


@pytest.fixture
def guarded(service):
    return _client(service, Access.for_bind("0.0.0.0", token=Secret(TOKEN_ENV, TOKEN)))


def test_the_api_takes_the_token_as_a_bearer_and_refuses_without_it_or_with_a_wrong_one(guarded, service):
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-of-good-length"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ):
        response = guarded.post("/evaluate", json={"query": "q", "iid": "V_1"}, headers=headers)
        assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN_ENV in response.json()["error"]
        assert guarded.get("/runs/x", headers=headers).status_code == 401
    assert service.answerer.asked == []
    # the right token reaches the route (an empty body: 422 from the body check)
    assert guarded.post("/evaluate", json={}, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 422


def test_health_says_only_liveness_without_the_token(guarded, service):
    bare = guarded.get("/health")
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    full = guarded.get("/health", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert full["status"] == "ok" and {"run_id", "profile", "variant", "in_flight"} <= set(full)
    # on loopback without a token, /health says everything as before
    assert "run_id" in _client(service).get("/health").json()


def test_the_pages_sign_in_once_and_keep_a_strict_httponly_cookie(guarded):
    page = guarded.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/signin"
    signin = guarded.get("/signin")
    assert signin.status_code == 200 and TOKEN_ENV in signin.text and "/static/signin.js" in signin.text
    assert guarded.get("/static/signin.js").status_code == 200
    assert (
        guarded.get("/session", headers={"Authorization": "Bearer wrong-token-of-good-length"}).status_code
        == 401
    )
    assert COOKIE not in guarded.cookies
    session = guarded.get("/session", headers={"Authorization": f"Bearer {TOKEN}"})
    assert session.status_code == 204
    set_cookie = session.headers["set-cookie"]
    assert set_cookie.startswith(f"{COOKIE}=") and "HttpOnly" in set_cookie
    assert re.search(r"SameSite=strict", set_cookie, flags=re.I) and "Path=/" in set_cookie
    assert TOKEN not in set_cookie  # the cookie holds a value derived from the token
    # the client keeps the cookie: the pages open without a header
    assert guarded.get("/", headers={"Accept": "text/html"}, follow_redirects=False).status_code == 200
    assert "run_id" in guarded.get("/health").json()
    guarded.cookies.set(COOKIE, "0" * 64)  # a made-up cookie is refused
    assert guarded.get("/", headers={"Accept": "text/html"}, follow_redirects=False).status_code == 303


def test_the_token_is_compared_in_constant_time(monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = access_module.hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(access_module.hmac, "compare_digest", spy)
    access = Access.for_bind("0.0.0.0", token=Secret(TOKEN_ENV, TOKEN))
    assert access.bearer_ok(f"Bearer {TOKEN}") and not access.bearer_ok("Bearer nope")
    assert len(compared) == 2


def test_the_token_never_appears_in_a_response_or_a_log(guarded, caplog):
    caplog.set_level(logging.DEBUG)
    seen = []
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-of-good-length"},
        {"Authorization": f"Bearer {TOKEN}"},
    ):
        for method, path in (
            ("GET", "/health"),
            ("GET", "/session"),
            ("GET", "/signin"),
            ("POST", "/evaluate"),
            ("GET", "/"),
            ("GET", "/runs/nothing"),
        ):
            response = guarded.request(
                method, path, headers=headers, json={"query": "q"}, follow_redirects=False
            )
            seen.append(response.text + str(response.headers))
    assert all(TOKEN not in text for text in seen)
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(Access.for_bind("0.0.0.0", token=Secret(TOKEN_ENV, TOKEN)))


# --- the snapshots -------------------------------------------------------------------------------------


def test_a_blob_no_run_fetched_is_not_served_though_it_is_in_the_store(service):
    from hifirag_core.records import PageRecord
    from hifirag_core.store.blobs import blob_store

    blobs = blob_store(service.settings.data_root)
    fetched = blobs.put(b"<html><body><h1>Fetched</h1><p>a page some run read</p></body></html>")
    stray = blobs.put(b"bytes in the store that no run fetched (another corpus's, a test's)")
    assert fetched in blobs and stray in blobs
    page = PageRecord(
        url="https://a.example/p",
        final_url="https://a.example/p",
        fetcher="http",
        kind="html",
        content_sha256=fetched,
        content_type="text/html",
        title="Fetched",
    )
    service.warehouse.write("pages", [page], run_id="r1", stage="fetch", question_id="q1")
    client = _client(service)
    assert client.get(f"/snapshots/{fetched}").status_code == 200
    assert client.get(f"/snapshots/{fetched}/raw").content.startswith(b"<html>")
    for path in (f"/snapshots/{stray}", f"/snapshots/{stray}/raw"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert b"bytes in the store" not in response.content


# --- the service's steering and a request's together ------------------------------------------------------


def test_a_request_whose_steering_contradicts_the_services_gets_422_naming_both_before_any_work(tmp_path):
    examples = write_examples(tmp_path / "examples.jsonl")
    settings = ServiceSettings(
        data_root=tmp_path / "data", overrides=(f"generation.examples={examples}", "steer.before=2020-01-01")
    )
    service = Service(settings, RecordingAnswerer())
    client = _client(service)
    response = client.post(
        "/evaluate", json={"query": "How do I limit sync bandwidth?", "iid": "w1", "after": "2023-01-01"}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert "no page can be in that window" in error
    assert "after the request's" in error and "before the run's steer.before" in error
    streamed = client.post("/run", json={"question": "How do I limit sync bandwidth?", "after": "2023-01-01"})
    assert streamed.status_code == 422 and "steer.before" in streamed.json()["error"]
    assert service.answerer.asked == [] and service.gate.in_flight == 0
