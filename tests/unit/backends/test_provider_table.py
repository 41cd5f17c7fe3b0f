"""The backends table's contract: every search row with an adapter has a fake (``tests.support.fakes.search_providers.
PROVIDER_FAKES``), answers a query through it, sends steering in its own request exactly when its row says it
does, and gets an ``ok`` doctor line there, a ``missing`` one naming each key without its keys. A provider added as
a module, a row and a fake is tested here without a line of this file changing."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from hifirag_core import backend_registry as registry
from hifirag_core.backends.doctor import _search as doctor_search
from hifirag_core.backends.factory import build_search_provider
from hifirag_core.config import DEFAULT_CALL_COST_USD, DEFAULT_PROVIDER_RPM, build_config, parse_overrides
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.types import SearchSteer
from tests.support.fakes.search_providers import PROVIDER_FAKES, steering_seen
from tests.support.fakes.web import default_web

ROWS = [row for row in registry.BACKENDS if row.role == "search" and row.builder is not None]
NO_STEERING = registry.Backend.__dataclass_fields__["steering"].default
STEER = SearchSteer(sites=SiteRules.of(["docs.python.org"], ["reddit.com"]),
                    window=DateWindow(after=date.today() - timedelta(days=5)), language="fr")


def test_every_search_row_has_a_fake_and_every_fake_a_row() -> None:
    assert set(PROVIDER_FAKES) == {row.name for row in ROWS}


def test_the_limits_defaults_come_from_the_rows() -> None:
    assert {r.provider: r.call_cost_usd for r in registry.BACKENDS if r.call_cost_usd} == DEFAULT_CALL_COST_USD
    assert all(DEFAULT_PROVIDER_RPM[r.provider] == r.rpm for r in registry.BACKENDS if r.rpm)
    clash = registry.Backend("scratch", "search", "a clash", None, limits_name="brave", rpm=1)
    with pytest.raises(ValueError, match="disagree on its rpm"):
        registry.provider_defaults("rpm", (*registry.BACKENDS, clash))


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_each_provider_answers_through_its_fake_and_steers_as_its_row_says(row, make_guards, tmp_path: Path) -> None:
    spec = PROVIDER_FAKES[row.name]
    with spec.make(default_web().search) as fake:
        cfg = build_config(overrides=parse_overrides([f"backends.search={row.name}", *spec.settings(fake)]))
        env = spec.env(fake)
        backend = build_search_provider(row.name, cfg, guards=make_guards(cfg), env=env)
        hits = backend.search("python virtual environment", num=3)
        assert backend.provider == row.name and 1 <= len(hits) <= 3, hits
        assert all(h.url.startswith(("http://", "https://")) and h.title for h in hits)
        assert fake.count() >= 1
        assert not steering_seen(fake), "a search without steering sent some"
        backend.search("python virtual environment", num=3, steer=STEER)
        seen = steering_seen(fake)
        if row.steering == NO_STEERING:
            assert not seen, f"{row.name} sent {seen}, but its row says it has no steering of its own"
        else:
            assert seen, f"{row.name}'s row says it steers with {row.steering!r}; its request carried none"
        check = doctor_search(row.name, cfg, make_guards(cfg), env, tmp_path)
        assert check.status == "ok", check
        assert check.cost == registry.cost_text(row, cfg.limits.call_cost_usd.get(row.provider))
    if row.keys:
        check = doctor_search(row.name, cfg, make_guards(cfg), {}, tmp_path)
        assert check.status == "missing"
        assert all(any(var in check.detail for var in key.env) for key in row.keys), check.detail


def test_hifirag_providers_prints_the_table_and_which_keys_are_set() -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["providers"], env={"COLUMNS": "400", "BRAVE_API_KEY": "brave-key-0123456",
                                                         "TAVILY_API_KEY": ""})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for row in registry.BACKENDS:
        assert any(line.split()[:2] in ([row.name, row.role], [row.name, "(ends"]) for line in lines if line.strip())
    assert "BRAVE_API_KEY (set)" in result.output and "TAVILY_API_KEY (not set)" in result.output
    assert "google (ends 2027-01-01)" in result.output
