"""Building a run's ``Runtime`` in a process, and the few things a process keeps between runs.

Tasks never receive live objects (database connections, locks, model clients, the embedder): they
receive a ``RunContext`` (``hifirag_core.pipeline.plan``) that pickles in a few kilobytes, and each
process resolves it once with :func:`runtime_for` into adapters, models and connections. A thread pool
shares one runtime; each Dask worker process builds its own.

Process caches, and why each exists (they are the only module-level state of the pipeline):

* ``_RUNTIMES``: the runtime of each recent run, so the ten stage tasks of every question do not
  rebuild adapters, prompt sets and connections; at most ``_KEEP_RUNTIMES``, least recently used out;
* ``_EMBEDDERS``: MiniLM per vector cache, because loading the model costs seconds and a worker
  serves many runs (an evaluation's variants load it once);
* ``_CORPORA``: the local corpus per data root, name and build, because its BM25 index takes seconds
  to load; a rebuilt corpus has a new fingerprint and so a new entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from hifirag_core import backend_registry
from hifirag_core.backends import factory
from hifirag_core.backends.carried import with_carried_text
from hifirag_core.backends.offline import (
    FolderFetcher,
    FolderSearch,
    LocalFetcher,
    LocalSearch,
    OfflineFilterModel,
    OfflineWriterModel,
    RoutedFetcher,
)
from hifirag_core.config import PipelineConfig, search_providers, uses_real_backends
from hifirag_core.corpus.folder import FOLDER_SCHEME, folder_corpus
from hifirag_core.corpus.probes import corpus_calibration
from hifirag_core.corpus.store import Corpus, CorpusIndex, open_corpus
from hifirag_core.evidence.attribution import citation_support
from hifirag_core.limits import Ledger
from hifirag_core.pipeline.plan import RunContext
from hifirag_core.pipeline.reuse import RunReuse, StoredRun
from hifirag_core.pipeline.runtime import Runtime, SearchProviders
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.store.blobs import blob_store
from hifirag_core.store.documents import DocumentStore
from hifirag_core.store.page_cache import PageCache
from hifirag_core.store.search_cache import SearchCache
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.types import Fetcher, FilterModel, SearchBackend, WriterModel
from hifirag_core.web.reddit import RecordedRedditSource

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


def shared_folder(data_root: Path, cfg: PipelineConfig) -> CorpusIndex:
    """This process's index of the user's folder (``search.folder``), built or rebuilt when its files changed."""
    built = folder_corpus(data_root, cfg.search.folder or "", cfg.search.folder_host, cfg.sectioning)
    key = (str(Path(data_root)), built.root.name, built.fingerprint)
    with _LOCK:
        return _CORPORA.setdefault(key, built).index()


def runtime_for(ctx: RunContext, *, ledger: Callable[[RunContext], Ledger] | None = None) -> Runtime:
    """The live runtime for ``ctx`` in this process, built on first use.

    ``ledger`` makes the run's rate limits and budget count across processes (``ctx.shared_limits``);
    ``tasks/shared_limits.py`` gives the Prefect server's.
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
    providers = search_providers(cfg)
    needs_corpus = "local" in providers or cfg.backends.fetch == "local"
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
    folder = shared_folder(data_root, cfg) if "folder" in providers else None
    documents = (DocumentStore(data_root / "cache" / "documents.sqlite")
                 if any(backend_registry.backend("search", p).carries_text for p in providers) else None)

    def provider(name: str) -> SearchBackend:
        if name == "local" and index is not None:
            return LocalSearch(index)
        if name == "folder" and folder is not None:
            return FolderSearch(folder)
        backend = factory.build_search_backend(cfg, guards=guards, provider=name)
        if documents is not None and backend_registry.backend("search", name).carries_text:
            backend.keep_in(documents)  # type: ignore[attr-defined]  # its documents, for any later process too
        return backend

    search: SearchBackend = (provider(providers[0]) if len(providers) == 1
                             else SearchProviders(tuple(provider(p) for p in providers)))
    fetcher: Fetcher = (
        LocalFetcher(index, blobs) if index is not None and cfg.backends.fetch == "local"
        else factory.build_fetcher(cfg, guards=guards, allow_loopback=cfg.fetch.allow_loopback)
    )
    fetcher = with_carried_text(fetcher, search)  # documents a search provider sent are not fetched again
    if folder is not None:  # the folder's files are read from the folder, whatever fetches the web
        fetcher = RoutedFetcher(fetcher, {FOLDER_SCHEME: FolderFetcher(folder, blobs)})
    reddit = (factory.build_reddit_source(cfg, guards=guards) if cfg.backends.reddit == "praw"
              else RecordedRedditSource(data_root / "reddit"))
    page_cache = PageCache(data_root / "cache" / "pages.sqlite") if cfg.backends.fetch != "local" else None
    search_cache = (SearchCache(data_root / "cache" / "searches.sqlite")
                    if isinstance(search, SearchProviders) else None)
    warehouse = Warehouse(data_root)
    evidence = StoredRun(warehouse, ctx.evidence_from) if ctx.evidence_from else None
    reuse = RunReuse(spec=ctx.reuse, stored=StoredRun(warehouse, ctx.reuse.run_id) if ctx.reuse else None,
                     evidence=evidence)
    own = (corpus_calibration(index.corpus)
           if index is not None and providers == ("local",) and cfg.answerability.calibration == "corpus" else None)
    return Runtime(cfg, data_root, blobs, embedder, filter_model, writer_model, search, fetcher, reddit,
                   ctx.examples, guards, page_cache, ctx.evidence_from,
                   evidence.pages_by_url() if evidence is not None else None, reuse, search_cache=search_cache,
                   calibration=own)
