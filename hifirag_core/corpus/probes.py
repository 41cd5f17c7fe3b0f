"""A built corpus probes itself and stores its own answerability calibration (issue 41, item 3).

``hifirag corpus build`` ends with :func:`calibrate_corpus`: the corpus's sections (each page's text cut at
its headings, as the corpus stores it) make a :class:`~hifirag_core.evidence.self_calibration.SectionPool`,
a sample of its pages makes the probes, and the fit is written beside the pages as ``calibration.json``
(with ``probes.jsonl``: every probe and its signals). ``hifirag corpus calibrate`` rebuilds both from the
same pages, byte for byte. A run whose only search is this corpus reads it (:func:`corpus_calibration`);
the answer row names it (``answers.answerability_calibration``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hifirag_core.corpus.store import Corpus, CorpusError
from hifirag_core.evidence import self_calibration as sc
from hifirag_core.retrieval.embeddings import Embedder

CALIBRATION_FILE = "calibration.json"
PROBES_FILE = "probes.jsonl"
_HEADING = re.compile(r"^(#{1,6}) (.+)$")


def page_sections(url: str, title: str, text: str) -> list[sc.Section]:
    """A page's sections: its stored Markdown cut at its headings, each with its heading path, the page's
    title first."""
    chunks: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    path: list[tuple[int, str]] = []
    for line in text.split("\n"):
        match = _HEADING.match(line)
        if match:
            level = len(match.group(1))
            path = [(lv, h) for lv, h in path if lv < level] + [(level, match.group(2).strip())]
            chunks.append((tuple(h for _, h in path), []))
        else:
            chunks[-1][1].append(line)
    # the page's title heads every path, as the sectioner's heading paths start at the page's h1
    bodies = [(headings if headings[:1] == (title,) else (title, *headings), "\n".join(lines).strip())
              for headings, lines in chunks]
    return [sc.Section(f"{url}#s{k}", url, url, headings, body)
            for k, (headings, body) in enumerate((h, b) for h, b in bodies if b)]


def corpus_sections(corpus: Corpus) -> list[sc.Section]:
    """Every section of every page of ``corpus`` (:func:`page_sections`)."""
    return [s for url, page in corpus.pages().items() for s in page_sections(url, page.title, page.text)]


@dataclass(frozen=True)
class Calibrated:
    """What a calibration run wrote, and what it cost."""

    stored: sc.StoredCalibration
    probes: int
    items: int
    sections: int


def calibrate_corpus(corpus: Corpus, embedder: Embedder, name: str, n: int = sc.PROBES,
                     progress: Callable[[int], None] | None = None) -> Calibrated:
    """Probe ``corpus`` with ``n`` questions from its own pages, fit, and store the calibration beside it."""
    sections = corpus_sections(corpus)
    if not sections:
        raise CorpusError(f"the corpus {name!r} has no sections to probe")
    pool = sc.SectionPool(sections)
    probes = sc.make_probes(pool, n)
    if not probes:
        raise CorpusError(f"the corpus {name!r} has no page with two sections to probe")
    items = sc.probe_items(pool, probes, embedder.encode, progress)
    fitted = sc.fit(items)
    data = sc.calibration_file(fitted, probes, items, corpus=name, fingerprint=corpus.fingerprint)
    (corpus.root / PROBES_FILE).write_bytes(sc.probes_jsonl(probes, items))
    (corpus.root / CALIBRATION_FILE).write_bytes(data)
    return Calibrated(sc.read_calibration(data), len(probes), len(items), len(sections))


def corpus_calibration(corpus: Corpus) -> sc.StoredCalibration | None:
    """The corpus's own calibration, when it has one made for these very pages by this code; else None
    (the shipped calibration decides, and the answer row says ``shipped``)."""
    path = corpus.root / CALIBRATION_FILE
    if not path.exists():
        return None
    try:
        stored = sc.read_calibration(path.read_bytes())
    except (ValueError, KeyError):
        return None
    return stored if stored.corpus_fingerprint == corpus.fingerprint else None
