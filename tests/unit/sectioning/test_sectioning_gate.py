"""Quality gate: sectioning of real pages against the gold set and the FAQ, above pinned floors."""

from __future__ import annotations

import json

import pytest

from tests.support.gold.gate import FLOORS, data_missing, measure

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured() -> tuple[dict[str, float], list[str], str]:
    if reason := data_missing():
        pytest.skip(reason)
    return measure()


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(FLOORS.read_text())


def test_gold_set_fingerprint_matches_the_pinned_floors(measured, pinned) -> None:
    _, _, fingerprint = measured
    assert fingerprint == pinned["fingerprint"], (
        "the gold set, the FAQ file or the chrome definitions changed since the floors were pinned; "
        "re-pin with: python tools/pin_sectioning_floors.py (the new floors show in the diff)"
    )


def test_scores_stay_above_floors(measured, pinned) -> None:
    scores, failures, _ = measured
    margin = pinned["noise_margin"]
    below = {k: (scores.get(k, 0.0), floor) for k, floor in pinned["floors"].items()
             if scores.get(k, 0.0) < floor - margin}
    detail = "\n".join(failures[:40])
    assert not below, f"scores below their floors (score, floor): {below}\nfirst failures:\n{detail}"


def test_every_floor_is_measured(measured, pinned) -> None:
    scores, _, _ = measured
    assert set(pinned["floors"]) <= set(scores), "a pinned metric is no longer measured"
    for key in ("faq_mapped", "gold_heading_paths", "gold_must_contain", "gold_pages_clean", "gold_headings_kept"):
        assert key in pinned["floors"], f"{key} has no floor"
