"""The stage specs are the one description of the pipeline: what each stage reads, how it is retried."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from hifirag_core.config import build_config
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.pipeline.plan import RunContext
from hifirag_core.pipeline.runner import question_steps
from hifirag_core.pipeline.specs import (
    IO_RETRY,
    PIPELINE,
    STAGE_NAMES,
    StageSpec,
    Trail,
    spec,
)
from hifirag_core.pipeline.variants import VARIANTS, variant_overrides
from hifirag_core.pipeline.wiring import build_runtime
from hifirag_core.questions import Question


class ConfigRecorder:
    """A config that answers like the real one and notes the path of every field read."""

    def __init__(self, model: BaseModel, reads: set[str], path: str = ""):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)
        if name not in type(self._model).model_fields:
            return value  # a method (slice, fingerprint, model_dump): reads nothing by itself
        path = f"{self._path}.{name}" if self._path else name
        if isinstance(value, BaseModel):
            return ConfigRecorder(value, self._reads, path)
        self._reads.add(path)
        return value


def _covered(read: str, declared: tuple[str, ...]) -> bool:
    return any(read == d or read.startswith(d + ".") for d in declared)


def stage_reads(data_root, variant: str, questions: list[Question], examples: ExampleSet,
                pipeline: tuple[StageSpec, ...] = PIPELINE, overrides: dict | None = None) -> dict[str, set[str]]:
    """Run every stage of ``variant`` under a recording config; the fields each stage read."""
    cfg = build_config(variant_overrides(variant), overrides, variant=variant)
    reads: set[str] = set()
    recorder = ConfigRecorder(cfg, reads)
    rt = build_runtime(RunContext("spec-check", str(data_root), cfg, examples))
    rt.cfg = recorder  # type: ignore[assignment]  (the stages and the offline models read through it)
    for model in (rt.filter_model, rt.writer_model):
        if hasattr(model, "cfg"):
            model.cfg = recorder
    seen: dict[str, set[str]] = {}
    by_name = {s.name: s for s in pipeline}
    for question in questions:
        trail = Trail(question, rt)
        for step, round_no in question_steps(trail):  # every stage the variant runs, follow-up rounds too
            stage = by_name.get(step.name, step)
            params = stage.gather_for(trail, round_no)  # gathered inputs are fingerprinted whole: they key it
            reads.clear()
            trail.record(stage.run(question, params, rt, round_no))
            seen.setdefault(stage.name, set()).update(reads)
    return seen


def undeclared_reads(data_root, variant: str, questions: list[Question], examples: ExampleSet,
                     pipeline: tuple[StageSpec, ...] = PIPELINE, overrides: dict | None = None) -> dict[str, set[str]]:
    """Run every stage of ``variant`` under a recording config; the fields each read beyond its spec."""
    declared = {s.name: s.allowed_reads() for s in pipeline}
    found = stage_reads(data_root, variant, questions, examples, pipeline, overrides)
    extra = {name: {r for r in reads if not _covered(r, declared[name])} for name, reads in found.items()}
    return {name: missing for name, missing in extra.items() if missing}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_stage_reads_a_config_field_its_spec_does_not_declare(variant, data_root, examples_file):
    from hifirag_core.llm.examples import resolve_example_set
    from tests.support.sitegen import QUESTIONS

    questions = [Question(q["iid"], q["query"], None, i) for i, q in enumerate(QUESTIONS[:2], 1)]
    examples = resolve_example_set(str(examples_file), "custom")
    assert undeclared_reads(data_root, variant, questions, examples) == {}


def test_the_recorder_catches_a_missing_declaration(data_root, examples_file):
    """Without ``search.enabled`` in its spec, the query plan's cache key would ignore search being off."""
    from dataclasses import replace

    from hifirag_core.llm.examples import resolve_example_set
    from tests.support.sitegen import QUESTIONS

    narrowed = replace(spec("query_plan"), reads=("query_plan", "backends.filter_llm", "models.filter"))
    examples = resolve_example_set(str(examples_file), "custom")
    found = undeclared_reads(data_root, "final", [Question("q1", QUESTIONS[0]["query"], None, 1)], examples,
                             pipeline=(narrowed, *PIPELINE[1:]))
    assert found == {"query_plan": {"search.enabled"}}


def test_search_off_and_on_give_the_query_plan_different_cache_keys(data_root):
    cfg_on = build_config()
    cfg_off = build_config(overrides={"search": {"enabled": False}})
    question = Question("q1", "How do I vacuum a table?", None, 1)
    keys = {spec("query_plan").cache_key(question, {}, build_runtime(RunContext("k", str(data_root), cfg, ExampleSet("", ()))))
            for cfg in (cfg_on, cfg_off)}
    assert len(keys) == 2


def test_every_stage_is_one_spec_and_io_stages_retry_transient_errors_only():
    from hifirag_core.errors import PermanentError, TransientError

    paper = ("query_plan", "search", "url_filter", "fetch", "sections", "section_rank", "draft", "refine",
             "citations", "answer")
    assert tuple(n for n in STAGE_NAMES if n in paper) == paper  # the paper's stages, in its order (ours may join)
    assert {s.name for s in PIPELINE if s.io} >= {"query_plan", "search", "url_filter", "fetch", "section_rank",
                                                  "draft", "refine", "citations"}
    for stage in PIPELINE:
        assert stage.retry == (IO_RETRY if stage.io else stage.retry) and (stage.retry.retries > 0) == stage.io
        assert all(stage.tables)
    assert IO_RETRY.should_retry(TransientError("503"))
    assert not IO_RETRY.should_retry(PermanentError("400 bad request"))
    assert not IO_RETRY.should_retry(KeyError("a bug in the stage"))


# Every steering control set, so that every stage that could read one does: a question in English asked
# for a short French answer, from the test site only, in a window that keeps its (undated) pages.
STEERING = {"steer": {"sites": ["tidewater.example"], "exclude_sites": ["blog.tidewater.example"],
                      "after": "2001-01-01", "before": "2030-01-01", "undated": "keep", "language": "fr",
                      "length": "short", "source_dates": True}}
QUESTION_FIELDS = {"sites": ["tidewater.example"], "exclude_sites": ["x.example"], "after": "2002-02-02",
                   "before": "2025-01-01", "language": "de", "length": "long"}


def _steer_fields(reads) -> set[str]:
    return {r for r in reads if r.startswith("steer.")}


def test_each_steering_control_keys_exactly_the_stages_that_read_it(data_root, examples_file):
    """With every control set, no stage reads one it does not declare, and every stage reads every one it
    declares: the declaration (which keys the cache) is exactly what the stage depends on."""
    from hifirag_core.llm.examples import resolve_example_set
    from tests.support.sitegen import QUESTIONS

    questions = [Question(q["iid"], q["query"], None, i) for i, q in enumerate(QUESTIONS[:2], 1)]
    examples = resolve_example_set(str(examples_file), "custom")
    found = stage_reads(data_root, "final", questions, examples, overrides=STEERING)
    for stage in PIPELINE:
        declared = _steer_fields(stage.reads)
        assert _steer_fields(found.get(stage.name, set())) == declared, stage.name
    assert {s.name for s in PIPELINE if _steer_fields(s.reads)} == {
        "search", "url_filter", "fetch", "draft", "refine", "answer"}


def test_a_questions_own_steering_fields_key_exactly_the_stages_that_declare_them(data_root):
    """A question's own field changes the cache key of the stages that declare that control, and only theirs."""
    rt = build_runtime(RunContext("k", str(data_root), build_config(), ExampleSet("", ())))
    plain = Question("q1", "How do I vacuum a table?", None, 1)
    for name, value in QUESTION_FIELDS.items():
        steered = Question("q1", plain.query, None, 1, {name: value})
        for stage in PIPELINE:
            changed = stage.cache_key(plain, {}, rt) != stage.cache_key(steered, {}, rt)
            assert changed == (f"steer.{name}" in stage.reads), (name, stage.name)


def test_a_run_level_control_keys_the_same_stages_as_the_questions_own(data_root):
    """The same value set for the run or on the question gives the same keys."""
    plain = Question("q1", "How do I vacuum a table?", None, 1)
    own = Question("q1", plain.query, None, 1, {"length": "short", "sites": ["tidewater.example"]})
    run = build_runtime(RunContext("k", str(data_root), build_config(
        overrides={"steer": {"length": "short", "sites": ["tidewater.example"]}}), ExampleSet("", ())))
    bare = build_runtime(RunContext("k", str(data_root), build_config(), ExampleSet("", ())))
    for stage in PIPELINE:
        assert stage.cache_key(plain, {}, run) == stage.cache_key(own, {}, bare), stage.name
