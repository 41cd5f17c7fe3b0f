"""One question through its stages: the pipeline's policy, whatever runs the stages.

``QuestionRunner.run`` walks a question through its steps (``question_steps``) and decides, for each:

* reuse: a stage the run takes from another run's rows (a reprocess, or pinned evidence) is not run;
* the deadline: once the question's deadline has passed, a stage leaves its fallback rows
  (``deadline_exceeded``) and the later stages still run on what the question has;
* failures: a stage that ended with an error leaves its fallback rows, never a hole;
* the ledger: one ``StageRunRecord`` per step (cached or not, from which run, its cache key, its time);
* whether a follow-up round may start (``may_look_again``: deadline left and budget unspent).

How a stage is computed is the caller's ``execute(stage, params, key, round)``: the flow's runs the
stage's Prefect task (cached, retried, its result persisted under ``key``); the plain loop's
(``in_process``, used by ``run_trail``, the benchmarks and the tests) calls ``stage.run`` here and now.
Both walk the same steps with the same policy, and the cache key is computed here only.

A stage whose result found the disk full stops the question: ``run`` sets ``QuestionResult.disk_full``
and leaves no fallback row for it (the caller stops the run, ``flows.answer.run_plan``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hifirag_core.limits import question_deadline
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.specs import ANSWER_STAGE, PIPELINE, ROUND, SPECS, StageSpec
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.records import StageRunRecord
from hifirag_core.store.disk import DiskFullError, disk_full, is_disk_full


@dataclass(frozen=True)
class Executed:
    """What running one stage came to: its output and whether the stage cache served it, or the error it
    ended with (after any retries)."""

    output: StageOutput | None = None
    cached: bool = False
    error: BaseException | None = None


@dataclass
class QuestionResult:
    """One question's stage outputs, in pipeline order, with the ledger row of each."""

    question: Question
    outputs: list[StageOutput] = field(default_factory=list)
    ledger: list[Any] = field(default_factory=list)  # StageRunRecord per output, same order
    seconds: float = 0.0
    disk_full: str | None = None  # the question stopped: a stage's result found the disk full (DiskFullError)

    @property
    def cached(self) -> list[bool]:
        return [row.cached for row in self.ledger]

    @property
    def answer(self) -> StageOutput | None:
        return next((o for o in self.outputs if o.stage == ANSWER_STAGE), None)


# How a stage is computed: (stage, its parameters, its cache key, the round) -> what happened.
Execute = Callable[[StageSpec, dict[str, Any], str, int], Executed]
# Called in the question's thread as each stage finishes (the service streams the steps from it).
StageObserver = Callable[[StageOutput, StageRunRecord], None]
Clock = Callable[[], float]


def in_process(question: Question, rt: Runtime) -> Execute:
    """The plain loop's ``execute``: the stage computed in this thread, with no cache and no retries."""

    def execute(stage: StageSpec, params: dict[str, Any], _key: str, round: int) -> Executed:
        return Executed(stage.run(question, params, rt, round))

    return execute


class QuestionRunner:
    """One question's steps in order, each through ``execute``, with the pipeline's policy around it."""

    def __init__(self, question: Question, rt: Runtime, execute: Execute | None = None,
                 observer: StageObserver | None = None, clock: Clock = time.monotonic):
        self.question = question
        self.rt = rt
        self.execute = execute or in_process(question, rt)
        self.observer = observer
        self.clock = clock
        self.started = clock()
        self.trail = Trail(question, rt)
        self.result = QuestionResult(question)

    def run(self) -> QuestionResult:
        """Every step of the question, under its deadline; a full disk stops it (``result.disk_full``)."""
        try:
            with question_deadline(self.rt.cfg.limits.deadline_s, clock=self.clock, start=self.started):
                for stage, round_no in question_steps(self.trail, self.may_look_again):
                    self.step(stage, round_no)
        except DiskFullError as exc:  # the question stops; the run says so once (flows.answer.run_plan)
            self.result.disk_full = str(exc)
        self.result.seconds = self.clock() - self.started
        return self.result

    def step(self, stage: StageSpec, round: int = 0) -> StageOutput:
        """One stage of the question: reused, past the deadline, executed, or failed; then in the trail,
        the result and the ledger, and shown to the observer."""
        began = self.clock()
        cached, key, source = False, None, None
        stored = self.rt.reuse.stored_output(stage.name, self.question, round) if self.rt.reuse else None
        if stored is not None:
            (output, source), cached = stored, True
        elif began - self.started > self.rt.cfg.limits.deadline_s:
            output = stage.failed(self.question, self.trail, "the question's deadline passed",
                                  status="deadline_exceeded", round=round)
        else:
            params = stage.gather_for(self.trail, round)
            key = stage.cache_key(self.question, params, self.rt, round)  # the one place it is computed
            try:
                done = self.execute(stage, params, key, round)
            except Exception as exc:
                done = Executed(error=exc)
            if done.error is not None or done.output is None:
                error = done.error or RuntimeError(f"stage {stage.name!r} returned no output")
                if is_disk_full(error):  # its result could not be stored: stop, never a fallback row
                    raise disk_full(self.rt.data_root, error) from None
                output = stage.failed(self.question, self.trail, error, round=round)
            else:
                output, cached = done.output, done.cached
        self.trail.record(output)
        self.result.outputs.append(output)
        self.result.ledger.append(StageRunRecord(
            stage=stage.name, round=round, status=output.status, error=output.error, cached=cached,
            source_run_id=source, seconds=elapsed_since(began), cache_key=key, n_rows=len(output.records),
            compute_seconds=output.compute_seconds, cpu_seconds=output.cpu_seconds,
        ))
        if self.observer is not None:
            self.observer(output, self.result.ledger[-1])
        return output

    def may_look_again(self) -> bool:
        """Whether a follow-up round may start: enough of the deadline is left for the writer and the
        checks after it, and the run's budget is not spent."""
        research, limits = self.rt.cfg.research, self.rt.cfg.limits
        if self.clock() - self.started > limits.deadline_s * (1 - research.min_deadline_left):
            return False
        budget = self.rt.guards.budget if self.rt.guards is not None else None
        return not (budget is not None and budget.exhausted)


def question_steps(trail: Trail, may_look_again: Callable[[], bool] = lambda: True
                   ) -> Iterator[tuple[StageSpec, int]]:
    """Every (stage, round) of one question, in order, as the trail grows (consume it one step at a time).

    The first pass runs the pipeline's stages (the research stages only in a variant that looks again).
    After its sufficiency check, while the last check falls short, rounds are left (``research.max_rounds``,
    or the question's own ``depth`` when lower) and ``may_look_again()`` (the runner's deadline and budget)
    agrees, a follow-up round runs; a round whose plan has no new search ends the looking.
    """
    assert trail.rt is not None, "a trail without a runtime cannot run a stage"
    research = trail.rt.cfg.research
    for spec in PIPELINE:
        if not spec.first_pass or (spec.research and not research.enabled):
            continue
        yield spec, 0
        if spec is SPECS["sufficiency"]:
            yield from _follow_up_rounds(trail, question_depth(trail.question, research.max_rounds), may_look_again)


def question_depth(question: Question, max_rounds: int) -> int:
    """The follow-up rounds a question may run: its own ``depth`` (a service request's) under the config's."""
    depth = question.meta.get("depth")
    return min(max_rounds, depth) if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0 else max_rounds


def _follow_up_rounds(trail: Trail, max_rounds: int, may_look_again: Callable[[], bool]
                      ) -> Iterator[tuple[StageSpec, int]]:
    for round_no in range(1, max_rounds + 1):
        if not trail.falls_short() or not may_look_again():
            return
        for spec in ROUND:
            yield spec, round_no
            plan = trail.at("followup", round_no)
            if spec is ROUND[0] and (plan is None or not plan.value):
                return  # nothing left to search for that was not searched before


def run_trail(question: Question, rt: Runtime) -> Trail:
    """Every (stage, round) of one question in a plain loop (no orchestrator, no cache, no retries), with the
    flow's policy (``QuestionRunner``); the trail holds every output."""
    runner = QuestionRunner(question, rt)
    if (full := runner.run().disk_full) is not None:
        raise DiskFullError(full)
    return runner.trail


def run_question(question: Question, rt: Runtime) -> dict[str, StageOutput]:
    """``run_trail``'s first-pass outputs by stage (a follow-up round's are in the trail's ``rounds``)."""
    return run_trail(question, rt).outputs


def elapsed_since(began: float) -> float:
    return round(time.monotonic() - began, 4)
