"""Follow-up turns through the offline pipeline: a question that names the answer it follows reads it, as the warehouse
holds it.

Turn 1 runs and its rows are written as a run writes them; turn 2 names it. The query plan restates turn 2 with turn
1's keywords; turn 1's kept pages and sections join turn 2's evidence and its section ranking judges them again (a
carried section it finds less useful is dropped), and the answer cites one of them, sentence by sentence; the
thread_turns view lists both turns. Two threads never share a follow-up's cached stages, and a follow-up of the
same answer asked again keys every stage as before. A question file's line may follow an earlier run's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hifirag_core.llm.examples import resolve_example_set
from hifirag_core.llm.filter_model import LLMFilterModel
from hifirag_core.llm.parsing import parse_restated
from hifirag_core.llm.prompts import PromptSet
from hifirag_core.pipeline.persistence import write_result
from hifirag_core.pipeline.plan import RunContext, plan_run
from hifirag_core.pipeline.runner import QuestionResult, QuestionRunner
from hifirag_core.pipeline.specs import spec
from hifirag_core.pipeline.threads import load_earlier_turn
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT, variant_overrides
from hifirag_core.pipeline.wiring import build_runtime
from hifirag_core.profiles import resolve_config
from hifirag_core.questions import InputError, Question
from hifirag_core.records import QuestionRecord, RunRecord
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.turns import ThreadContext, ThreadError, merged_question, parse_answer_id
from tests.unit.llm.test_llm_models import ScriptedChat

pytestmark = pytest.mark.slow

SITE = "https://docs.tidewater.example/"
FIRST = "What does Tidewater need to run?"
# Turn 2 reads one page itself (fetch.max_pages=1): the troubleshooting page; the install page comes from turn 1.
SECOND = "And which error means the target folder is not writable?"


class Thread:
    """Runs questions over the test site into one warehouse, each written as a run writes it."""

    def __init__(self, data_root: Path, examples: Path):
        self.root, self.examples = data_root, examples
        self.warehouse = Warehouse(data_root)
        self.runner: QuestionRunner | None = None  # the last question's

    def ask(self, run_id: str, qid: str, text: str, follows: str | None = None, *overrides: str) -> QuestionResult:
        cfg = resolve_config(variant=DEFAULT_RUN_VARIANT, variant_settings=variant_overrides(DEFAULT_RUN_VARIANT),
                             overrides=[f"generation.examples={self.examples}", *overrides])
        rt = build_runtime(RunContext(run_id, str(self.root), cfg, resolve_example_set(str(self.examples), "custom")))
        earlier = load_earlier_turn(self.warehouse, follows) if follows else None
        question = Question(qid, text, None, 1, {"follows": follows} if follows else {}, earlier)
        self.warehouse.write("runs", [RunRecord(status="finished", variant=cfg.variant)], run_id=run_id, stage="run")
        self.warehouse.write("questions", [QuestionRecord(query=text, line_no=1)], run_id=run_id, stage="input",
                             question_id=qid)
        if earlier is not None:
            self.warehouse.write("turns", [earlier.turn_row()], run_id=run_id, stage="thread", question_id=qid)
        self.runner = QuestionRunner(question, rt)
        result = self.runner.run()
        write_result(self.warehouse, run_id, result)
        return result

    def rows(self, sql: str, *params) -> list[dict]:
        result = self.warehouse.query(sql, list(params))
        return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _output(result: QuestionResult, stage: str):
    return next(o for o in result.outputs if o.stage == stage and o.round == 0)


@pytest.fixture
def thread(data_root, examples_file) -> Thread:
    return Thread(data_root, examples_file)


def test_a_follow_up_reads_the_earlier_turn_ranks_its_kept_sections_again_and_cites_one(thread):
    first = thread.ask("turn-one", "t1", FIRST)
    kept_before = {(d.url, d.section_id): d.score for d in _output(first, "section_rank").records if d.kept}
    assert {url for url, _ in kept_before} >= {SITE + "install.html"}

    second = thread.ask("turn-two", "t2", SECOND, "turn-one/t1", "fetch.max_pages=1",
                        "section_rank.min_relative_score=0.9")
    plan = _output(second, "query_plan").records[0]
    # the plan read the thread: the follow-up with the earlier question's keywords, searched as such
    assert plan.restated_by == "offline-merge" and plan.question == f"{SECOND} (Tidewater run)"
    assert any("Tidewater" in q for q in plan.queries)
    # every later stage answers the restated question, and is keyed by it
    trail = thread.runner.trail
    assert (trail.asked.query, trail.question.query) == (SECOND, plan.question)
    url_filter = spec("url_filter")
    params = url_filter.gather_for(trail, 0)
    assert params["question"] is trail.question
    key = next(row.cache_key for row in second.ledger if row.stage == "url_filter" and row.round == 0)
    assert key == url_filter.cache_key(trail.asked, params, thread.runner.rt)
    assert key != url_filter.cache_key(trail.asked, {k: v for k, v in params.items() if k != "question"},
                                       thread.runner.rt)

    pages = _output(second, "fetch").records
    carried = [p for p in pages if p.reused_from == "turn:turn-one/t1"]
    assert [p.url for p in pages if p.reused_from is None] == [SITE + "troubleshooting.html"]
    assert [p.url for p in carried] == [SITE + "install.html"] and carried[0].content_sha256

    # every section turn 1 kept of the carried page was judged again, against the restated question: scored
    # afresh (not turn 1's scores), and the one it found least useful dropped
    ranked = {(d.url, d.section_id): d for d in _output(second, "section_rank").records}
    again = {key: ranked[key] for key in kept_before if key[0] == SITE + "install.html"}
    assert len(again) == sum(1 for url, _ in kept_before if url == SITE + "install.html") >= 2
    assert all(d.method == "offline-hybrid" and d.score is not None for d in again.values())
    assert all(d.score != kept_before[key] for key, d in again.items())
    assert any(d.kept for d in again.values()) and not all(d.kept for d in again.values())

    # the answer cites a section turn 1 kept, per sentence, and the ledger finds its page's stored snapshot
    cited = thread.rows("""SELECT l.sentence, l.url, l.section_id, l.content_sha256, l.reused_from FROM citation_ledger l
                           WHERE l.run_id = 'turn-two' AND l.question_id = 't2' AND l.source_rank = 1""")
    from_before = [c for c in cited if (c["url"], c["section_id"]) in kept_before and c["url"].endswith("install.html")]
    assert from_before and all(c["reused_from"] == "turn:turn-one/t1" and c["content_sha256"] for c in from_before)

    turns = thread.rows("SELECT * FROM thread_turns ORDER BY turn")
    assert [(t["thread_id"], t["turn"], t["answer_id"], t["follows"]) for t in turns] == [
        ("turn-one/t1", 1, "turn-one/t1", None), ("turn-one/t1", 2, "turn-two/t2", "turn-one/t1")]
    assert turns[1]["read_as"] == plan.question and turns[1]["question"] == SECOND
    assert turns[1]["earlier_pages"] == len({url for url, _ in kept_before})
    assert turns[1]["earlier_sections"] == len(kept_before)
    assert (turns[1]["carried_pages"], turns[1]["carried_sections"]) == (1, len(again))
    assert turns[1]["carried_kept"] == sum(1 for d in again.values() if d.kept)
    assert turns[1]["cited_from_earlier"] >= 1 and turns[0]["answer_status"] == turns[1]["answer_status"] == "ok"


def test_a_third_turn_reads_the_whole_thread_and_its_place(thread):
    thread.ask("r", "t1", FIRST)
    thread.ask("r", "t2", "And on Windows?", "r/t1")
    earlier = load_earlier_turn(thread.warehouse, "r/t2")
    assert earlier.turn == 2 and earlier.thread.id == "r/t1"
    assert earlier.questions == (FIRST, "And on Windows? (Tidewater run)")
    assert earlier.turn_row().turn == 3 and earlier.turn_row().thread_question_id == "t1"


def test_two_threads_never_share_a_follow_ups_cached_stages_and_a_plain_question_reads_nothing(thread):
    thread.ask("r", "a", FIRST)
    thread.ask("r", "b", "How do I limit the bandwidth Tidewater uses during a sync?")
    keys = {}
    for name, follows in (("after-a", "r/a"), ("after-b", "r/b"), ("after-a-again", "r/a")):
        result = thread.ask("follow", name, "And on Windows?", follows)
        keys[name] = {(row.stage, row.round): row.cache_key for row in result.ledger}
    plain = thread.ask("follow", "plain", "And on Windows?")
    plain_keys = {(row.stage, row.round): row.cache_key for row in plain.ledger}
    # the same follow-up after two different answers: its plan, and the stages that read the earlier turn, differ
    for stage in ("query_plan", "fetch", "sections", "section_rank", "draft"):
        assert keys["after-a"][(stage, 0)] != keys["after-b"][(stage, 0)], stage
        assert keys["after-a"][(stage, 0)] != plain_keys[(stage, 0)], stage
    # after the same answer again: every stage keyed as the first time (a repeated follow-up computes nothing new)
    assert keys["after-a"] == keys["after-a-again"]
    # the question that follows nothing is planned from its own words only
    assert _output(plain, "query_plan").records[0].question is None


def test_a_question_file_may_follow_an_earlier_runs_answer(thread, tmp_path):
    thread.ask("earlier-run", "t1", FIRST)
    lines = [{"id": "F1", "query": "And on Windows?", "follows": "earlier-run/t1"},
             {"id": "F2", "query": "How do I install it?"}]
    path = tmp_path / "thread.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    plan = plan_run(path, root=thread.root, overrides=[f"generation.examples={thread.examples}"])
    f1, f2 = plan.questions.questions
    assert f1.earlier is not None and f1.earlier.answer.id == "earlier-run/t1" and f2.earlier is None
    assert [p.url for p in f1.earlier.pages] == [p.url for p in load_earlier_turn(thread.warehouse, "earlier-run/t1").pages]
    # the answer a line follows is part of what is asked: the same lines without it are another run
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "follows"}) + "\n" for line in lines),
                    encoding="utf-8")
    assert plan_run(path, root=thread.root, overrides=[f"generation.examples={thread.examples}"]).run_id != plan.run_id

    bad = [{"id": "B1", "query": "And on Windows?", "follows": "earlier-run/nope"},
           {"id": "B2", "query": "Why?", "follows": "B1"},
           {"id": "B3", "query": "How?", "follows": 7}]
    path.write_text("".join(json.dumps(line) + "\n" for line in bad), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        plan_run(path, root=thread.root)
    problems = caught.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("line 1 (B1): follows: no answer earlier-run/nope")
    assert problems[1].startswith("line 2 (B2): follows:") and "question B1 of this file" in problems[1]
    assert problems[2].startswith("line 3 (B3): follows: send the answer id")


# --- the pieces, without the pipeline ----------------------------------------------------------------------


def test_an_answer_id_is_a_run_and_a_question_split_at_the_first_slash():
    ref = parse_answer_id(" service-offline-final-1a2b3c4d-20261205/run-20261205T101500-ab12cd34 ")
    assert (ref.run_id, ref.question_id) == ("service-offline-final-1a2b3c4d-20261205", "run-20261205T101500-ab12cd34")
    assert parse_answer_id("r1/a/b").question_id == "a/b"  # a question id may hold a slash; a run id never does
    for bad, says in (("", "send the answer id"), ("no-slash", "not an answer id"), ("/q", "not an answer id"),
                      ("run id/q", "not an answer id"), ("r/\x07", "control characters"), (3, "send the answer id"),
                      ("r/" + "q" * 500, "at most 400")):
        with pytest.raises(ThreadError, match=says):
            parse_answer_id(bad)


def test_the_offline_restatement_merges_the_earlier_questions_keywords_latest_first():
    context = ThreadContext(("How do I install Tidewater with pip?", "And on Windows? (Tidewater install pip)"), "")
    assert merged_question("What about a proxy?", context) == "What about a proxy? (Windows Tidewater install pip)"
    assert merged_question("Does Tidewater run on Windows?", context) == "Does Tidewater run on Windows? (install pip)"
    assert merged_question("Why?", ThreadContext((), "")) == "Why?"


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"question": "Does Tidewater run on Windows?"}', "Does Tidewater run on Windows?"),
    ('```json\n{"Question": "Does Tidewater run on Windows?"}\n```', "Does Tidewater run on Windows?"),
    ('Sure! {"rewritten_question": "Does Tidewater run on Windows?"}', "Does Tidewater run on Windows?"),
    ('"Does Tidewater run on Windows?"', "Does Tidewater run on Windows?"),
    ('["Does Tidewater run on Windows?"]', "Does Tidewater run on Windows?"),
    ("<think>the user means Tidewater</think>\n**Rewritten question:** Does Tidewater run on Windows?",
     "Does Tidewater run on Windows?"),
    ("Question: Does Tidewater run on Windows?\n\nThis asks about the platforms.", "Does Tidewater run on Windows?"),
])
def test_a_restated_question_is_read_from_the_shapes_real_models_reply_in(reply, expected):
    parsed = parse_restated(reply)
    assert parsed.ok and parsed.value == [expected]


@pytest.mark.parametrize("reply", [None, "", '{"question": "   "}', "```\n```", "x" * 1200])
def test_a_reply_without_a_usable_question_is_not_one(reply):
    parsed = parse_restated(reply)
    assert not parsed.ok and parsed.error


def test_the_cheap_model_restates_with_its_own_prompt_and_falls_back_to_the_offline_merge():
    context = ThreadContext(("What does Tidewater need to run?",), "Tidewater runs on Linux and macOS.")
    chat = ScriptedChat('{"question": "Does Tidewater run on Windows?"}', "I cannot help with that. " * 60)
    model = LLMFilterModel(chat, PromptSet.load())
    done = model.restate("And on Windows?", context)
    assert (done.status, done.value, done.method) == ("ok", "Does Tidewater run on Windows?", "llm")
    sent = chat.calls[0]
    assert sent["prompt_name"] == "restate" and sent["prompt_hash"] == PromptSet.load()["restate"].hash
    assert "1. What does Tidewater need to run?" in sent["turns"][0].text
    assert "<web_text>\nTidewater runs on Linux and macOS.\n</web_text>" in sent["turns"][0].text
    assert sent["schema"]["required"] == ["question"]
    fell_back = model.restate("And on Windows?", context)
    assert fell_back.status == "parse_error" and fell_back.method == "llm+fallback:offline-merge"
    assert fell_back.value == merged_question("And on Windows?", context)
    # the restatement keys a follow-up's plan by its own prompt, apart from the query plan's
    assert "restate=" + PromptSet.load()["restate"].hash in model.job_identity("restate")
    assert "restate=" not in model.job_identity("query_plan")


def test_hifirag_answers_shows_a_turns_thread_and_variants_say_it_departs_from_the_paper(thread):
    from typer.testing import CliRunner

    from flows.cli import app

    thread.ask("turn-one", "t1", FIRST)
    thread.ask("turn-two", "t2", SECOND, "turn-one/t1", "fetch.max_pages=1")
    runner = CliRunner()
    shown = runner.invoke(app, ["answers", "turn-two", "--data-root", str(thread.root)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "turn 2 of thread turn-one/t1, following turn-one/t1 (--thread shows every turn)" in shown.output
    whole = runner.invoke(app, ["answers", "turn-two", "-q", "t2", "--thread", "--data-root", str(thread.root)],
                          env={"COLUMNS": "200"})
    assert whole.exit_code == 0, whole.output
    out = whole.output
    assert "Thread turn-one/t1: 2 turns" in out
    assert out.index("turn 1: turn-one/t1") < out.index(FIRST) < out.index("turn 2: turn-two/t2, following turn-one/t1")
    assert f"read as: {SECOND} (Tidewater run)" in out and "the answer cites" in out
    assert out.count("[1] https://docs.tidewater.example/") == 2  # each turn's numbered sources
    alone = runner.invoke(app, ["answers", "turn-one", "--thread", "--data-root", str(thread.root)])
    assert "Thread turn-one/t1: 2 turns" in alone.output  # turn 1 shows the thread that followed it up
    departures = runner.invoke(app, ["variants"], env={"COLUMNS": "250"}).output
    assert "prompts/restate.txt, ours" in " ".join(departures.split()) and "follows (a question's" in departures


def test_a_variant_that_reads_no_web_content_restates_a_follow_up_but_carries_no_page(thread):
    thread.ask("r", "t1", FIRST)
    result = thread.ask("no-search", "t2", SECOND, "r/t1", "search.enabled=false")
    assert _output(result, "query_plan").records[0].question == f"{SECOND} (Tidewater run)"
    assert _output(result, "search").status == "skipped"
    assert _output(result, "fetch").records == [] and _output(result, "sections").records == []
