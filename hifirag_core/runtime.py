"""The run-time wiring: which adapter serves each role, built once per run from the config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
from hifirag_core.reddit import RedditSource


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
    return corpus


def build_runtime(cfg: PipelineConfig, data_root: Path, examples: ExampleSet) -> Runtime:
    data_root = Path(data_root)
    blobs = blob_store(data_root)
    embedder = Embedder(data_root / "cache" / "vectors.sqlite")
    needs_corpus = cfg.backends.search == "local" or cfg.backends.fetch == "local"
    index = open_corpus(data_root, cfg.corpus.name).index(tuple(cfg.corpus.exclude)) if needs_corpus else None

    filter_model: FilterModel
    writer_model: WriterModel
    if cfg.backends.filter_llm == "offline":
        filter_model = OfflineFilterModel(embedder, cfg)
    else:
        from hifirag_core.backends.factory import build_filter_model

        filter_model = build_filter_model(cfg)
    if cfg.backends.writer_llm == "offline":
        writer_model = OfflineWriterModel(embedder, cfg)
    else:
        from hifirag_core.backends.factory import build_writer_model

        writer_model = build_writer_model(cfg)

    search: SearchBackend
    if cfg.backends.search == "local":
        assert index is not None
        search = LocalSearch(index)
    else:
        from hifirag_core.backends.factory import build_search_backend

        search = build_search_backend(cfg)
    fetcher: Fetcher
    if cfg.backends.fetch == "local":
        assert index is not None
        fetcher = LocalFetcher(index, blobs)
    else:
        from hifirag_core.backends.factory import build_fetcher

        fetcher = build_fetcher(cfg)
    return Runtime(cfg, data_root, blobs, embedder, filter_model, writer_model, search, fetcher, None, examples)
