"""Shared by the quality-gate test and the floor-pinning script: load the gold set and score it."""

from __future__ import annotations

import json
from pathlib import Path

from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages
from hifirag_core.evaluation.sectioning import gate_scores, gold_fingerprint
from hifirag_core.resources import shared_data_dir
from hifirag_core.sectioning import parse_sections

GOLD = Path(__file__).with_name("sectioning_gold.json")
FLOORS = Path(__file__).with_name("sectioning_floors.json")


def faq_path() -> Path:
    return shared_data_dir() / "docs_faq" / "faq_qa.jsonl"


def data_missing() -> str | None:
    """Why the gate cannot run here (None when it can)."""
    if not docs_html_dir().is_dir() or not any(docs_html_dir().glob("*.html.tar.xz")):
        return f"shared corpus not found at {docs_html_dir()} (set HIFIRAG_SHARED_DATA)"
    if not faq_path().is_file():
        return f"FAQ file not found at {faq_path()}"
    return None


def load() -> tuple[list[dict], list[dict], str]:
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    raw = faq_path().read_bytes()
    faq = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return gold, faq, gold_fingerprint(gold, raw)


def measure() -> tuple[dict[str, float], list[str], str]:
    """Scores of the current sectioner on the gold set and the FAQ, with the failures and fingerprint."""
    gold, faq, fingerprint = load()
    sites = {e["site"] for e in gold} | {r["corpus"] for r in faq}
    pages = (p for t in sorted(docs_html_dir().glob("*.html.tar.xz"))
             if t.name.removesuffix(".html.tar.xz") in sites for p in iter_tarball_pages(t))
    scores, failures = gate_scores(gold, faq, pages, lambda html, url: parse_sections(html, url).sections)
    return scores, failures, fingerprint
