"""The run-time wiring: which adapter serves each role, built once per run from the config."""

from __future__ import annotations

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
from hifirag_core.limits import RunGuards
from hifirag_core.records import PageRecord
from hifirag_core.reddit import RecordedRedditSource, RedditSource
from hifirag_core.reuse import PageCache, StoredRun
from hifirag_core.warehouse import Warehouse


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


def build_runtime(cfg: PipelineConfig, data_root: Path, examples: ExampleSet,
                  evidence_from: str | None = None) -> Runtime:
    """The adapters the config selects; real ones share one set of rate limits and one budget."""
    data_root = Path(data_root)
    blobs = blob_store(data_root)
    embedder = Embedder(data_root / "cache" / "vectors.sqlite")
    needs_corpus = cfg.backends.search == "local" or cfg.backends.fetch == "local"
    index = open_corpus(data_root, cfg.corpus.name).index(tuple(cfg.corpus.exclude)) if needs_corpus else None
    guards = factory.build_guards(cfg) if uses_real_backends(cfg) else None

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
    evidence_pages = StoredRun(Warehouse(data_root), evidence_from).pages_by_url() if evidence_from else None
    return Runtime(cfg, data_root, blobs, embedder, filter_model, writer_model, search, fetcher, reddit, examples,
                   guards, page_cache, evidence_from, evidence_pages)
