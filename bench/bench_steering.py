"""Steering measured offline on the documentation corpus: site rules, date windows, answer lengths.

    .venv/bin/python bench/bench_steering.py [--data-root DIR] [--questions 20]

Runs the offline pipeline in a plain loop (``run_question``: no Prefect, no cache, nothing written) on
the shared FAQ questions and on questions about releases (the corpus's dated pages are release notes:
Django's, PostgreSQL's, Python's "What's new"), and prints:

* sites: the share of cited URLs that obey the rules (``sites`` and ``exclude_sites``);
* dates: cited pages dated outside the window (with undated pages kept, then dropped);
* length: word and sentence counts per setting (short, standard, long), and the offline yes/no lead
  against the FAQ answers that start with Yes or No.

Asserts nothing; the corpus must be built under the data root (``hifirag corpus build``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RELEASE_QUESTIONS = [
    "What changed in the latest minor release?", "Which security issues were fixed in this release?",
    "What are the release notes of PostgreSQL 15?", "What is new in Django 3.1?", "Which bugs were fixed in Django 3.0?",
    "What backwards incompatible changes does the release have?", "What new features does the release add?",
    "Which release fixed a data loss bug?", "What is new in Python 3.10?", "When was the release published?",
]


def _runtime(root: Path, steer: dict, examples):
    from hifirag_core.config import build_config
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.wiring import build_runtime

    return build_runtime(RunContext("bench-steering", str(root), build_config(overrides={"steer": steer}), examples))


def _answer(question, rt) -> dict:
    from hifirag_core.pipeline.runner import run_question

    return run_question(question, rt)


def _words(text: str | None) -> int:
    return len((text or "").split())


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (f"n={len(values)} min {ordered[0]:.0f} median {statistics.median(ordered):.0f} mean "
            f"{statistics.mean(ordered):.1f} p90 {p90:.0f} max {ordered[-1]:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--questions", type=int, default=20)
    args = parser.parse_args()
    from hifirag_core.corpus.store import open_corpus
    from hifirag_core.llm.examples import resolve_example_set
    from hifirag_core.questions import Question, load_questions, select_questions
    from hifirag_core.resources import data_root, shared_data_dir
    from hifirag_core.steering import DateWindow, SiteRules
    from hifirag_core.text import split_sentences

    root = data_root(args.data_root)
    corpus = open_corpus(root, "docs")
    published = corpus.published()
    faq = load_questions(shared_data_dir() / "docs_faq" / "faq_qa.jsonl")
    examples = resolve_example_set("auto", faq.format)
    chosen = select_questions(faq, sample=args.questions, exclude_ids=examples.ids).questions
    print(f"corpus: {len(published)} pages, {sum(1 for d in published.values() if d)} with a publication date")

    # --- sites ---
    rules = {"sites": ["djangoproject.com", "=www.postgresql.org"], "exclude_sites": ["docs.djangoproject.com"]}
    site_rules = [{"sites": ["djangoproject.com"]}, {"exclude_sites": ["docs.python.org"]},
                  {"sites": ["python.org", "sqlite.org"], "exclude_sites": ["docs.python.org"]}, rules]
    cited = obey = answered = 0
    for steer in site_rules:
        rt = _runtime(root, steer, examples)
        check = SiteRules.of(steer.get("sites", ()), steer.get("exclude_sites", ()))
        for q in chosen[:10]:
            urls = _answer(q, rt)["answer"].records[0].cited_urls
            answered += bool(urls)
            cited += len(urls)
            obey += sum(check.allows(u) for u in urls)
    print(f"sites: {len(site_rules)} rule sets x 10 questions: {answered} answers cited something; "
          f"{obey}/{cited} cited URLs obey the rules ({100 * obey / max(cited, 1):.1f}%)")

    # --- dates ---
    windows = [{"after": "2021-01-01", "before": "2023-12-31"}, {"after": "2022-06-01"}, {"before": "2012-12-31"}]
    for undated in ("keep", "drop"):
        outside = dated = undated_cited = total = 0
        for bounds in windows:
            steer = {**bounds, "undated": undated}
            rt = _runtime(root, steer, examples)
            window = DateWindow(date.fromisoformat(bounds["after"]) if "after" in bounds else None,
                                date.fromisoformat(bounds["before"]) if "before" in bounds else None, undated)
            for i, text in enumerate(RELEASE_QUESTIONS):
                urls = _answer(Question(f"r{i}", text, None, i), rt)["answer"].records[0].cited_urls
                for url in urls:
                    total += 1
                    day = published.get(url)
                    dated += day is not None
                    undated_cited += day is None
                    outside += window.verdict(day) is not None
        print(f"dates (undated={undated}): {len(windows)} windows x {len(RELEASE_QUESTIONS)} questions: {total} cited "
              f"pages, {dated} dated, {undated_cited} undated, {outside} outside the window")

    # --- lengths ---
    words: dict[str, list[int]] = {}
    sentences: dict[str, list[int]] = {}
    yes_no = right = 0
    for length in ("short", "standard", "long"):
        rt = _runtime(root, {"length": length}, examples)
        for q in chosen:
            text = _answer(q, rt)["answer"].records[0].text
            words.setdefault(length, []).append(_words(text))
            sentences.setdefault(length, []).append(len(split_sentences(text or "")))
            gold = (q.reference or "").strip().lower()
            lead = (text or "").split(":")[0]
            if length == "short" and lead in ("Yes", "No") and gold.startswith(("yes", "no")):
                yes_no += 1
                right += (lead == "Yes") == gold.startswith("yes")
        print(f"length {length:8}: words {_summary(words[length])}; sentences {_summary(sentences[length])}")
    print(f"short answers to FAQ yes/no questions whose gold starts with yes or no: {right}/{yes_no} leads agree")
    print(json.dumps({"words": words}, separators=(",", ":"))[:2000])


if __name__ == "__main__":
    main()
