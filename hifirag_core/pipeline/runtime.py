"""The live objects the stages of a run work with: models, backends, stores, limits.

A ``Runtime`` is built once per run in each process that takes part in it, from the run's small,
serializable ``RunContext`` (``hifirag_core.pipeline.wiring.runtime_for``), and every stage of every
question in that process reads it. Stages take it as their ``rt`` argument; nothing else reaches them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hifirag_core.config import PipelineConfig
from hifirag_core.evidence.self_calibration import StoredCalibration
from hifirag_core.limits import RunGuards
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import EarlyWork
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.store.blobs import BlobStore
from hifirag_core.store.page_cache import PageCache
from hifirag_core.store.search_cache import SearchCache
from hifirag_core.types import Fetcher, FilterModel, SearchBackend, WriterModel
from hifirag_core.web.reddit import RedditSource


class StoredOutputs(Protocol):
    """Stage outputs a run takes from another run's rows (``hifirag_core.pipeline.reuse.RunReuse``)."""

    def stored_output(self, stage: str, question: Question, round: int = 0) -> tuple[StageOutput, str] | None:
        """The stored output and the run it comes from, or None when this stage is computed."""
        ...

    def recompute(self, stage: str, question_id: str, round: int = 0) -> bool:
        """Whether a reprocess computes this stage afresh, cached or not."""
        ...


@dataclass(frozen=True)
class SearchProviders:
    """Several search providers at once (``search.providers``); the search stage asks each and fuses their lists."""

    members: tuple[SearchBackend, ...]
    provider: str = "fused"

    @property
    def identity(self) -> list[str]:
        return [getattr(m, "identity", m.provider) for m in self.members]


@dataclass
class Runtime:
    cfg: PipelineConfig
    data_root: Path
    blobs: BlobStore
    embedder: Embedder
    filter_model: FilterModel
    writer_model: WriterModel
    search: SearchBackend | SearchProviders  # one provider, or several the search stage fuses
    fetcher: Fetcher
    reddit: RedditSource | None
    examples: ExampleSet
    guards: RunGuards | None = None  # rate limits, retries and the budget of the real backends
    page_cache: PageCache | None = None  # live fetchers only: URL -> last good fetch
    evidence_run: str | None = None  # the run whose search results and pages this run replays
    evidence_pages: dict[str, PageRecord] | None = None
    reuse: StoredOutputs | None = None  # stored outputs this run takes instead of computing
    # pages' sections and rankings computed while the fetch stage ran (``limits.overlap``)
    early: EarlyWork = field(default_factory=EarlyWork)
    # each live provider's answers by its own inputs, when the run searches several (``search.providers``)
    search_cache: SearchCache | None = None
    # the local corpus's own answerability calibration, when the run searches that corpus alone and it has
    # one (``hifirag_core.corpus.probes``); None: the shipped one decides
    calibration: StoredCalibration | None = None
