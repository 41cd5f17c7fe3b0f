"""The MMU-RAGent contract as pure functions: request bodies, stream framing, the checker, steps and reports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from hifirag_core.evidence.attribution import render_citations
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.records import (
    AnswerRecord,
    CitationRecord,
    DraftRecord,
    PageRecord,
    QueryPlanRecord,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    UrlDecisionRecord,
)
from hifirag_core.serving.answer_report import (
    ABSTAINED,
    ANSWERED,
    DRAFT,
    UNCHECKED_DRAFT,
    answer_pieces,
    partial_report,
    render_report,
    stage_step,
)
from hifirag_core.serving.contract import (
    STEP_SEPARATOR,
    BadRequest,
    EvaluateRequest,
    RunRequest,
    StreamMessage,
    Transcript,
    check_messages,
    parse_request,
    parse_sse,
)

URL = "https://docs.tidewater.example/sync.html"


def _stream(*messages: StreamMessage) -> list[str]:
    """The lines a client reads (line endings removed)."""
    return b"".join(m.sse() for m in messages).decode().split("\n")


def _good_stream() -> list[StreamMessage]:
    t = Transcript()
    return [t.thinking("**Question received**"), t.thinking("**Query plan**: 1 search"),
            t.answering("First sentence."), t.complete("First sentence. Second one.", [URL])]


# --- request bodies ----------------------------------------------------------------------------------


def test_a_valid_body_is_parsed_and_trimmed_and_unknown_fields_are_ignored():
    parsed = parse_request(b'{"question": "  what is tidewater?  ", "session": 4}', RunRequest)
    assert parsed.question == "what is tidewater?"
    parsed = parse_request('{"query": "q é", "iid": "V_0001"}'.encode(), EvaluateRequest)
    assert (parsed.query, parsed.iid) == ("q é", "V_0001")


@pytest.mark.parametrize(("raw", "model", "says"), [
    (b"question=hello", RunRequest, "the body is not JSON (Expecting value at line 1 column 1)"),
    (b"", RunRequest, "the body is not JSON"),
    (b"\xff\xfe", RunRequest, "not UTF-8"),
    (b'["hello"]', RunRequest, "must be a JSON object such as {\"question\": \"...\"}, not list"),
    (b'{"question": 5}', RunRequest, "question: must be a string, not int"),
    (b'{"question": null}', RunRequest, "question: must be a string, not NoneType"),
    (b'{"q": "hello"}', RunRequest, "question: required"),
    (b'{"question": "   "}', RunRequest, "question: must not be empty"),
    (b'{"query": "x"}', EvaluateRequest, "iid: required"),
    (b'{"query": "x", "iid": "V_1\\r\\nSet-Cookie: a"}', EvaluateRequest, "iid: must not contain control characters"),
])
def test_a_bad_body_is_refused_with_a_message_that_says_what_to_send(raw, model, says):
    with pytest.raises(BadRequest) as caught:
        parse_request(raw, model)
    assert says in str(caught.value)


def test_a_too_long_question_is_refused_with_its_length_and_the_limit():
    with pytest.raises(BadRequest, match="question: 5,000 characters; at most 4,000 are accepted"):
        parse_request(json.dumps({"question": "x" * 5000}).encode(), RunRequest, max_chars={"question": 4000})


# --- messages and framing -------------------------------------------------------------------------------


def test_a_message_is_one_data_line_and_a_blank_line_with_the_four_core_fields():
    raw = StreamMessage("steps", None, True, False).sse()
    assert raw == b'data: {"intermediate_steps": "steps", "final_report": null, "is_intermediate": true, "complete": false}\n\n'
    last = json.loads(StreamMessage("s", "answer", False, True, (URL,)).sse()[6:])
    assert last["citations"] == [URL] and "error" not in last
    failed = json.loads(StreamMessage(None, None, False, True, error="deadline").sse()[6:])
    assert failed["error"] == "deadline" and "citations" not in failed and failed["complete"] is True


def test_the_transcript_accumulates_steps_with_the_separator_and_keeps_them_while_answering():
    messages = _good_stream()
    steps = messages[1].intermediate_steps
    assert steps == f"**Question received**\n{STEP_SEPARATOR}**Query plan**: 1 search\n"
    assert [m.is_intermediate for m in messages] == [True, True, False, False]
    assert all(m.intermediate_steps == steps for m in messages[2:])
    assert messages[-1].final_report == "First sentence. Second one." and messages[-1].citations == (URL,)


def test_a_step_cannot_smuggle_the_separator():
    t = Transcript()
    t.thinking(f"a title with {STEP_SEPARATOR} inside")
    assert t.intermediate_steps.count(STEP_SEPARATOR) == 0


# --- the checker an independent client runs ------------------------------------------------------------


def test_a_stream_built_by_the_transcript_follows_the_contract():
    parsed = parse_sse(_stream(*_good_stream()))
    assert parsed.problems == [] and check_messages(parsed.messages) == []
    assert parsed.messages[-1]["complete"] is True


def test_the_checker_names_framing_problems():
    lines = _stream(*_good_stream())
    parsed = parse_sse([": keep-alive", *lines[:-2]])  # a comment line, and no blank line after the last event
    assert any("not a data line" in p for p in parsed.problems)
    assert "the last event is not followed by a blank line" in parsed.problems
    assert parse_sse(["data: {not json", ""]).problems == ["event ending on line 2: not JSON (Expecting property name "
                                                           "enclosed in double quotes)"]


@pytest.mark.parametrize(("change", "says"), [
    (lambda ms: ms[:-1], "the last message does not have complete true"),
    (lambda ms: [ms[0], ms[2], ms[1], ms[3]], "is_intermediate goes back to true after the answer began"),
    (lambda ms: [{**ms[0], "final_report": "x"}, *ms[1:]], "a thinking message (is_intermediate true) has a final_report"),
    (lambda ms: [{k: v for k, v in ms[0].items() if k != "complete"}, *ms[1:]], "message 1: no 'complete'"),
    (lambda ms: [*ms[:-1], {**ms[-1], "final_report": None}], "neither a final_report nor an error"),
    (lambda ms: [*ms[:-1], {**ms[-1], "intermediate_steps": None}], "dropped the accumulated intermediate_steps"),
    (lambda ms: [{**ms[-1]}, *ms], "complete is true but 4 message(s) follow"),
    (lambda ms: [*ms[:-1], {**ms[-1], "citations": "https://a"}], "'citations' must be a list"),
    (lambda ms: ms[2:], "does not start with a thinking message"),
])
def test_the_checker_names_what_breaks_the_contract(change, says):
    messages = [m.to_dict() for m in _good_stream()]
    assert any(says in p for p in check_messages(change(messages))), check_messages(change(messages))


def test_an_error_that_ends_the_stream_follows_the_contract():
    t = Transcript()
    messages = [t.thinking("**Question received**"), t.failed("No answer was written within the deadline.")]
    assert check_messages([m.to_dict() for m in messages]) == []


# --- reports from the answers row ----------------------------------------------------------------------


def test_a_report_is_the_cited_text_with_its_numbered_sources_in_the_citations_order():
    text = "Use --max-rate. It caps the rate. Restart after."
    sentences = [(s, urls) for s, urls in [("Use --max-rate.", [URL]), ("It caps the rate.", ["https://b", URL]),
                                           ("Restart after.", [])]]
    cited_text, cited = render_citations(text, sentences)  # as the answer stage builds its row
    report = render_report(AnswerRecord(text=f"  {text} ", cited_urls=cited, cited_text=cited_text))
    assert report.citations == [URL, "https://b"] and report.kind == ANSWERED
    assert report.markdown == (f"Use --max-rate. [1] It caps the rate. [2][1] Restart after.\n\n**Sources**\n\n"
                               f"1. <{URL}>\n2. <https://b>")
    assert report.text == text  # /evaluate: no markers, as the static evaluation scores it
    uncited = render_report(AnswerRecord(text="Plain.", cited_urls=[], cited_text="Plain."))
    assert (uncited.markdown, uncited.citations, uncited.text) == ("Plain.", [], "Plain.")
    assert render_report(AnswerRecord(status="no_answer", error="TransientError: key=abc")).markdown is None
    assert render_report(None).markdown is None


def test_the_answers_note_closes_the_report_in_italics_and_never_reaches_the_text():
    note = ("Answerability: not_found (0.12): the sources found may not answer this question; check them before "
            "relying on this answer (evidence: section 0.31).")
    report = render_report(AnswerRecord(text="Use --max-rate.", cited_urls=[URL], cited_text="Use --max-rate. [1]",
                                        note=note))
    assert report.markdown == f"Use --max-rate. [1]\n\n**Sources**\n\n1. <{URL}>\n\n_{note}_"
    assert report.text == "Use --max-rate." and report.citations == [URL]  # /evaluate reads no note
    uncited = render_report(AnswerRecord(text="Plain.", cited_urls=[], cited_text="Plain.", note=f"{note}\nSecond."))
    assert uncited.markdown == f"Plain.\n\n_{note}_\n\n_Second._"


@dataclass(kw_only=True)
class _AbstainingAnswer(AnswerRecord):
    """An answers row as the answer stage writes it when the sources do not answer (issue 14's fields)."""

    abstained: bool = True
    see_also_urls: list[str] = field(default_factory=list)


def test_an_abstaining_answer_keeps_its_text_with_see_also_and_cites_nothing():
    text = f"The sources found do not answer this question.\n\nSee also:\n- Syncing folders: {URL}"
    report = render_report(_AbstainingAnswer(text=text, cited_urls=[], see_also_urls=[URL]))
    assert report.markdown == report.text == text and report.citations == [] and report.kind == ABSTAINED


def test_a_partial_report_is_the_answer_else_the_last_pass_unchecked_and_citing_nothing():
    draft = StageOutput("draft", [DraftRecord(stage="draft", text="Draft [1].", source_urls=[URL])])
    refined = StageOutput("refine", [DraftRecord(stage="refine", text="Refined [1].", source_urls=[URL])])
    assert partial_report({}).markdown is None
    only_draft = partial_report({"draft": draft})
    assert (only_draft.text, only_draft.citations, only_draft.kind) == ("Draft.", [], DRAFT)
    assert only_draft.markdown == f"Draft.\n\n{UNCHECKED_DRAFT}" and "[1]" not in only_draft.markdown
    assert partial_report({"draft": draft, "refine": refined}).text == "Refined."
    answer = StageOutput("answer", [AnswerRecord(text="Final.", cited_urls=[URL])])
    assert partial_report({"draft": draft, "answer": answer}).kind == ANSWERED


def test_answer_pieces_are_growing_prefixes_ending_at_sentences():
    text = "First sentence. Second: a list.\n\n- item one\n- item two. Last one!"
    pieces = answer_pieces(text)
    assert pieces[-1] == text and len(pieces) >= 4
    assert all(text.startswith(p) for p in pieces)
    assert all(len(a) < len(b) for a, b in zip(pieces, pieces[1:], strict=False))
    many = answer_pieces(" ".join(f"Sentence {i}." for i in range(100)), limit=10)
    assert len(many) <= 11 and many[-1].endswith("Sentence 99.")
    assert answer_pieces("One sentence only.") == ["One sentence only."]
    numbered = "1. Register the model. [1]\n2. Reorder the fields. [2]"
    assert answer_pieces(numbered) == ["1. Register the model.", "1. Register the model. [1]\n2. Reorder the fields.",
                                       numbered]  # a list number is not a sentence end


# --- steps ---------------------------------------------------------------------------------------------


def test_the_steps_show_the_plan_the_urls_kept_of_those_found_and_the_sections_kept():
    plan = StageOutput("query_plan", [QueryPlanRecord(queries=["limit bandwidth", "max rate"])],
                       value=["limit bandwidth", "max rate"])
    assert stage_step(plan, {}) == "**Query plan**: 2 searches\n\n1. limit bandwidth\n2. max rate"
    hits = [SearchResultRecord(query="q", query_index=i % 2, rank=i, url=f"https://x/{i}") for i in range(1, 6)]
    assert stage_step(StageOutput("search", hits), {}) == "**Search**: 5 results for 2 queries."
    decisions = [UrlDecisionRecord(url=URL, title="Syncing [folders](evil)", kept=True, order=1),
                 UrlDecisionRecord(url="https://x/2", title="Other", kept=False),
                 UrlDecisionRecord(url="https://x/3 (b)", title=None, kept=True, order=2)]
    step = stage_step(StageOutput("url_filter", decisions), {})
    assert step.startswith("**URLs kept**: 2 of 3 found")
    assert f"1. [Syncing \\[folders\\](evil)](<{URL}>)" in step and "2. [https://x/3 (b)](<https://x/3%20(b)>)" in step
    sections = StageOutput("sections", [
        SectionRecord(url=URL, section_id="s1", heading_path=["Syncing folders", "Limiting bandwidth"],
                      heading="Limiting bandwidth", anchor="limiting-bandwidth", text="Use --max-rate."),
        SectionRecord(url=URL, section_id="s2", heading_path=["Syncing folders", "Conflicts"], heading="Conflicts",
                      anchor=None, text="...")])
    ranking = StageOutput("section_rank", [
        SectionDecisionRecord(url=URL, section_id="s1", heading="Limiting bandwidth", kept=True, rank=1),
        SectionDecisionRecord(url=URL, section_id="s2", heading="Conflicts", kept=False)])
    step = stage_step(ranking, {"sections": sections})
    assert step == (f"**Sections kept**: 1 of 2\n\n- [Syncing folders › Limiting bandwidth](<{URL}#limiting-bandwidth>)")


def test_a_failed_stage_shows_its_status_and_never_its_error_message():
    secret = "sk-very-secret-123"
    pages = StageOutput("fetch", [PageRecord(url=URL, status="ok"),
                                  PageRecord(url="https://x", status="http_403", error=f"403 for ?key={secret}")])
    assert stage_step(pages, {}) == "**Pages read**: 1 of 2 (http\\_403)."
    failed_draft = StageOutput("draft", [DraftRecord(stage="draft", status="timeout", error=f"key {secret}")],
                               status="timeout", error=f"key {secret}")
    assert stage_step(failed_draft, {}) == "**Draft**: could not run (timeout)."
    plan = StageOutput("query_plan", [QueryPlanRecord(queries=None, status="parse_error", error=secret)],
                       value=["the question"], status="parse_error", error=secret)
    step = stage_step(plan, {})
    assert "parse\\_error" in step and secret not in step and "1. the question" in step
    checked = StageOutput("citations", [CitationRecord(url=URL, cited=True), CitationRecord(url="https://x")])
    assert stage_step(checked, {}) == "**Citations checked**: 1 of 2 sources support the answer."
    assert stage_step(StageOutput("refine", [DraftRecord(stage="refine", status="skipped")], status="skipped"),
                      {}) is None
    assert stage_step(StageOutput("answer", [AnswerRecord(text="x")]), {}) is None
