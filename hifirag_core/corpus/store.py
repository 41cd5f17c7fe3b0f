"""The local corpus: the offline stand-in for both the search engine and the web.

A corpus is built once from HTML pages (the documentation tarballs or a folder): every page's
bytes go to the content-addressed blob store, its title, main text (from the sectioner) and dates
(``page_dates.py``: its best publication date in ``published``, every date signal in ``dates_json``)
to ``pages.parquet``, and a BM25 index (bm25s) over its passages (one per section, with the page
title) is saved beside it. Search ranks pages by their best passage, as web engines do: scored
whole, a long page (a FAQ with fifty questions) drowns the one section that answers the query,
and BM25's length normalization buries it (on the FAQ set, the gold page is in the top 10 for 70%
of the questions by whole-page BM25 and for 93% by best passage). Results read like a web search
API: title, URL and a snippet from the best passage. Excluded URL patterns (the FAQ protocol
leaves the FAQ pages out) are masked at query time, so any exclusion set is free; so are steering's
site rules and date windows (``search(..., steer=...)``), on each page's host and publication date.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import multiprocessing
import re
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import bm25s
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import Stemmer

from hifirag_core.config import usable_cores
from hifirag_core.corpus.sites import SourcePage
from hifirag_core.hashing import stable_hash
from hifirag_core.sectioning import SECTIONER_VERSION, parse_sections
from hifirag_core.steering import DateWindow, SiteRules
from hifirag_core.store.blobs import BlobStore, blob_store
from hifirag_core.text import normalize_ws, split_sentences
from hifirag_core.types import SearchHit
from hifirag_core.web.page_dates import PageDate, page_dates

# The page text comes from the sectioner; 3: passage index; 4: each page's dates (page_dates.py);
# 5: dir/index.html is stored as dir/.
CORPUS_VERSION = f"5/{SECTIONER_VERSION}"
PASSAGE_POOL = 300  # passages retrieved to rank pages by their best one
_PASSAGE_BREAK = re.compile(r"\n\n(?=#{1,6} )")
SNIPPET_CHARS = 240


class CorpusError(RuntimeError):
    """The corpus is missing, empty or cannot be built from what was given."""


@dataclass(frozen=True)
class CorpusPage:
    url: str
    site: str
    title: str
    text: str
    sha256: str


def normalize_url(url: str) -> str:
    """The form pages are stored under: no fragment, https, no trailing ``index.html``.

    ``https://example.org/guide/index.html`` and ``https://example.org/guide/`` are one page (what web
    servers serve for a folder), stored as the latter; every other ``.html`` suffix is kept.
    """
    url = url.split("#", 1)[0].strip()
    if url.startswith("http://"):
        url = "https://" + url[len("http://") :]
    if url.endswith("/index.html"):
        url = url[: -len("index.html")]
    return url


def passages(title: str, text: str) -> list[str]:
    """A page's passages: each heading with the text under it, prefixed by the page title."""
    return [f"{title}\n{chunk}" for chunk in _PASSAGE_BREAK.split(text) if chunk.strip()]


def _tokenize(texts: list[str], stemmer: Stemmer.Stemmer) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False)


# Pages parsed in worker processes once a build has more than this many (a small site parses faster
# than two processes start).
PARALLEL_BUILD_PAGES = 200
_BUILD_WINDOW = 256  # pages in flight to the workers: bounds the HTML held in memory at once
_STEMMER = Stemmer.Stemmer("english")


@dataclass(frozen=True)
class ParsedPage:
    """What a corpus build keeps of one page: its title, text (headings as Markdown), dates and the BM25
    tokens of its passages."""

    title: str
    text: str
    published: date | None
    dates_json: str
    tokens: list[list[str]]


def parse_page(html: bytes, url: str, relpath: str, last_modified: str | None = None,
               title: str | None = None) -> ParsedPage:
    """One page parsed for the corpus (runs in a build's worker processes: everything it returns pickles).

    ``title`` is a manifest's title for the page, which wins over the page's own."""
    parsed = parse_sections(html, url)
    text = parsed.markdown()
    title = normalize_ws(title or parsed.title or relpath)
    dates = page_dates(html, url=url, last_modified=last_modified, main_text=text)
    return ParsedPage(title=title, text=text,
                      published=next((d.date for d in dates if d.kind == "published"), None),
                      dates_json=json.dumps([d.to_json() for d in dates]),
                      tokens=_tokenize(passages(title, text) or [title], _STEMMER))


def _parsed_pages(pages: Iterable[SourcePage]) -> Iterator[tuple[SourcePage, str, ParsedPage]]:
    """Each distinct page (by normalized URL) with its parse, in the order given."""
    seen: set[str] = set()

    def distinct() -> Iterator[tuple[SourcePage, str]]:
        for page in pages:
            url = normalize_url(page.url)
            if url not in seen:
                seen.add(url)
                yield page, url

    todo = distinct()
    head = list(itertools.islice(todo, PARALLEL_BUILD_PAGES))
    workers = min(4, usable_cores())
    rest = itertools.chain(head, todo)
    # A daemonic process (a Dask worker) may not start children.
    if len(head) >= PARALLEL_BUILD_PAGES and workers >= 2 and not multiprocessing.current_process().daemon:
        window: deque = deque()
        try:
            yield from _parsed_in_pool(rest, window, workers)
            return
        except BrokenProcessPool:
            # A script that builds at import time, without a __main__ guard, breaks a spawned pool
            # at start-up; the pages it had not parsed are parsed here instead.
            rest = itertools.chain(((page, url) for page, url, _ in window), rest)
    for page, url in rest:
        yield page, url, parse_page(page.html, url, page.relpath, page.last_modified, page.title)


def _parsed_in_pool(pages: Iterator[tuple[SourcePage, str]], window: deque,
                    workers: int) -> Iterator[tuple[SourcePage, str, ParsedPage]]:
    """``pages`` parsed by worker processes, in order; ``window`` holds those submitted, not yet yielded."""
    # spawn: the caller may be a flow with threads running, which a fork would copy mid-step
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for page, url in pages:
            window.append([page, url, None])  # in the window before submit, which may raise
            window[-1][2] = pool.submit(parse_page, page.html, url, page.relpath, page.last_modified, page.title)
            if len(window) >= _BUILD_WINDOW:
                yield window[0][0], window[0][1], window[0][2].result()
                window.popleft()
        while window:
            yield window[0][0], window[0][1], window[0][2].result()
            window.popleft()


class Corpus:
    """A built corpus under ``root`` (``<data root>/corpus/<name>``)."""

    def __init__(self, root: Path, blobs: BlobStore):
        self.root = Path(root)
        self.blobs = blobs
        self._pages: dict[str, CorpusPage] | None = None
        self._indexes: dict[tuple[str, ...], CorpusIndex] = {}
        self._bm25: tuple[list[str], np.ndarray, bm25s.BM25] | None = None
        self._published: dict[str, date | None] | None = None
        self._stemmer = Stemmer.Stemmer("english")

    @property
    def pages_path(self) -> Path:
        return self.root / "pages.parquet"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def exists(self) -> bool:
        return self.manifest_path.exists() and self.pages_path.exists()

    def is_current(self) -> bool:
        """Built, and by this version of the corpus code and the sectioner."""
        return self.exists() and json.loads(self.manifest_path.read_text()).get("version") == CORPUS_VERSION

    def manifest(self) -> dict:
        if not self.exists():
            raise CorpusError(f"no corpus at {self.root}; build it with `hifirag corpus build`")
        return json.loads(self.manifest_path.read_text())

    @property
    def fingerprint(self) -> str:
        return self.manifest()["fingerprint"]

    # --- building -----------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        root: Path,
        blobs: BlobStore,
        pages: Iterable[SourcePage],
        *,
        sources: list[str],
        progress: Callable[[int], None] | None = None,
    ) -> Corpus:
        """Parse every page once, store its bytes and text, and write the page table.

        Parsing and tokenizing are most of a build's time (the 3,174 documentation pages: 14 of 20 s of
        CPU), so a large build spreads them over worker processes; the result is the same.
        """
        rows: dict[str, list] = {k: [] for k in ("url", "site", "relpath", "title", "text", "sha256", "n_bytes",
                                                 "published", "dates_json")}
        tokens: list[list[str]] = []  # every page's passages, in page order: the BM25 index's documents
        owners: list[int] = []
        for i, (page, url, parsed) in enumerate(_parsed_pages(pages), 1):
            rows["url"].append(url)
            rows["site"].append(page.site)
            rows["relpath"].append(page.relpath)
            rows["title"].append(parsed.title)
            rows["text"].append(parsed.text)
            rows["sha256"].append(blobs.put(page.html))
            rows["n_bytes"].append(len(page.html))
            owners.extend([len(rows["url"]) - 1] * len(parsed.tokens))
            tokens.extend(parsed.tokens)
            rows["published"].append(parsed.published)
            rows["dates_json"].append(parsed.dates_json)
            if progress:
                progress(i)
        if not rows["url"]:
            raise CorpusError("no HTML pages found in the given sources")
        root = Path(root)
        if root.exists():
            shutil.rmtree(root)  # a rebuild replaces the pages and the index built on them
        root.mkdir(parents=True)
        table = pa.table({k: pa.array(v, pa.date32()) if k == "published" else v for k, v in rows.items()})
        pq.write_table(table, root / "pages.parquet", compression="zstd")
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        bm25.save(root / "bm25", show_progress=False)
        (root / "bm25" / "urls.json").write_text(json.dumps(rows["url"]))
        np.save(root / "bm25" / "passage_page.npy", np.asarray(owners, dtype=np.int32))
        fingerprint = stable_hash({"v": CORPUS_VERSION, "pages": sorted(zip(rows["url"], rows["sha256"], strict=True))})
        manifest = {
            "version": CORPUS_VERSION,
            "fingerprint": fingerprint,
            "pages": len(rows["url"]),
            "sites": sorted(set(rows["site"])),
            "sources": sources,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
        return cls(root, blobs)

    # --- reading ------------------------------------------------------------------------------

    def pages(self) -> dict[str, CorpusPage]:
        if self._pages is None:
            if not self.exists():
                raise CorpusError(f"no corpus at {self.root}; build it with `hifirag corpus build`")
            table = pq.read_table(self.pages_path, columns=["url", "site", "title", "text", "sha256"])
            self._pages = {
                row["url"]: CorpusPage(**row) for row in table.to_pylist()
            }
        return self._pages

    def page(self, url: str) -> CorpusPage | None:
        return self.pages().get(normalize_url(url))

    def published(self) -> dict[str, date | None]:
        """Every page's publication day (its best published date), or None when it has none."""
        if self._published is None:
            table = pq.read_table(self.pages_path, columns=["url", "published"])
            self._published = dict(zip(table.column("url").to_pylist(), table.column("published").to_pylist(),
                                       strict=True))
        return self._published

    def page_dates(self) -> dict[str, list[PageDate]]:
        """Every page's date signals, best first, as recorded when the corpus was built."""
        table = pq.read_table(self.pages_path, columns=["url", "dates_json"])
        return {row["url"]: [PageDate(date.fromisoformat(d["date"]), d["kind"], d["source"])
                             for d in json.loads(row["dates_json"])]
                for row in table.to_pylist()}

    def bm25(self) -> tuple[list[str], np.ndarray, bm25s.BM25]:
        """The page URLs, the page of each passage, and the BM25 index over every passage."""
        if self._bm25 is None:
            folder = self.root / "bm25"
            urls = json.loads((folder / "urls.json").read_text())
            owners = np.load(folder / "passage_page.npy")
            self._bm25 = (urls, owners, bm25s.BM25.load(folder, show_progress=False, mmap=False))
        return self._bm25

    def index(self, exclude: tuple[str, ...] = ()) -> CorpusIndex:
        """A search view of the corpus with the pages matching ``exclude`` left out."""
        key = tuple(sorted(exclude))
        if key not in self._indexes:
            urls, owners, bm25 = self.bm25()
            mask = np.array([0.0 if is_excluded(u, key) else 1.0 for u in urls], dtype=np.float32)
            if not mask.any():
                raise CorpusError(f"every page of the corpus matches the exclusions {list(key)}")
            self._indexes[key] = CorpusIndex(self, key, urls, owners, bm25, mask)
        return self._indexes[key]

    def tokenize(self, texts: list[str]) -> list[list[str]]:
        return _tokenize(texts, self._stemmer)


def corpus_at(data_root: Path, name: str) -> Corpus:
    """The corpus ``name`` under the data root, built or not."""
    return Corpus(Path(data_root) / "corpus" / name, blob_store(data_root))


def open_corpus(data_root: Path, name: str) -> Corpus:
    """The built, current corpus ``name``; a clear ``CorpusError`` otherwise."""
    corpus = corpus_at(data_root, name)
    if not corpus.exists():
        raise CorpusError(
            f"the local corpus {name!r} is not built under {Path(data_root) / 'corpus'}; "
            "run `hifirag corpus build` (it reads ../shared/data/docs_html, or --folder DIR)"
        )
    if not corpus.is_current():
        raise CorpusError(f"the local corpus {name!r} under {Path(data_root) / 'corpus'} was built by an older "
                          "version of HiFi-RAG; rebuild it with `hifirag corpus build`")
    return corpus


def is_excluded(url: str, exclude: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(url, pattern) for pattern in exclude)


class CorpusIndex:
    """Search over a corpus minus its excluded pages (masked out at query time)."""

    def __init__(self, corpus: Corpus, exclude: tuple[str, ...], urls: list[str], owners: np.ndarray,
                 bm25: bm25s.BM25, mask: np.ndarray):
        self.corpus = corpus
        self.exclude = exclude
        self.urls = urls
        self.owners = owners  # passage position -> page position
        self.bm25 = bm25
        self.mask = mask  # per page
        self.passage_mask = mask[owners]
        self._steered: dict[tuple[SiteRules, DateWindow], np.ndarray] = {}

    @property
    def identity(self) -> str:
        """Changes with the corpus content and the exclusion set: part of search cache keys."""
        return stable_hash({"corpus": self.corpus.fingerprint, "exclude": list(self.exclude)})

    def __len__(self) -> int:
        return int(self.mask.sum())

    def __contains__(self, url: str) -> bool:
        return self.corpus.page(url) is not None and not is_excluded(normalize_url(url), self.exclude)

    def steered_mask(self, sites: SiteRules, window: DateWindow) -> np.ndarray:
        """The passage mask with the pages the site rules or the date window rule out left out too."""
        key = (sites, window)
        if key not in self._steered:
            published = self.corpus.published()
            keep = np.array([1.0 if sites.allows(u) and window.verdict(published.get(u)) is None else 0.0
                             for u in self.urls], dtype=np.float32)
            self._steered[key] = self.passage_mask * keep[self.owners]
        return self._steered[key]

    def search(self, query: str, num: int = 10, *, sites: SiteRules = SiteRules(),
               window: DateWindow = DateWindow()) -> list[SearchHit]:
        """Top ``num`` pages by their best passage's BM25, each with a snippet from that passage; only pages
        the site rules and the date window allow."""
        query_tokens = self.corpus.tokenize([query])
        if not query_tokens[0] or num <= 0:
            return []
        passage_mask = self.steered_mask(sites, window) if sites.active or window.active else self.passage_mask
        k = min(max(PASSAGE_POOL, num), int(passage_mask.sum()))
        if k <= 0:
            return []  # the steering leaves no page of the corpus
        docs, scores = self.bm25.retrieve(
            query_tokens, k=k, show_progress=False, n_threads=1, weight_mask=passage_mask
        )
        best: dict[int, int] = {}  # page -> its best passage (results come best first)
        for doc, score in zip(docs[0], scores[0], strict=True):
            if score > 0:
                best.setdefault(int(self.owners[int(doc)]), int(doc))
        hits = []
        terms = set(query_tokens[0])
        for page_no, passage_no in list(best.items())[:num]:
            page = self.corpus.pages()[self.urls[page_no]]
            hits.append(SearchHit(title=page.title, url=page.url,
                                  snippet=self.snippet(self._passage(page, page_no, passage_no), terms)))
        return hits

    def _passage(self, page: CorpusPage, page_no: int, passage_no: int) -> str:
        """The text of passage ``passage_no`` (of page ``page_no``) without its title line."""
        first = int(np.searchsorted(self.owners, page_no))
        chunks = passages(page.title, page.text)
        chunk = chunks[passage_no - first] if 0 <= passage_no - first < len(chunks) else page.text
        return chunk.split("\n", 1)[1] if "\n" in chunk else chunk

    def snippet(self, text: str, terms: set[str]) -> str:
        """The run of up to two sentences (a heading counts as one) holding the most distinct query terms."""
        sentences = [s.lstrip("#").strip() for s in split_sentences(text)][:400]
        sentences = [s for s in sentences if s]
        if not sentences:
            return ""
        stems = [terms.intersection(s) for s in self.corpus.tokenize(sentences)]
        pairs = [len(a | b) + 0.1 * len(a) for a, b in zip(stems, stems[1:] + [set()], strict=True)]
        best = int(np.argmax(pairs))  # earliest of the best: the lead of a page is usually its point
        passage = " ".join(sentences[best : best + 2])
        if len(passage) <= SNIPPET_CHARS:
            return passage
        cut = passage[:SNIPPET_CHARS].rsplit(" ", 1)[0]
        return cut.rstrip(",;:") + " ..."
