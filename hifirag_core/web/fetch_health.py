"""Whether a run's crawling worked: the warnings its summary carries.

A run whose fetches mostly failed still "answers" (from whatever it had), and one domain that
blocked every fetch is invisible in the answers. ``fetch_warnings`` says so in the run summary;
the ``domain_health`` view (``warehouse/views/50_domain_health.sql``) has the counts per domain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from hifirag_core.records import PageRecord, Record

SHOWN = 5  # questions or domains named in one warning; the rest are counted


def domain_of(url: str) -> str:
    """The host of a URL, lower-cased, without ``www.`` (the ``domain_health`` view does the same)."""
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def _counts(pages: Iterable[PageRecord]) -> str:
    return ", ".join(f"{status} {n}" for status, n in Counter(p.status for p in pages).most_common())


def _names(items: list[str]) -> str:
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def fetch_warnings(pages_by_question: Mapping[str, Iterable[Record]]) -> list[str]:
    """Warnings for a run: questions that lost more than half of their fetches, domains that blocked every fetch.

    ``pages_by_question``: each question's fetch-stage rows (other records are ignored).
    """
    by_question = {qid: [p for p in rows if isinstance(p, PageRecord)] for qid, rows in pages_by_question.items()}
    warnings: list[str] = []
    lost = [f"{qid} ({sum(not p.ok for p in pages)} of {len(pages)}: {_counts(p for p in pages if not p.ok)})"
            for qid, pages in by_question.items() if pages and 2 * sum(not p.ok for p in pages) > len(pages)]
    if lost:
        warnings.append(f"{len(lost)} of {len(by_question)} questions lost more than half of their fetches: "
                        f"{_names(lost)}; see the domain_health view")
    by_domain: dict[str, list[PageRecord]] = {}
    for pages in by_question.values():
        for page in pages:
            by_domain.setdefault(domain_of(page.final_url or page.url), []).append(page)
    walls = [f"{domain} ({len(pages)} of {len(pages)}: "
             f"{', '.join(sorted({p.block_reason or 'blocked' for p in pages}))})"
             for domain, pages in sorted(by_domain.items(), key=lambda kv: (-len(kv[1]), kv[0]))
             if domain and all(p.status == "blocked" for p in pages)]
    if walls:
        warnings.append(f"{len(walls)} domain(s) blocked every fetch: {_names(walls)}; "
                        "their pages never reached a prompt")
    return warnings
