"""What a service runs with: a backend profile, a variant and overrides, and its protections.

A profile names the backends, so a deployment says ``--profile gemini`` instead of five
overrides; ``--set`` still changes anything else. The profiles are every command's
(``hifirag_core.profiles``), and so is the config file (``--config`` or ``$HIFIRAG_CONFIG``). The service resolves its configuration, its
few-shot examples and its keys once, at start, and fails then (never on the first request) when
something is missing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hifirag_core.config import PipelineConfig, uses_real_backends
from hifirag_core.llm.examples import ExampleSet, resolve_example_set
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT, variant_overrides
from hifirag_core.profiles import PROFILES, load_config_file, resolve_config
from hifirag_core.serving.contract import COMPETITION_LIMIT_S

__all__ = ["PROFILES", "ServiceSettings", "capacity", "service_config", "service_examples"]
# The few-shot examples of the refine pass when the config says "auto": the service speaks the
# MMU-RAGent contract, so it writes like the MMU-RAGent references (lines after the first 100).
SERVICE_DATASET_FORMAT = "mmu_ragent"


class ServiceSettings(BaseModel):
    """How ``hifirag serve`` runs; validated before the server starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_root: Path
    profile: str | None = None  # None: the config file's, else offline
    config_file: Path | None = None  # None: $HIFIRAG_CONFIG, else none
    variant: str = DEFAULT_RUN_VARIANT
    overrides: tuple[str, ...] = ()
    concurrency: int | None = Field(default=None, ge=1)  # None: the config's limits.concurrency
    # Under the competition's 10 minutes, with room for the last message to reach the client.
    deadline_s: float = Field(default=570.0, gt=0, le=COMPETITION_LIMIT_S)
    heartbeat_s: float = Field(default=15.0, gt=0)
    max_body_bytes: int = Field(default=64 * 1024, ge=256)
    max_question_chars: int = Field(default=4000, ge=1)
    # The day's service run is compacted when it has this many questions more than at its last compaction.
    compact_every: int = Field(default=500, ge=1)


def service_profile(settings: ServiceSettings) -> str:
    """The profile the service runs (named in the service run's id and /health)."""
    return settings.profile or load_config_file(settings.config_file).profile or "offline"


def service_config(settings: ServiceSettings) -> PipelineConfig:
    """The pipeline config: defaults, the config file, the profile, the variant, the user's overrides;
    its deadline the service's."""
    pairs = [*settings.overrides, f"limits.deadline_s={settings.deadline_s}"]
    cfg = resolve_config(variant=settings.variant, variant_settings=variant_overrides(settings.variant),
                         overrides=pairs, profile=settings.profile, config_file=settings.config_file)
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
