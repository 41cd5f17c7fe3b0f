"""A build's plan (everything checked before anything is asked of a model) and its wiring.

:func:`plan_fresh_set` validates the settings, picks the generator (Gemini with search, or the
offline stand-in), reads the style examples and loads prompt A.6; :func:`open_builder` builds the
adapters the plan needs: the grounded model, the direct fetcher that dates the sources, the
no-search baseline and MiniLM for the near-duplicate check.

Process cache: ``_OPEN`` holds the builds in flight in this process, so a build's steps (Prefect tasks
that receive only the plan) find the builder that holds its batches so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hifirag_core.config import ConfigError, PipelineConfig, build_config, parse_overrides
from hifirag_core.hashing import stable_hash
from hifirag_core.llm.prompts import Prompt, load_prompt
from hifirag_core.secrets import get_secret, optional_secret
from hifirag_core.testset.build import FreshSet, FreshSetBuilder, today_utc
from hifirag_core.testset.style import StyleExample, StyleSpec, parse_style, style_examples, typical_words
from hifirag_core.testset.testset_config import FreshSetConfig, build_testset_config
from hifirag_core.testset.testset_output import write_fresh_set


@dataclass(frozen=True)
class FreshSetPlan:
    config: FreshSetConfig  # ``today`` filled in
    pipeline: PipelineConfig  # models, limits, fetch settings and the corpus
    source: Literal["gemini", "offline"]
    style: StyleSpec
    examples: tuple[StyleExample, ...]
    prompt: Prompt
    out: Path
    data_root: Path

    @property
    def model(self) -> str:
        """The generating model (also the no-search baseline's)."""
        return self.config.model or self.pipeline.models.writer


def plan_fresh_set(values: dict, *, out: Path, data_root: Path, settings: list[str] | tuple[str, ...] = (),
                   overrides: list[str] | tuple[str, ...] = ()) -> FreshSetPlan:
    """Validate everything a build needs; raises ConfigError, MissingSecretError or CorpusError."""
    cfg = build_testset_config(values, settings)
    if cfg.today is None:
        cfg = cfg.model_copy(update={"today": today_utc()})
    if cfg.today is not None and cfg.after >= cfg.today:
        raise ConfigError(f"--after {cfg.after.isoformat()} is not before the build day {cfg.today.isoformat()}")
    pipeline = build_config(overrides=parse_overrides(list(overrides)))
    source: Literal["gemini", "offline"]
    if cfg.source == "auto":
        source = "gemini" if optional_secret("gemini_api_key") is not None else "offline"
    else:
        source = cfg.source
    if source == "gemini":
        get_secret("gemini_api_key")  # a missing key stops the build here, naming the variable
    else:
        from hifirag_core.corpus.store import open_corpus

        open_corpus(data_root, pipeline.corpus.name)
    style = parse_style(cfg.style)
    examples = tuple(style_examples(style, cfg.seed))
    prompt = load_prompt("testset_fresh", Path(pipeline.prompts.dir) if pipeline.prompts.dir else None)
    if Path(out).suffix != ".jsonl":
        raise ConfigError(f"--out {out}: the set is JSON Lines, name it *.jsonl")
    return FreshSetPlan(cfg, pipeline, source, style, examples, prompt, Path(out), Path(data_root))


_OPEN: dict[str, FreshSetBuilder] = {}


def build_key(plan: FreshSetPlan) -> str:
    return stable_hash([plan.config, plan.pipeline, plan.source, str(plan.out), str(plan.data_root)])


def start_build(plan: FreshSetPlan) -> FreshSetBuilder:
    """Open a builder for ``plan`` in this process; the build's steps find it with :func:`open_build`."""
    _OPEN[build_key(plan)] = builder = open_builder(plan)
    return builder


def open_build(plan: FreshSetPlan) -> FreshSetBuilder:
    """The builder a running build of ``plan`` holds in this process (its batches so far)."""
    try:
        return _OPEN[build_key(plan)]
    except KeyError:
        raise RuntimeError("no build of this plan is open in this process (start_build first)") from None


def end_build(plan: FreshSetPlan) -> None:
    _OPEN.pop(build_key(plan), None)


def open_builder(plan: FreshSetPlan) -> FreshSetBuilder:
    """The builder with its adapters: real ones for ``gemini``, the local corpus for ``offline``."""
    from hifirag_core.pipeline.wiring import shared_embedder

    cfg, pipeline = plan.config, plan.pipeline
    embedder = shared_embedder(plan.data_root)
    if plan.source == "gemini":
        from hifirag_core.backends import factory
        from hifirag_core.llm.prompts import STEERING_PROMPTS, PromptSet
        from hifirag_core.llm.writer_model import LLMWriterModel
        from hifirag_core.testset.pair_sources import FetchDater, GroundedPairSource

        guards = factory.build_guards(pipeline)
        generating = build_config(overrides={"backends": {"writer_llm": "gemini"}, "models": {"writer": plan.model}},
                                  base=pipeline.model_dump(mode="json"))
        chat = factory.build_chat_model("writer", generating, guards=guards)
        prompts = PromptSet.load(Path(pipeline.prompts.dir) if pipeline.prompts.dir else None,
                                 names=("baseline_q", "refine", *STEERING_PROMPTS))
        baseline = LLMWriterModel(chat, prompts, draft_prompt="raw_limit")
        source = GroundedPairSource(chat, plan.prompt, list(plan.examples), plan.style.description, cfg.after,
                                    cfg.seed)  # type: ignore[arg-type]
        fetch = pipeline.backends.fetch if pipeline.backends.fetch in ("http", "scrapingdog") else "http"
        fetching = build_config(overrides={"backends": {"fetch": fetch}}, base=pipeline.model_dump(mode="json"))
        fetcher = factory.build_fetcher(fetching, guards=guards, allow_loopback=pipeline.fetch.allow_loopback)
        dater = FetchDater(fetcher, cfg.date_evidence, cfg.today)
        return FreshSetBuilder(cfg, source, dater, embedder.encode, baseline, plan.examples)
    from hifirag_core.backends.offline import OfflineWriterModel
    from hifirag_core.corpus.store import open_corpus
    from hifirag_core.testset.pair_sources import CorpusDater, CorpusPairSource

    corpus = open_corpus(plan.data_root, pipeline.corpus.name)
    source = CorpusPairSource(corpus, cfg.after, cfg.seed, cfg.date_evidence, typical_words(list(plan.examples)),
                              pipeline.corpus.exclude)
    return FreshSetBuilder(cfg, source, CorpusDater(corpus, cfg.date_evidence), embedder.encode,
                           OfflineWriterModel(embedder, pipeline), plan.examples)


def describe(plan: FreshSetPlan) -> tuple[dict, dict]:
    """The provenance's generator and checks sections."""
    from hifirag_core.retrieval.embeddings import minilm_path

    cfg = plan.config
    generator = {"source": plan.source, "prompt": plan.prompt.name, "prompt_hash": plan.prompt.hash,
                 "model": plan.model if plan.source == "gemini" else None,
                 "search": "google_search" if plan.source == "gemini" else "local corpus (offline stand-in)"}
    checks = {
        "not_fresh": {"rule": f"at least one source with a {cfg.date_evidence} date after the cutoff",
                      "after": cfg.after.isoformat(), "date_evidence": cfg.date_evidence},
        "near_duplicate": {"rule": "MiniLM cosine of question + answer to a kept pair, an earlier candidate or a "
                                   "style example", "threshold": cfg.near_duplicate_threshold,
                           "model": minilm_path().name},
        "answered_without_search": {
            "rule": "ROUGE-L F1 (rouge-score, rougeL, stemmer on) of the Baseline Q answer (same model, no search) "
                    "against the reference", "threshold": cfg.baseline_rouge_threshold,
            "baseline": (f"{plan.model} with prompts/baseline_q.txt" if plan.source == "gemini"
                         else "the offline writer, which has no knowledge of its own: never answers")},
    }
    return generator, checks


def save(plan: FreshSetPlan, result: FreshSet) -> tuple[Path, Path]:
    """Write the set and its provenance where the plan says."""
    generator, checks = describe(plan)
    return write_fresh_set(result, plan.out, generator=generator, checks=checks)
