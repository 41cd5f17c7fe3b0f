"""The stand-in page detector: what it flags on the fixtures and on every real page we have.

Prints, per corpus, the pages judged, how many were flagged and why (false positives on the real
corpora: the target is 0), and pages per second (CPU time inside ``detect_blocked``).

    /work/main/.venv/bin/python bench/bench_blocked.py
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.web.blocked import detect_blocked  # noqa: E402
from tests.support.real_pages import RealPage, iter_doc_pages, iter_health_pages  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "blocked"


def fixture_pages(folder: str) -> list[RealPage]:
    return [RealPage(f"fixtures/{folder}", f"https://site.example/{p.stem}/", p.read_bytes(),
                     "text" if p.suffix == ".txt" else "html")
            for p in sorted((FIXTURES / folder).iterdir())]


def judge(pages) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for page in pages:
        row = out.setdefault(page.corpus, {"pages": 0, "flagged": [], "reasons": Counter(), "cpu": 0.0})
        began = time.process_time()
        verdict = detect_blocked(page.body, url=page.url, kind=page.kind)
        row["cpu"] += time.process_time() - began
        row["pages"] += 1
        if verdict is not None:
            row["flagged"].append((page.url, verdict.message))
            row["reasons"][verdict.code] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=10, help="flagged pages listed per corpus")
    args = parser.parse_args()
    pages = [*fixture_pages("stand_in"), *fixture_pages("real")]
    if shared_data_dir().exists():
        pages_iter = [pages, iter_doc_pages(), iter_health_pages()]
    else:
        print(f"no shared data at {shared_data_dir()}: fixtures only")
        pages_iter = [pages]
    results: dict[str, dict] = {}
    for source in pages_iter:
        results.update(judge(source))
    print(f"{'corpus':<22} {'pages':>6} {'flagged':>8} {'pages/s':>9}  reasons")
    for corpus, row in results.items():
        rate = row["pages"] / row["cpu"] if row["cpu"] else float("nan")
        reasons = ", ".join(f"{k} {v}" for k, v in row["reasons"].most_common()) or "-"
        print(f"{corpus:<22} {row['pages']:>6} {len(row['flagged']):>8} {rate:>9.0f}  {reasons}")
    for corpus, row in results.items():
        if corpus == "fixtures/stand_in":
            continue
        for url, message in row["flagged"][: args.show]:
            print(f"  flagged in {corpus}: {url}: {message}")


if __name__ == "__main__":
    main()
