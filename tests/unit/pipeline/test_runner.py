"""The question runner's policy, without Prefect: reuse, the deadline, fallbacks, the ledger, disk full and
whether a follow-up round may start. The stages run in this process on the offline default runtime; a fake
``execute`` breaks, delays or counts them, and a fake clock stands for the question's time."""

import errno

import pytest

from hifirag_core.limits import Budget, RunGuards
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.runner import Executed, QuestionRunner, in_process, question_steps, run_trail
from hifirag_core.pipeline.specs import ANSWER_STAGE, BASE_STAGES, spec
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.store.disk import DiskFullError

QUESTION = Question("q1", "How do I limit the bandwidth a sync uses?", None, 1)


class Clock:
    """The question's clock, moved by hand."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Stages:
    """An ``execute`` that computes each stage here, remembers what it was asked (stage, round, key), and
    does instead what ``instead`` says for a stage (return an ``Executed`` or raise), or ``after`` once it ran."""

    def __init__(self, question: Question, rt, instead=None, after=None):
        self.plain = in_process(question, rt)
        self.instead = instead or {}
        self.after = after or {}
        self.calls: list[tuple[str, int, str]] = []

    def __call__(self, stage, params, key, round) -> Executed:
        self.calls.append((stage.name, round, key))
        if stage.name in self.instead:
            return self.instead[stage.name]()
        done = self.plain(stage, params, key, round)
        if stage.name in self.after:
            self.after[stage.name]()
        return done


class Stored:
    """Another run's rows for some stages (``Runtime.reuse``)."""

    def __init__(self, outputs: dict[str, StageOutput], run_id: str = "run-before"):
        self.outputs, self.run_id = outputs, run_id

    def stored_output(self, stage: str, question: Question, round: int = 0):
        return (self.outputs[stage], self.run_id) if stage in self.outputs and round == 0 else None

    def recompute(self, stage: str, question_id: str, round: int = 0) -> bool:
        return False


@pytest.fixture
def rt(data_root):
    from hifirag_core.config import build_config, parse_overrides
    from hifirag_core.llm.examples import ExampleSet
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.wiring import build_runtime

    cfg = build_config(parse_overrides(["generation.examples=none"]))
    return build_runtime(RunContext("runner", str(data_root), cfg, ExampleSet("", ())))


def _raise(exc: BaseException):
    def go():
        raise exc

    return go


# --- the walk and the ledger ---------------------------------------------------------------------------


def test_every_step_goes_through_execute_with_the_key_the_ledger_keeps(rt):
    execute = Stages(QUESTION, rt)
    seen = []
    result = QuestionRunner(QUESTION, rt, execute, observer=lambda out, row: seen.append((out.stage, row.stage))).run()
    assert [r.stage for r in result.ledger] == list(BASE_STAGES) == [name for name, _, _ in execute.calls]
    assert [r.cache_key for r in result.ledger] == [key for _, _, key in execute.calls]
    assert all(key.startswith(f"{name}-") for name, _, key in execute.calls)
    assert seen == [(name, name) for name in BASE_STAGES]
    assert result.answer.status == "ok" and not any(result.cached) and result.disk_full is None
    # the key is the stage's own: computed again from the same trail, it is the same
    trail = Trail(QUESTION, rt)
    for output in result.outputs[:3]:
        stage = spec(output.stage)
        assert stage.cache_key(QUESTION, stage.gather_for(trail, 0), rt) == result.ledger[len(trail.outputs)].cache_key
        trail.record(output)


def test_a_stage_the_cache_served_is_marked_cached(rt):
    plain = in_process(QUESTION, rt)
    served = {"search"}

    def execute(stage, params, key, round):
        done = plain(stage, params, key, round)
        return Executed(done.output, cached=stage.name in served)

    result = QuestionRunner(QUESTION, rt, execute).run()
    assert {r.stage for r in result.ledger if r.cached} == served


def test_the_plain_loop_is_the_runner_with_stages_run_here(rt):
    trail = run_trail(QUESTION, rt)
    result = QuestionRunner(QUESTION, rt, Stages(QUESTION, rt)).run()
    assert list(trail.outputs) == list(BASE_STAGES)
    assert trail[ANSWER_STAGE].records == result.answer.records


# --- the deadline ----------------------------------------------------------------------------------------


def test_once_the_deadline_passes_each_later_stage_leaves_its_fallback_rows_and_the_walk_goes_on(rt):
    clock = Clock()
    execute = Stages(QUESTION, rt, after={"fetch": lambda: setattr(clock, "now", clock.now + rt.cfg.limits.deadline_s + 1)})
    result = QuestionRunner(QUESTION, rt, execute, clock=clock).run()
    names = list(BASE_STAGES)
    done = names.index("fetch") + 1
    assert [r.stage for r in result.ledger] == names  # every stage leaves a row, the answer too
    assert [name for name, _, _ in execute.calls] == names[:done]  # none after the deadline was executed
    assert all(r.status != "deadline_exceeded" for r in result.ledger[:done])
    late = result.ledger[done:]
    assert late and all(r.status == "deadline_exceeded" and r.cache_key is None and not r.cached for r in late)
    assert result.answer.status == "deadline_exceeded" and result.answer.records[0].status == "deadline_exceeded"
    assert result.answer.records[0].error == "the question's deadline passed"


def test_before_the_deadline_no_stage_falls_back_for_it(rt):
    clock = Clock()
    execute = Stages(QUESTION, rt, after={"fetch": lambda: setattr(clock, "now", clock.now + rt.cfg.limits.deadline_s - 1)})
    result = QuestionRunner(QUESTION, rt, execute, clock=clock).run()
    assert [name for name, _, _ in execute.calls] == list(BASE_STAGES)
    assert all(r.status != "deadline_exceeded" for r in result.ledger)


# --- failures --------------------------------------------------------------------------------------------


def test_an_execute_that_raises_leaves_the_stages_fallback_rows_and_the_question_goes_on(rt):
    execute = Stages(QUESTION, rt, instead={"url_filter": _raise(RuntimeError("the filter broke"))})
    result = QuestionRunner(QUESTION, rt, execute).run()
    runner_rows = {r.stage: r for r in result.ledger}
    assert runner_rows["url_filter"].status == "failed" and "the filter broke" in runner_rows["url_filter"].error
    url_filter = next(o for o in result.outputs if o.stage == "url_filter")
    # the URL filter's fallback: the search engine's top results, each marked with the failure
    assert url_filter.records and all(r.status == "failed" for r in url_filter.records)
    assert [name for name, _, _ in execute.calls] == list(BASE_STAGES)  # the later stages still ran
    assert runner_rows["fetch"].status == "ok"


def test_an_error_execute_returns_leaves_the_fallback_rows_with_its_status(rt):
    from hifirag_core.errors import BudgetExceededError

    execute = Stages(QUESTION, rt, instead={"draft": lambda: Executed(error=BudgetExceededError("spent"))})
    result = QuestionRunner(QUESTION, rt, execute).run()
    draft = next(o for o in result.outputs if o.stage == "draft")
    assert draft.status == "budget_exceeded" and draft.records[0].status == "budget_exceeded"
    assert next(r for r in result.ledger if r.stage == "draft").status == "budget_exceeded"


# --- a full disk -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["raised", "returned", "an OSError"])
def test_a_full_disk_stops_the_question_without_a_fallback_row(rt, how, monkeypatch):
    full = DiskFullError("disk full at /tmp/cache: 0.0 MB free")
    instead = {"raised": _raise(full), "returned": lambda: Executed(error=full),
               "an OSError": _raise(OSError(errno.ENOSPC, "No space left on device"))}[how]
    execute = Stages(QUESTION, rt, instead={"fetch": instead})
    result = QuestionRunner(QUESTION, rt, execute).run()
    names = list(BASE_STAGES)
    assert [r.stage for r in result.ledger] == names[:names.index("fetch")]  # nothing for fetch or after it
    assert result.disk_full and result.disk_full.startswith("disk full at")
    if how != "an OSError":
        assert result.disk_full == str(full)
    from hifirag_core.pipeline import runner

    monkeypatch.setattr(runner, "in_process", lambda _question, _rt: execute)
    with pytest.raises(DiskFullError):  # the plain loop raises it
        run_trail(QUESTION, rt)


# --- reuse -----------------------------------------------------------------------------------------------


def test_a_stored_output_is_taken_not_executed_and_the_ledger_names_its_run(rt):
    first = QuestionRunner(QUESTION, rt).run()
    stored = {o.stage: o for o in first.outputs if o.stage in ("query_plan", "search")}
    rt.reuse = Stored(stored)
    execute = Stages(QUESTION, rt)
    result = QuestionRunner(QUESTION, rt, execute).run()
    rows = {r.stage: r for r in result.ledger}
    for name in stored:
        assert rows[name].cached and rows[name].source_run_id == "run-before" and rows[name].cache_key is None
        assert next(o for o in result.outputs if o.stage == name) is stored[name]
    assert [name for name, _, _ in execute.calls] == [n for n in BASE_STAGES if n not in stored]
    assert not any(r.cached or r.source_run_id for n, r in rows.items() if n not in stored)


def test_a_stored_output_is_taken_even_after_the_deadline(rt):
    first = QuestionRunner(QUESTION, rt).run()
    rt.reuse = Stored({o.stage: o for o in first.outputs})
    clock = Clock()
    runner = QuestionRunner(QUESTION, rt, Stages(QUESTION, rt), clock=clock)
    clock.now += rt.cfg.limits.deadline_s + 1
    result = runner.run()
    assert all(r.cached and r.status != "deadline_exceeded" for r in result.ledger)


# --- may another round start ----------------------------------------------------------------------------


def _runner(rt, clock, budget=None) -> QuestionRunner:
    if budget is not None:
        rt.guards = RunGuards(rt.cfg.limits, budget=budget)
    return QuestionRunner(QUESTION, rt, Stages(QUESTION, rt), clock=clock)


def test_another_round_may_start_with_deadline_left_and_budget_unspent(rt):
    clock = Clock()
    runner = _runner(rt, clock, Budget(tokens=100))
    assert runner.may_look_again()
    clock.now += rt.cfg.limits.deadline_s * (1 - rt.cfg.research.min_deadline_left) - 1
    assert runner.may_look_again()


def test_no_round_starts_once_the_deadline_share_is_used_up(rt):
    clock = Clock()
    runner = _runner(rt, clock)
    clock.now += rt.cfg.limits.deadline_s * (1 - rt.cfg.research.min_deadline_left) + 1
    assert not runner.may_look_again()


def test_no_round_starts_once_the_budget_is_spent(rt):
    spent = Budget(tokens=100)
    spent.charge(tokens=100)
    runner = _runner(rt, Clock(), spent)
    assert spent.exhausted and not runner.may_look_again()


def test_the_runner_starts_no_round_its_gate_refuses(data_root):
    """Through the steps: a deep variant's first pass falls short, and a spent budget keeps it from looking again."""
    from hifirag_core.config import build_config, parse_overrides
    from hifirag_core.llm.examples import ExampleSet
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.variants import variant_overrides
    from hifirag_core.pipeline.wiring import build_runtime

    cfg = build_config(variant_overrides("final_deep"),
                       parse_overrides(["generation.examples=none", "url_filter.max_urls=1", "fetch.max_pages=1"]),
                       variant="final_deep")
    question = Question("R1", "How do I limit the bandwidth Tidewater uses during a sync, and what does error E204 mean?",
                        None, 1)

    def rounds(budget) -> set[int]:
        rt = build_runtime(RunContext("runner-deep", str(data_root), cfg, ExampleSet("", ())))
        rt.guards = RunGuards(rt.cfg.limits, budget=budget)
        result = QuestionRunner(question, rt).run()
        return {r.round for r in result.ledger}

    spent = Budget(tokens=100)
    spent.charge(tokens=100)
    assert rounds(Budget(tokens=100)) == {0, 1}  # it falls short, and may look again
    assert rounds(spent) == {0}


def test_question_steps_still_yield_the_first_pass_when_the_gate_refuses(rt):
    trail = Trail(QUESTION, rt)
    names = []
    for stage, round_no in question_steps(trail, lambda: False):
        names.append(stage.name)
        trail.record(stage.run(QUESTION, stage.gather_for(trail, round_no), rt, round_no))
    assert names == list(BASE_STAGES)
