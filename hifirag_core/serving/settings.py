"""What a service runs with: a backend profile, a variant and overrides, and its protections.

A profile names the backends, so a deployment says ``--profile gemini`` instead of five
overrides; ``--set`` still changes anything else. The service resolves its configuration, its
few-shot examples and its keys once, at start, and fails then (never on the first request) when
something is missing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hifirag_core.config import ConfigError, PipelineConfig, build_config, parse_overrides, uses_real_backends
from hifirag_core.llm.examples import ExampleSet, resolve_example_set
from hifirag_core.pipeline.variants import variant_overrides
from hifirag_core.serving.contract import COMPETITION_LIMIT_S

PROFILES: dict[str, tuple[str, ...]] = {
    # The embedded default: the local corpus as the web, deterministic models; no keys, no network.
    "offline": (),
    # The paper's models: Gemini 2.5 Flash filters and 2.5 Pro writes, Google search, direct crawling.
    "gemini": ("backends.filter_llm=gemini", "backends.writer_llm=gemini", "backends.search=google",
               "backends.fetch=http"),
    # Any OpenAI-compatible server for both roles (vLLM, Ollama, llama.cpp) over the local corpus;
    # set models.openai_base_url and the model names.
    "openai": ("backends.filter_llm=openai", "backends.writer_llm=openai", "models.openai_api_key_optional=true"),
}
# The few-shot examples of the refine pass when the config says "auto": the service speaks the
# MMU-RAGent contract, so it writes like the MMU-RAGent references (lines after the first 100).
SERVICE_DATASET_FORMAT = "mmu_ragent"


class ServiceSettings(BaseModel):
    """How ``hifirag serve`` runs; validated before the server starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_root: Path
    profile: str = "offline"
    variant: str = "final"
    overrides: tuple[str, ...] = ()
    concurrency: int | None = Field(default=None, ge=1)  # None: the config's limits.concurrency
    # Under the competition's 10 minutes, with room for the last message to reach the client.
    deadline_s: float = Field(default=570.0, gt=0, le=COMPETITION_LIMIT_S)
    heartbeat_s: float = Field(default=15.0, gt=0)
    max_body_bytes: int = Field(default=64 * 1024, ge=256)
    max_question_chars: int = Field(default=4000, ge=1)
    # The day's service run is compacted when it has this many questions more than at its last compaction.
    compact_every: int = Field(default=500, ge=1)


def service_config(settings: ServiceSettings) -> PipelineConfig:
    """The pipeline config: defaults, the variant, the profile, the user's overrides; its deadline the service's."""
    if settings.profile not in PROFILES:
        raise ConfigError(f"unknown profile {settings.profile!r}; profiles: {', '.join(PROFILES)}")
    pairs = [*PROFILES[settings.profile], *settings.overrides, f"limits.deadline_s={settings.deadline_s}"]
    cfg = build_config(variant_overrides(settings.variant), parse_overrides(pairs), variant=settings.variant)
    if uses_real_backends(cfg):  # a missing key stops the service before it listens
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    return cfg


def service_examples(cfg: PipelineConfig) -> ExampleSet:
    """The refine pass's few-shot examples ("auto": the MMU-RAGent set)."""
    return resolve_example_set(cfg.generation.examples, SERVICE_DATASET_FORMAT)


def capacity(settings: ServiceSettings, cfg: PipelineConfig) -> int:
    """Questions answered at once; more are turned away with 503."""
    return settings.concurrency or cfg.limits.concurrency
