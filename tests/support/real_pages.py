"""Every real page the stand-in detector must leave alone: the doc pages and the health corpus.

The documentation sites come as their HTML (3,174 pages); the MedQuAD documents come as text, so
each is given twice, as a page (the focus as <title> and <h1>, each question an <h2> over its
answer) and as the plain-text document the credibility experiment reads.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass

from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages
from hifirag_core.evaluation.credibility_corpus import clean_question, iter_medquad
from hifirag_core.resources import shared_data_dir
from hifirag_core.text import normalize_ws


@dataclass(frozen=True)
class RealPage:
    corpus: str
    url: str
    body: bytes
    kind: str  # html | text


def iter_doc_pages() -> Iterator[RealPage]:
    """The 3,174 pages of the documentation tarballs."""
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        for page in iter_tarball_pages(tarball):
            yield RealPage("docs", page.url, page.html, "html")


def medquad_html(row: dict) -> bytes:
    """A MedQuAD document as the page a health site would serve."""
    focus = html.escape(normalize_ws(row["focus"]))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{focus}</title></head><body><main>",
             f"<h1>{focus}</h1>"]
    for qa in row["qa"]:
        parts.append(f"<h2>{html.escape(clean_question(qa['question']))}</h2>")
        parts.extend(f"<p>{html.escape(p.strip())}</p>" for p in qa["answer"].split("\n") if p.strip())
    parts.append("</main></body></html>")
    return "\n".join(parts).encode("utf-8")


def medquad_text(row: dict) -> bytes:
    """A MedQuAD document as plain text: the focus as a title, each question a heading over its answer."""
    parts = [f"# {normalize_ws(row['focus'])}"]
    for qa in row["qa"]:
        parts += [f"## {clean_question(qa['question'])}", normalize_ws(qa["answer"])]
    return "\n\n".join(parts).encode("utf-8")


def iter_health_pages() -> Iterator[RealPage]:
    """Each MedQuAD document, as a page and as text."""
    for row in iter_medquad(shared_data_dir() / "health" / "medquad_docs.jsonl.gz"):
        yield RealPage("health-html", row["url"], medquad_html(row), "html")
        yield RealPage("health-text", row["url"], medquad_text(row), "text")
