"""The run-time wiring: a small serializable ``RunContext``, and the live ``Runtime`` each process builds from it.

Tasks never receive live objects (database connections, locks, model clients, the embedder): they
receive a ``RunContext`` (data root, config, few-shot examples, what the run reuses) that pickles in
a few kilobytes, and each process resolves it once with :func:`runtime_for` into adapters, models
and connections, which it keeps for the run. A thread pool shares one runtime; each Dask worker
process builds its own. The heavy pieces (the MiniLM model, the corpus's BM25 index) are kept per
process across runs, so an evaluation's variants load them once.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.attribution import citation_support
from hifirag_core.backends import factory
from hifirag_core.backends.base import Fetcher, FilterModel, SearchBackend, WriterModel
from hifirag_core.backends.offline import (
    LocalFetcher,
    LocalSearch,
    OfflineFilterModel,
    OfflineWriterModel,
)
from hifirag_core.blobs import BlobStore
from hifirag_core.config import PipelineConfig
from hifirag_core.corpus.store import Corpus, CorpusError
from hifirag_core.embeddings import Embedder
from hifirag_core.examples import ExampleSet
from hifirag_core.hashing import stable_hash
from hifirag_core.limits import Ledger, RunGuards
from hifirag_core.records import PageRecord
from hifirag_core.reddit import RecordedRedditSource, RedditSource
from hifirag_core.reuse import PageCache, ReuseSpec, RunReuse, StoredRun
from hifirag_core.warehouse import Warehouse


@dataclass(frozen=True)
class RunContext:
    """What any process needs to take part in a run: small, picklable, identical in every worker."""

    run_id: str
    data_root: str  # absolute; every worker must reach it (a shared filesystem across machines)
    cfg: PipelineConfig
    examples: ExampleSet
    evidence_from: str | None = None  # the run whose query plans, search results and pages are replayed
    reuse: ReuseSpec | None = None  # a reprocess: which stages come from the parent run's rows
    # Rate limits and the budget held on the Prefect server (several processes) rather than in memory.
    shared_limits: bool = False

    @functools.cached_property
    def key(self) -> str:
        """Identifies the run's runtime in a process (every stage task looks it up)."""
        return stable_hash([self.run_id, self.data_root, self.cfg.fingerprint(), self.examples, self.evidence_from,
                            self.reuse, self.shared_limits])


@dataclass
class Runtime:
    cfg: PipelineConfig
    data_root: Path
    blobs: BlobStore
    embedder: Embedder
    filter_model: FilterModel
    writer_model: WriterModel
    search: SearchBackend
    fetcher: Fetcher
    reddit: RedditSource | None
    examples: ExampleSet
    guards: RunGuards | None = None  # rate limits, retries and the budget of the real backends
    page_cache: PageCache | None = None  # live fetchers only: URL -> last good fetch
    evidence_run: str | None = None  # the run whose search results and pages this run replays
    evidence_pages: dict[str, PageRecord] | None = None
    reuse: RunReuse | None = None  # stored outputs this run takes instead of computing


def blob_store(data_root: Path) -> BlobStore:
    return BlobStore(Path(data_root) / "blobs")


def corpus_at(data_root: Path, name: str) -> Corpus:
    return Corpus(Path(data_root) / "corpus" / name, blob_store(data_root))


def open_corpus(data_root: Path, name: str) -> Corpus:
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


def uses_real_backends(cfg: PipelineConfig) -> bool:
    b = cfg.backends
    return (b.filter_llm != "offline" or b.writer_llm != "offline" or b.search != "local" or b.fetch != "local"
            or b.reddit == "praw")


# --- what a process keeps ---------------------------------------------------------------------------

_LOCK = threading.RLock()
_RUNTIMES: OrderedDict[str, Runtime] = OrderedDict()
_KEEP_RUNTIMES = 8  # a long-lived worker serves many runs; their adapters are cheap to rebuild
_EMBEDDERS: dict[str, Embedder] = {}
_CORPORA: dict[tuple[str, str, str], Corpus] = {}


def shared_embedder(data_root: Path) -> Embedder:
    """This process's MiniLM with the data root's vector cache (the model loads once per process)."""
    path = Path(data_root) / "cache" / "vectors.sqlite"
    with _LOCK:
        if str(path) not in _EMBEDDERS:
            _EMBEDDERS[str(path)] = Embedder(path)
        return _EMBEDDERS[str(path)]


def shared_corpus(data_root: Path, name: str) -> Corpus:
    """This process's handle on a built corpus (its BM25 index loads once per process)."""
    corpus = open_corpus(data_root, name)
    key = (str(Path(data_root)), name, corpus.fingerprint)  # a rebuilt corpus is a new one
    with _LOCK:
        return _CORPORA.setdefault(key, corpus)


def runtime_for(ctx: RunContext, *, ledger: Callable[[RunContext], Ledger] | None = None) -> Runtime:
    """The live runtime for ``ctx`` in this process, built on first use.

    ``ledger`` makes the run's rate limits and budget count across processes (``ctx.shared_limits``);
    ``tasks/limits.py`` gives the Prefect server's.
    """
    with _LOCK:
        rt = _RUNTIMES.get(ctx.key)
        if rt is None:
            rt = build_runtime(ctx, ledger=ledger(ctx) if ledger is not None and ctx.shared_limits else None)
            _RUNTIMES[ctx.key] = rt
            while len(_RUNTIMES) > _KEEP_RUNTIMES:
                _RUNTIMES.popitem(last=False)
        else:
            _RUNTIMES.move_to_end(ctx.key)
        return rt


def build_runtime(ctx: RunContext, *, ledger: Ledger | None = None) -> Runtime:
    """The adapters the config selects; real ones share one set of rate limits and one budget."""
    cfg = ctx.cfg
    data_root = Path(ctx.data_root)
    blobs = blob_store(data_root)
    embedder = shared_embedder(data_root)
    needs_corpus = cfg.backends.search == "local" or cfg.backends.fetch == "local"
    index = shared_corpus(data_root, cfg.corpus.name).index(tuple(cfg.corpus.exclude)) if needs_corpus else None
    guards = factory.build_guards(cfg, ledger=ledger) if uses_real_backends(cfg) else None

    def similarity(text: str, candidates: list[str]) -> list[float]:
        """MiniLM cosine: the order an LLM stage falls back to when its reply is unusable."""
        return [float(x) for x in embedder.encode(candidates) @ embedder.encode_one(text)]

    filter_model: FilterModel = (
        OfflineFilterModel(embedder, cfg) if cfg.backends.filter_llm == "offline"
        else factory.build_filter_model(cfg, guards=guards, scorer=similarity,
                                        support=lambda sentences, sources: citation_support(sentences, sources, embedder))
    )
    writer_model: WriterModel = (
        OfflineWriterModel(embedder, cfg) if cfg.backends.writer_llm == "offline"
        else factory.build_writer_model(cfg, guards=guards)
    )
    search: SearchBackend = (
        LocalSearch(index) if index is not None and cfg.backends.search == "local"
        else factory.build_search_backend(cfg, guards=guards)
    )
    fetcher: Fetcher = (
        LocalFetcher(index, blobs) if index is not None and cfg.backends.fetch == "local"
        else factory.build_fetcher(cfg, guards=guards, allow_loopback=cfg.fetch.allow_loopback)
    )
    reddit = (factory.build_reddit_source(cfg, guards=guards) if cfg.backends.reddit == "praw"
              else RecordedRedditSource(data_root / "reddit"))
    page_cache = PageCache(data_root / "cache" / "pages.sqlite") if cfg.backends.fetch != "local" else None
    warehouse = Warehouse(data_root)
    evidence = StoredRun(warehouse, ctx.evidence_from) if ctx.evidence_from else None
    reuse = RunReuse(spec=ctx.reuse, stored=StoredRun(warehouse, ctx.reuse.run_id) if ctx.reuse else None,
                     evidence=evidence)
    return Runtime(cfg, data_root, blobs, embedder, filter_model, writer_model, search, fetcher, reddit,
                   ctx.examples, guards, page_cache, ctx.evidence_from,
                   evidence.pages_by_url() if evidence is not None else None, reuse)
