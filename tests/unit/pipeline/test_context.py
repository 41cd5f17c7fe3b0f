"""The caps the paper does not have: where they apply, and what bounds a model writer's evidence instead."""

from __future__ import annotations

from hifirag_core.config import build_config, caps_apply
from hifirag_core.limits import Budget
from hifirag_core.pipeline.context import CHARS_PER_TOKEN, MIN_CONTENT_TOKENS, build_sources, context_limit
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord, SectionDecisionRecord, SectionRecord

MODELS = {"backends": {"filter_llm": "openai", "writer_llm": "openai"},
          "models": {"filter": "small", "writer": "large", "context_tokens": {"small": 4096, "large": 32768}}}


def test_caps_bound_the_offline_models_only_unless_asked():
    offline = build_config()
    assert caps_apply(offline, "filter") and caps_apply(offline, "writer")
    models = build_config(overrides=MODELS)
    assert not caps_apply(models, "filter") and not caps_apply(models, "writer")
    mixed = build_config(overrides={"backends": {"writer_llm": "gemini"}})
    assert caps_apply(mixed, "filter") and not caps_apply(mixed, "writer")
    assert caps_apply(build_config(overrides={**MODELS, "limits": {"caps": "on"}}), "filter")
    assert not caps_apply(build_config(overrides={"limits": {"caps": "off"}}), "writer")


def test_a_model_writers_evidence_is_bounded_by_the_smallest_window_that_reads_it():
    limit = context_limit(build_config(overrides=MODELS))
    # the filter model (4,096 tokens) reads the same content in the citation check
    assert not limit.proportional and limit.chars == int((4096 - 2048) * CHARS_PER_TOKEN)
    assert "small's window of 4,096 tokens" in limit.why
    no_check = context_limit(build_config(overrides={**MODELS, "citations": {"enabled": False}}))
    assert no_check.chars == int((32768 - 2048) * CHARS_PER_TOKEN)
    gemini = context_limit(build_config(overrides={"backends": {"writer_llm": "gemini"}}))
    assert gemini.chars == int((1_048_576 - 2048) * CHARS_PER_TOKEN)  # the offline check reads no window
    offline = context_limit(build_config())
    assert offline.proportional and offline.chars == 24000


def test_the_runs_budget_bounds_it_too():
    cfg = build_config(overrides={**MODELS, "citations": {"enabled": False}})
    budget = Budget(tokens=10_000)
    budget.charge(tokens=4_000)
    limit = context_limit(cfg, budget)
    assert limit.chars == int(3_000 * CHARS_PER_TOKEN) and "budget" in limit.why  # 6,000 left, sent twice
    priced = build_config(overrides={"backends": {"writer_llm": "gemini"}, "citations": {"enabled": False}})
    dollars = context_limit(priced, Budget(usd=0.01))  # 2.5 Pro reads $1.25 per million tokens, twice
    assert dollars.chars == int(4_000 * CHARS_PER_TOKEN)
    spent = Budget(tokens=10)
    spent.charge(tokens=10)
    assert context_limit(cfg, spent).chars == int(MIN_CONTENT_TOKENS * CHARS_PER_TOKEN)


def _evidence(texts: dict[str, list[str]]):
    pages, sections, decisions = [], [], []
    for order, (url, secs) in enumerate(texts.items(), 1):
        pages.append(PageRecord(url=url, order=order, title=url))
        for rank, text in enumerate(secs, 1):
            sid = f"{url}#{rank}"
            sections.append(SectionRecord(url=url, section_id=sid, heading_path=[f"H{rank}"], text=text))
            decisions.append(SectionDecisionRecord(url=url, section_id=sid, kept=True, rank=rank, preview=text[:20]))
    return (StageOutput("fetch", pages), StageOutput("sections", sections), StageOutput("section_rank", decisions))


def test_a_window_keeps_the_best_sections_whole_rank_by_rank_and_cuts_at_a_sentence():
    from hifirag_core.pipeline.context import ContextLimit

    a1, a2 = "Alpha one is first. " * 5, "Alpha two is second. " * 5
    b1, b2 = "Beta one is here. " * 5, "Beta two is last. Another sentence. " * 5
    pages, sections, ranking = _evidence({"https://a": [a1, a2], "https://b": [b1, b2]})
    cfg = build_config().generation
    q = Question("q", "question?", None, 1)
    everything = build_sources(q, pages, sections, ranking, cfg, ContextLimit(10_000, False, "window"))
    assert [len(s.sections) for s in everything] == [2, 2]
    assert everything[0].sections[0].text == a1
    # room for both pages' best sections and part of a2: b2 is dropped, a2 is cut after a whole sentence
    room = len(a1) + len(b1) + 45
    bounded = build_sources(q, pages, sections, ranking, cfg, ContextLimit(room, False, "window"))
    assert [s.index for s in bounded] == [1, 2] and [len(s.sections) for s in bounded] == [2, 1]
    cut = bounded[0].sections[1].text
    assert cut.endswith("second.") and len(cut) <= 45 and cut.startswith("Alpha two")
    only_first = build_sources(q, pages, sections, ranking, cfg, ContextLimit(len(a1), False, "window"))
    assert [s.url for s in only_first] == ["https://a"]  # a page left without sections is not numbered
    proportional = build_sources(q, pages, sections, ranking, cfg)  # the offline cap (24,000): all fits
    assert [len(s.sections) for s in proportional] == [2, 2]


def test_the_offline_cap_trims_every_section_alike_and_never_cuts_a_word():
    from hifirag_core.pipeline.context import ContextLimit

    long = "Single-column primary keys are needed for the admin interface to work; e.g., you need one value. " * 30
    pages, sections, ranking = _evidence({"https://a": [long, long], "https://b": [long]})
    cfg = build_config().generation
    q = Question("q", "question?", None, 1)
    trimmed = build_sources(q, pages, sections, ranking, cfg, ContextLimit(len(long), True, "offline cap"))
    texts = [s.text for doc in trimmed for s in doc.sections]
    assert len(texts) == 3 and all(len(t) <= len(long) // 3 + 1 for t in texts)
    # each ends where a sentence of the source ends
    assert all(t.endswith("one value.") and long.startswith(t) for t in texts)
