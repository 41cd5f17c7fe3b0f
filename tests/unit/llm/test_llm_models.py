"""The LLM decision models: prompts, schemas, the two-turn conversation, statuses and fallbacks.

A scripted ``ChatModel`` stands in for the transport here (the protocol is ours); the HTTP
adapters are tested against the fake servers elsewhere.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hifirag_core.llm.filter_model import LLMFilterModel
from hifirag_core.llm.job import apply_fallback, object_schema
from hifirag_core.llm.prompts import PromptSet
from hifirag_core.llm.writer_model import LLMWriterModel
from hifirag_core.records import LLMCallRecord
from hifirag_core.types import (
    ChatReply,
    ChatTurn,
    Conversation,
    FewShotExample,
    PageOverview,
    SectionPreview,
    SourceDoc,
    SourceSection,
    UrlCandidate,
)

PROMPTS = PromptSet.load()


class ScriptedChat:
    """Replies from a script; ``None`` plays a call that failed with ``status``."""

    backend = "scripted"
    model = "script-1"
    role = "filter"

    def __init__(self, *replies: str | None, status: str = "blocked"):
        self.replies = deque(replies)
        self.status = status
        self.calls: list[dict] = []

    def chat(self, turns: list[ChatTurn], *, stage: str, prompt_name: str, prompt_hash: str,
             response_schema: dict | None = None) -> ChatReply:
        self.calls.append({"turns": list(turns), "stage": stage, "prompt_name": prompt_name,
                           "prompt_hash": prompt_hash, "schema": response_schema})
        text = self.replies.popleft()
        record = LLMCallRecord(call_id=str(len(self.calls)), stage=stage, prompt_name=prompt_name,
                               prompt_hash=prompt_hash, backend=self.backend, model=self.model)
        if text is None:
            record.status, record.error = self.status, f"{self.status} by the script"
        return ChatReply(text, record)


CANDS = [UrlCandidate(f"https://site{i}.example/page", f"Title {i}", f"snippet {i}") for i in range(5)]
SECTIONS = [SectionPreview(f"s{i}", f"H{i}", f"H{i}: preview {i}") for i in range(6)]
PAGE = PageOverview("https://site0.example/page", "Title 0", "snippet 0")
SOURCES = [SourceDoc(n, f"https://s{n}.example/", f"Source {n}", "", (SourceSection(f"x{n}", ("H",), f"text {n}"),))
           for n in (1, 2, 3)]


def reverse_scorer(query: str, texts: list[str]) -> list[float]:
    """Prefers later candidates, so top_k by similarity differs from input order."""
    return [float(i) for i in range(len(texts))]


def test_plan_queries_renders_a1_with_an_object_rooted_schema() -> None:
    chat = ScriptedChat('["python venv", "create virtual environment"]')
    d = LLMFilterModel(chat, PROMPTS).plan_queries("How do I make a venv?", max_queries=2)
    assert d.status == "ok" and d.value == ["python venv", "create virtual environment"] and d.method == "llm"
    call = chat.calls[0]
    assert call["schema"] == {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
                              "required": ["queries"], "additionalProperties": False}
    assert call["prompt_name"] == "query_plan"
    assert call["prompt_hash"] == PROMPTS["query_plan"].hash
    assert "How do I make a venv?" in call["turns"][0].text and "1-2 best" in call["turns"][0].text
    assert d.calls[0].prompt_hash == PROMPTS["query_plan"].hash


@pytest.mark.parametrize(("reply", "status"), [("I refuse.", "parse_error"), (None, "blocked"), ("[]", "parse_error")])
def test_plan_queries_falls_back_to_the_raw_question(reply: str | None, status: str) -> None:
    d = LLMFilterModel(ScriptedChat(reply), PROMPTS).plan_queries("raw question?", max_queries=2)
    assert d.value == ["raw question?"] and d.status == status
    assert d.method == "llm+fallback:raw_question" and d.error


def test_select_urls_ok_and_capped() -> None:
    reply = '["https://site3.example/page", "https://site1.example/page", "https://site0.example/page"]'
    d = LLMFilterModel(ScriptedChat(reply), PROMPTS).select_urls("q", CANDS, max_urls=2)
    assert d.value == [3, 1] and d.status == "ok"


@pytest.mark.parametrize(("fallback", "scorer", "expected", "method"), [
    ("keep_all", None, [0, 1, 2, 3, 4], "llm+fallback:keep_all"),
    ("keep_none", None, [], "llm+fallback:keep_none"),
    ("top_k", None, [0, 1], "llm+fallback:top_k(input order)"),
    ("top_k", reverse_scorer, [4, 3], "llm+fallback:top_k(similarity)"),
])
def test_select_urls_unparseable_reply_applies_the_configured_fallback(fallback, scorer, expected, method) -> None:
    model = LLMFilterModel(ScriptedChat("These all look fine."), PROMPTS, url_fallback=fallback, scorer=scorer)
    d = model.select_urls("q", CANDS, max_urls=2)
    assert d.value == expected and d.method == method
    assert d.status == "parse_error" and d.error == "no JSON list in the reply"
    assert len(d.calls) == 1  # the failed call is still recorded
    if scorer is not None:
        assert d.scores == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_select_urls_invented_urls_only_is_a_parse_error() -> None:
    d = LLMFilterModel(ScriptedChat('["https://invented.example/"]'), PROMPTS, url_fallback="keep_none").select_urls(
        "q", CANDS, max_urls=3)
    assert d.status == "parse_error" and d.value == [] and "not among the candidates" in d.error


def test_blocked_call_keeps_its_status_and_applies_the_fallback() -> None:
    d = LLMFilterModel(ScriptedChat(None, status="blocked"), PROMPTS, url_fallback="keep_all").select_urls(
        "q", CANDS, max_urls=2)
    assert d.status == "blocked" and d.value == [0, 1, 2, 3, 4] and d.error == "blocked by the script"


def test_no_candidates_means_no_call() -> None:
    chat = ScriptedChat()
    model = LLMFilterModel(chat, PROMPTS)
    assert model.select_urls("q", [], max_urls=3).value == []
    assert model.rank_sections("q", PAGE, [], max_sections=3).value == []
    assert model.verify_citations("q", "answer", []).value == []
    assert chat.calls == []


def test_rank_sections_uses_zero_based_labels_and_an_object_rooted_schema() -> None:
    chat = ScriptedChat('["5", 0, 0, 17]')
    d = LLMFilterModel(chat, PROMPTS).rank_sections("q", PAGE, SECTIONS, max_sections=4)
    assert d.value == [5, 0] and d.status == "ok"
    text = chat.calls[0]["turns"][0].text
    assert "[0] H0: preview 0" in text and "[5] H5: preview 5" in text
    assert chat.calls[0]["schema"] == object_schema("sections", "integer")


def test_every_structured_call_sends_an_object_rooted_schema_and_reads_the_wrapped_reply() -> None:
    chat = ScriptedChat('{"queries": ["a b"]}', '{"urls": ["https://site2.example/page"]}', '{"sections": [1]}',
                        '{"sources": [2]}')
    model = LLMFilterModel(chat, PROMPTS)
    assert model.plan_queries("q", max_queries=2).value == ["a b"]
    assert model.select_urls("q", CANDS, max_urls=3).value == [2]
    assert model.rank_sections("q", PAGE, SECTIONS, max_sections=3).value == [1]
    assert model.verify_citations("q", "This answer has words.", SOURCES).value[0].sources == (2,)
    for call in chat.calls:
        schema = call["schema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == list(schema["properties"])


def test_rank_sections_fallback_top_k_by_similarity() -> None:
    model = LLMFilterModel(ScriptedChat("[99]"), PROMPTS, section_fallback="top_k", scorer=reverse_scorer)
    d = model.rank_sections("q", PAGE, SECTIONS, max_sections=2)
    assert d.value == [5, 4] and d.status == "parse_error" and "out of range: 99" in d.error


def test_verify_citations_returns_each_sentences_sources_among_the_models() -> None:
    chat = ScriptedChat("[3, 1, 9]")
    d = LLMFilterModel(chat, PROMPTS).verify_citations("q", "An answer with words. Another claim here.", SOURCES)
    assert [c.sources for c in d.value] == [(1, 3), (1, 3)]  # no support function: every kept source
    assert [c.text for c in d.value] == ["An answer with words.", "Another claim here."]
    text = chat.calls[0]["turns"][0].text
    assert "Answer: An answer with words. Another claim here." in text and "[2] Source 2" in text
    assert chat.calls[0]["schema"] == object_schema("sources", "integer")


def test_verify_citations_picks_each_sentences_source_by_support_and_follows_the_writers_marker() -> None:
    def support(sentences: list[str], sources: list[SourceDoc]) -> np.ndarray:  # sentence i matches source i + 1
        return np.array([[0.9 if j == i else 0.2 for j in range(len(sources))] for i in range(len(sentences))])

    chat = ScriptedChat('{"sources": [1, 2, 3]}', '{"sources": [1, 2]}')
    model = LLMFilterModel(chat, PROMPTS, support=support)
    d = model.verify_citations("q", "First claim is here. Second claim is here. Third claim is here.", SOURCES)
    assert [c.sources for c in d.value] == [(1,), (2,), (3,)]
    assert [c.method for c in d.value] == ["llm+support"] * 3 and d.value[0].support == 0.9
    assert d.scores == [0.9, 0.9, 0.9]
    marked = model.verify_citations("q", "First claim is here. [2] Third claim is here. [3]", SOURCES)
    # the marker wins among the model's sources (the first sentence is closest to source 1); a marked
    # source the model did not keep is never cited (the second goes to its best supporting source)
    assert [c.sources for c in marked.value] == [(2,), (2,)]
    assert [c.method for c in marked.value] == ["llm+marker", "llm+support"]
    # the model reads the answer as the user does
    assert "Answer: First claim is here. Third claim is here.\n" in chat.calls[1]["turns"][0].text


@pytest.mark.parametrize(("fallback", "expected"), [("keep_all", (1, 2, 3)), ("keep_none", ()), ("top_k", (1,))])
def test_verify_citations_fallbacks(fallback: str, expected: tuple[int, ...]) -> None:
    d = LLMFilterModel(ScriptedChat("cannot tell"), PROMPTS, citation_fallback=fallback).verify_citations(
        "q", "An answer with words.", SOURCES)
    assert d.value[0].sources == expected and d.status == "parse_error"


def test_writer_two_passes_form_one_conversation() -> None:
    chat = ScriptedChat("Draft answer with details.", "Short answer.")
    writer = LLMWriterModel(chat, PROMPTS)
    draft = writer.draft("How?", SOURCES, max_words=120)
    assert draft.status == "ok" and draft.value.last_reply == "Draft answer with details."
    assert [t.role for t in draft.value.turns] == ["user", "model"]
    assert "[1] Source 1" in draft.value.turns[0].text
    examples = [FewShotExample("Q1?", "A1."), FewShotExample("Q2?", "A2.")]
    refined = writer.refine("How?", draft.value, examples)
    assert refined.status == "ok" and refined.value == "Short answer."
    second = chat.calls[1]
    assert [t.role for t in second["turns"]] == ["user", "model", "user"]
    assert second["turns"][0] == draft.value.turns[0] and second["turns"][1].text == "Draft answer with details."
    assert "Question: Q2?\nAnswer: A2." in second["turns"][2].text
    assert second["prompt_name"] == "refine" and second["schema"] is None and second["stage"] == "refine"


def test_writer_failures() -> None:
    writer = LLMWriterModel(ScriptedChat(None, status="empty"), PROMPTS)
    draft = writer.draft("How?", SOURCES, max_words=120)
    assert draft.status == "empty" and draft.value.last_reply == "" and len(draft.value.turns) == 1
    no_draft = writer.refine("How?", draft.value, [FewShotExample("q", "a")])
    assert no_draft.status == "no_draft" and no_draft.calls == []

    ok_conv = Conversation((ChatTurn("user", "p"), ChatTurn("model", "the draft")))
    failed = LLMWriterModel(ScriptedChat(None, status="timeout"), PROMPTS).refine("How?", ok_conv, [FewShotExample("q", "a")])
    assert failed.status == "timeout" and failed.value == "the draft" and failed.method == "llm+fallback:draft"
    no_examples = LLMWriterModel(ScriptedChat(), PROMPTS).refine("How?", ok_conv, [])
    assert no_examples.status == "no_examples" and no_examples.value == "the draft"


def test_baseline_q_mode_sends_only_the_raw_query_with_the_word_limit() -> None:
    chat = ScriptedChat("Answer.")
    writer = LLMWriterModel(chat, PROMPTS, draft_prompt="raw_limit")
    writer.draft("What is X?", SOURCES, max_words=120)
    assert chat.calls[0]["turns"][0].text == "Please limit your answer to 200 words. What is X?"
    assert chat.calls[0]["prompt_name"] == "baseline_q"
    assert "baseline_q=" in writer.identity and "draft=" not in writer.identity


def test_identities_name_backend_model_prompt_hashes_and_fallbacks() -> None:
    f = LLMFilterModel(ScriptedChat(), PROMPTS, url_fallback="keep_all")
    for name in ("query_plan", "url_filter", "section_rank", "citations"):
        assert f"{name}={PROMPTS[name].hash}" in f.identity
    assert f.identity.startswith("llm-filter/v2|scripted|script-1|") and "keep_all" in f.identity
    w = LLMWriterModel(ScriptedChat(), PROMPTS)
    assert f"draft={PROMPTS['draft'].hash}" in w.identity and f"refine={PROMPTS['refine'].hash}" in w.identity
    assert LLMFilterModel(ScriptedChat(), PROMPTS, url_fallback="keep_none").identity != f.identity


def test_apply_fallback_edges() -> None:
    assert apply_fallback("top_k", 2, 5, None) == [0, 1]
    assert apply_fallback("top_k", 4, 2, [0.5, 0.9, 0.9, 0.1]) == [1, 2]  # ties keep input order
    with pytest.raises(ValueError):
        apply_fallback("sometimes", 3, 1, None)  # type: ignore[arg-type]


def test_stage_identities_hold_only_their_own_prompt():
    f = LLMFilterModel(ScriptedChat(), PROMPTS)
    for stage in ("query_plan", "url_filter", "section_rank", "citations"):
        ident = f.job_identity(stage)
        assert f"{stage}={PROMPTS[stage].hash}" in ident
        assert all(f"{other}=" not in ident for other in ("query_plan", "url_filter", "section_rank", "citations")
                   if other != stage)
    w = LLMWriterModel(ScriptedChat(), PROMPTS)
    assert "refine=" not in w.job_identity("draft") and "draft=" not in w.job_identity("refine")
