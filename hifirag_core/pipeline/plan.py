"""Planning a run: which questions, which config, which run id, what it reuses; checked before anything runs.

A plan is made once, where a run starts (the command line, or a flow started from the Prefect UI or a
deployment with plain parameters), and handed on whole. ``RunContext`` is the small part of it every
stage task receives; ``ReuseSpec`` says which stages a reprocess takes from its parent run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.config import PipelineConfig, uses_real_backends
from hifirag_core.hashing import stable_hash
from hifirag_core.llm.examples import ExampleSet, resolve_example_set
from hifirag_core.pipeline.question_steering import steering_conflicts
from hifirag_core.pipeline.specs import PIPELINE, spec, stage_index
from hifirag_core.pipeline.threads import attach_earlier
from hifirag_core.pipeline.variants import variant_overrides
from hifirag_core.profiles import ConfigFile, resolve_config
from hifirag_core.questions import InputError, Question, QuestionSet, load_questions, select_questions
from hifirag_core.resources import data_root
from hifirag_core.store.warehouse import Warehouse, WarehouseError, check_run_id


@dataclass(frozen=True)
class ReuseSpec:
    """Which stages a run takes from ``run_id`` rather than computing."""

    run_id: str
    recompute_from: str | None = None  # the first stage computed again; None: reuse every stage
    questions: frozenset[str] | None = None  # the questions recomputed; None: all of them

    def __post_init__(self) -> None:
        if self.recompute_from is not None:
            spec(self.recompute_from)  # an unknown stage fails here, naming the known ones

    def reused(self, stage: str, question_id: str, round: int = 0) -> bool:
        """Whether the parent's rows stand for this stage of this question. A follow-up round runs between
        the last research stage and the writer, so a round's stages are reused exactly when the reprocess
        starts after every research stage (from the draft on)."""
        if self.recompute_from is None or (self.questions is not None and question_id not in self.questions):
            return True
        if round:
            return stage_index(self.recompute_from) > max(stage_index(s.name) for s in PIPELINE if s.research)
        return stage_index(stage) < stage_index(self.recompute_from)


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


@dataclass(frozen=True)
class RunPlan:
    """One run, planned: the questions, the config, the few-shot examples, the run id and what it reuses.

    Made once (``plan_run``, ``plan_reprocess``) and passed whole from the command to the flow; it pickles
    and serializes, and ``context`` is the slice every stage task receives."""

    run_id: str
    cfg: PipelineConfig
    questions: QuestionSet
    examples: ExampleSet
    data_root: Path
    overrides: tuple[str, ...] = ()
    parent_run_id: str | None = None
    evidence_from: str | None = None
    reuse: ReuseSpec | None = None  # a reprocess: which stages come from the parent's rows
    note: str | None = None

    def context(self, *, shared_limits: bool = False) -> RunContext:
        """What every process taking part in the run needs to know of it."""
        return RunContext(self.run_id, str(self.data_root), self.cfg, self.examples, self.evidence_from,
                          self.reuse, shared_limits)


def plan_run(
    questions_path: str | Path,
    *,
    variant: str = "final",
    overrides: Sequence[str] = (),
    run_id: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    ids: Sequence[str] | None = None,
    root: str | Path | None = None,
    fields: dict[str, str] | None = None,
    evidence_from: str | None = None,
    profile: str | None = None,
    config_file: str | Path | None = None,
) -> RunPlan:
    """Everything a run needs, validated before anything is written: made once, by the command or the
    flow that starts the run, and handed on whole (the questions file is read here and only here).

    The config is the defaults, the config file (``config_file`` or ``$HIFIRAG_CONFIG``), the profile,
    the variant, then ``overrides`` (``hifirag_core.profiles``)."""
    path = Path(questions_path)
    cfg = resolve_config(variant=variant, variant_settings=variant_overrides(variant), overrides=overrides,
                         profile=profile, config_file=config_file)
    if uses_real_backends(cfg):  # a missing key stops the run before anything is written
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    every = load_questions(path, fields=fields)
    examples = resolve_example_set(cfg.generation.examples, every.format)
    questions = select_questions(every, limit=limit, sample=sample, ids=ids, exclude_ids=examples.ids)
    check_steering(cfg, questions)
    root_path = data_root(root)
    questions = with_earlier_turns(Warehouse(root_path), questions)
    if evidence_from is not None:
        _require_run(Warehouse(root_path), evidence_from, "--evidence-from")
    if run_id is None:
        key = [questions.fingerprint, cfg.fingerprint(), evidence_from]
        run_id = f"{questions.slug}-{variant}-{stable_hash(key, 8)}"
    return RunPlan(check_run_id(run_id), cfg, questions, examples, root_path, tuple(overrides),
                   evidence_from=evidence_from)


def with_earlier_turns(warehouse: Warehouse, questions: QuestionSet) -> QuestionSet:
    """The questions with the answer each one's ``follows`` names read from the warehouse (a follow-up turn of an
    earlier run's answer); an answer that is unknown or not given fails here, each naming its line."""
    if not any(q.meta.get("follows") is not None for q in questions.questions):
        return questions
    followed, problems = attach_earlier(warehouse, questions.questions)
    if problems:
        raise InputError(questions.path, problems)
    return dataclasses.replace(questions, questions=tuple(followed))


def check_steering(cfg: PipelineConfig, questions: QuestionSet) -> None:
    """Each question's own steering fields with the run's: an impossible window or site set fails here."""
    problems = [f"line {q.line_no} ({q.id}): with the run's steering, {problem}"
                for q in questions.questions if q.steering for problem in steering_conflicts(cfg, q.steering)]
    if problems:
        raise InputError(questions.path, problems)


def _require_run(warehouse: Warehouse, run_id: str, what: str) -> list[tuple]:
    rows = warehouse.query("SELECT config_json, variant, dataset, evidence_from FROM runs WHERE run_id = ?",
                           [check_run_id(run_id)]).rows
    if not rows:
        raise WarehouseError(f"{what}: no run {run_id!r} in {warehouse.root} (see `hifirag runs`)")
    return rows


def plan_reprocess(
    parent_run_id: str,
    *,
    from_stage: str,
    question_ids: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
    run_id: str | None = None,
    root: str | Path | None = None,
    profile: str | None = None,
) -> RunPlan:
    """A run derived from ``parent_run_id``: stages before ``from_stage`` (and every stage of the
    questions not chosen) come from the parent's rows; the rest is computed with the profile, then
    ``overrides``, over the parent's config (the config file is not read again: the parent's config
    holds what it said)."""
    warehouse = Warehouse(data_root(root))
    config_json, variant, dataset, evidence_from = _require_run(warehouse, parent_run_id, "reprocess")[0]
    spec = ReuseSpec(parent_run_id, from_stage, frozenset(question_ids) if question_ids else None)
    cfg = resolve_config(variant=variant, overrides=overrides, profile=profile, base=json.loads(config_json),
                         file=ConfigFile())
    if uses_real_backends(cfg):
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    stored = warehouse.query(
        "SELECT question_id, query, reference, line_no, meta_json FROM questions WHERE run_id = ? ORDER BY line_no",
        [parent_run_id]).rows
    questions = tuple(Question(qid, query, ref, line_no or 0, json.loads(meta) if meta else {})
                      for qid, query, ref, line_no, meta in stored)
    unknown = sorted(set(question_ids or ()) - {q.id for q in questions})
    if unknown:
        raise WarehouseError(f"run {parent_run_id!r} has no question(s) {unknown}")
    fmt = dataset if dataset in ("mmu_ragent", "docs_faq") else "custom"
    qs = with_earlier_turns(warehouse, QuestionSet(Path(f"run:{parent_run_id}"), fmt, questions))
    examples = resolve_example_set(cfg.generation.examples, fmt)
    if run_id is None:
        run_id = f"{parent_run_id}.re-{stable_hash([from_stage, sorted(question_ids or []), list(overrides)], 6)}"
    chosen = f"{len(question_ids)} question(s)" if question_ids else "every question"
    note = f"reprocess of {parent_run_id} from {from_stage} for {chosen}"
    return RunPlan(check_run_id(run_id[:128]), cfg, qs, examples, warehouse.root, tuple(overrides),
                   parent_run_id=parent_run_id, evidence_from=evidence_from, reuse=spec, note=note)
