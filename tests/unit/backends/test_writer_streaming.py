"""The writer's streamed draft and refinement (``limits.stream_writer``) through google-genai and openai against the
fakes: the same answers and ``llm_calls`` rows as without streaming, the growing text reaching the listener, the
same cache keys, and a broken stream retried or failed, never stored as a whole answer."""

from __future__ import annotations

import pytest

from hifirag_core.backends.factory import build_writer_model
from hifirag_core.config import ModelPrice, build_config
from hifirag_core.llm.streaming import listening
from hifirag_core.llm.writer_model import LLMWriterModel
from hifirag_core.pipeline.specs import spec
from hifirag_core.types import FewShotExample, SourceDoc, SourceSection
from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.server import Fault

Q = "How do I create a Python virtual environment?"
SOURCES = [SourceDoc(1, "https://docs.python.org/3/library/venv.html", "venv", "",
                     (SourceSection("s1", ("venv",), "Virtual environments are created by executing the venv module: "
                                                     "python -m venv /path/to/env. Running this command creates the "
                                                     "target directory and places a pyvenv.cfg file in it."),)),
           SourceDoc(2, "https://packaging.python.org/tutorials", "Packaging", "",
                     (SourceSection("s2", ("Install",), "Activate the environment with source env/bin/activate "
                                                        "before installing packages with pip."),))]
EXAMPLES = [FewShotExample("What is pip?", "pip installs Python packages from the Python Package Index.")]
# what every llm_calls row carries that must not depend on streaming
ROW = ("stage", "prompt_name", "prompt_hash", "backend", "model", "role", "status", "error", "tokens_in", "tokens_out",
       "tokens_thinking", "cost_usd", "attempts")


def gemini_writer(fake: GeminiFake, make_guards, *, stream: bool) -> LLMWriterModel:
    cfg = build_config(overrides={"backends": {"filter_llm": "gemini", "writer_llm": "gemini"},
                                  "models": {"gemini_base_url": fake.base_url},
                                  "limits": {"retries": 2, "stream_writer": stream}})
    return build_writer_model(cfg, guards=make_guards(cfg), env={"GEMINI_API_KEY": fake.api_key})


def openai_writer(fake: OpenAIFake, make_guards, *, stream: bool) -> LLMWriterModel:
    cfg = build_config(overrides={
        "backends": {"filter_llm": "openai", "writer_llm": "openai"},
        "models": {"writer": "qwen3-32b", "openai_base_url": fake.base_url + "/v1",
                   "prices": {"qwen3-32b": ModelPrice(input=0.5, output=1.5)}},
        "limits": {"retries": 2, "stream_writer": stream}})
    return build_writer_model(cfg, guards=make_guards(cfg), env={"OPENAI_API_KEY": fake.api_key or ""})


def both_passes(writer: LLMWriterModel) -> tuple[str, str, list[tuple]]:
    """The draft, the refined answer and their calls' rows."""
    draft = writer.draft(Q, SOURCES, max_words=120)
    refined = writer.refine(Q, draft.value, EXAMPLES)
    assert draft.status == refined.status == "ok", (draft.error, refined.error)
    rows = [tuple(getattr(c, f) for f in ROW) for c in [*draft.calls, *refined.calls]]
    return draft.value.last_reply or "", refined.value, rows


def grows(seen: list[tuple[str, str]], stage: str, whole: str) -> bool:
    """``seen`` holds, for ``stage``, more than one text, each a longer prefix of ``whole`` ending in ``whole``."""
    texts = [t for s, t in seen if s == stage]
    return (len(texts) > 1 and texts[-1].strip() == whole
            and all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:], strict=False)))


def test_gemini_streamed_passes_equal_the_whole_replies_and_their_rows(make_guards) -> None:
    with GeminiFake() as fake:
        plain = both_passes(gemini_writer(fake, make_guards, stream=False))
        assert fake.streamed.total() == 0
        seen: list[tuple[str, str]] = []
        with listening(lambda stage, text: seen.append((stage, text))):
            streamed = both_passes(gemini_writer(fake, make_guards, stream=True))
        paths = [(r.path, r.param("alt")) for r in fake.requests[-2:]]
    assert streamed == plain
    assert all(row[8] and row[9] and row[10] == 40 and row[11] for row in streamed[2])  # tokens, thinking, cost
    assert [(path.split("/", 2)[2], alt) for path, alt in paths] == [("models/gemini-2.5-pro:streamGenerateContent",
                                                                     "sse")] * 2
    assert fake.streamed == {"draft": 1, "refine": 1}
    assert grows(seen, "draft", streamed[0]) and grows(seen, "refine", streamed[1])


def test_openai_streamed_passes_equal_the_whole_replies_and_their_rows(make_guards) -> None:
    with OpenAIFake(think=True) as fake:
        plain = both_passes(openai_writer(fake, make_guards, stream=False))
        seen: list[tuple[str, str]] = []
        with listening(lambda stage, text: seen.append((stage, text))):
            streamed = both_passes(openai_writer(fake, make_guards, stream=True))
        bodies = fake.bodies[-2:]
    assert streamed == plain
    assert all(row[8] and row[9] and row[11] for row in streamed[2])
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True} for b in bodies)
    assert fake.streamed == {"draft": 1, "refine": 1}
    # the reasoning block never reaches the listener; the answer grows as it arrives
    assert grows(seen, "draft", streamed[0]) and grows(seen, "refine", streamed[1])
    assert not any("<think>" in text or "Let me check" in text for _, text in seen)


def test_a_server_without_usage_in_streams_leaves_tokens_and_cost_unknown(make_guards) -> None:
    """llama-cpp-python's server ignores ``include_usage``: the reply is whole, its usage unknown (as a
    non-streamed reply without ``usage``), never guessed."""
    with OpenAIFake(stream_usage=False) as fake:
        draft = openai_writer(fake, make_guards, stream=True).draft(Q, SOURCES, max_words=120)
    call = draft.calls[0]
    assert draft.status == "ok" and draft.value.last_reply
    assert (call.status, call.tokens_in, call.tokens_out, call.cost_usd) == ("ok", None, None, None)


@pytest.mark.parametrize("kind", ["truncate", "unfinished"])
def test_a_gemini_stream_cut_short_is_retried_and_the_whole_reply_kept(make_guards, kind: str) -> None:
    with GeminiFake() as fake:
        whole = gemini_writer(fake, make_guards, stream=False).draft(Q, SOURCES, max_words=120)
        fake.inject(Fault(kind, keep=0.5, match=lambda r: "streamGenerateContent" in r.path))
        seen: list[tuple[str, str]] = []
        with listening(lambda stage, text: seen.append((stage, text))):
            draft = gemini_writer(fake, make_guards, stream=True).draft(Q, SOURCES, max_words=120)
    assert draft.status == "ok" and draft.calls[0].attempts == 2
    assert draft.value.last_reply == whole.value.last_reply
    assert draft.calls[0].tokens_out == whole.calls[0].tokens_out
    # the listener saw the first attempt stop short, then the second one from its start
    texts = [t for _, t in seen]
    restart = next(i for i, (a, b) in enumerate(zip(texts, texts[1:], strict=False)) if not b.startswith(a))
    assert texts[restart] != whole.value.last_reply and texts[-1] == whole.value.last_reply


@pytest.mark.parametrize("kind", ["truncate", "unfinished"])
def test_an_openai_stream_cut_short_is_retried_and_the_whole_reply_kept(make_guards, kind: str) -> None:
    with OpenAIFake() as fake:
        whole = openai_writer(fake, make_guards, stream=False).draft(Q, SOURCES, max_words=120)
        fake.inject(Fault(kind, keep=0.5, match=lambda r: bool((r.json() or {}).get("stream"))))
        draft = openai_writer(fake, make_guards, stream=True).draft(Q, SOURCES, max_words=120)
    assert draft.status == "ok" and draft.calls[0].attempts == 2
    assert draft.value.last_reply == whole.value.last_reply
    assert (draft.calls[0].tokens_in, draft.calls[0].tokens_out) == (whole.calls[0].tokens_in, whole.calls[0].tokens_out)


@pytest.mark.parametrize("fake_type", [GeminiFake, OpenAIFake])
def test_a_stream_cut_on_every_attempt_fails_the_pass_and_stores_no_half_answer(make_guards, fake_type) -> None:
    with fake_type() as fake:
        make = gemini_writer if fake_type is GeminiFake else openai_writer
        fake.inject(Fault("truncate", keep=0.5, times=3))  # the first try and both retries
        draft = make(fake, make_guards, stream=True).draft(Q, SOURCES, max_words=120)
        assert fake.count() == 3
    call = draft.calls[0]
    assert draft.status == call.status == "failed" and call.attempts == 3
    assert not draft.value.last_reply and len(draft.value.turns) == 1  # the prompt alone: no reply
    assert call.tokens_out is None and call.cost_usd is None


def test_streaming_changes_no_cache_key(make_guards) -> None:
    """A reply stored from a stream is reused by a run that does not stream, and the other way round."""
    with GeminiFake() as fake:
        on, off = (gemini_writer(fake, make_guards, stream=s) for s in (True, False))
    assert on.chat.stream and not off.chat.stream
    for job in ("draft", "refine"):
        assert on.job_identity(job) == off.job_identity(job)
    cfg_on, cfg_off = (build_config(overrides={"limits": {"stream_writer": s}}) for s in (True, False))
    for stage in ("draft", "refine"):
        assert cfg_on.slice(*spec(stage).reads) == cfg_off.slice(*spec(stage).reads)


def test_only_the_writers_draft_and_refinement_are_streamed(make_guards) -> None:
    with GeminiFake() as fake:
        cfg = build_config(overrides={"backends": {"filter_llm": "gemini", "writer_llm": "gemini"},
                                      "models": {"gemini_base_url": fake.base_url}})
        from hifirag_core.backends.factory import build_filter_model

        filt = build_filter_model(cfg, guards=make_guards(cfg), env={"GEMINI_API_KEY": fake.api_key})
        plan = filt.plan_queries(Q, max_queries=2)
        assert plan.status == "ok" and not filt.chat.stream
        assert fake.streamed.total() == 0 and fake.requests[-1].path.endswith(":generateContent")


def test_a_growing_step_is_replaced_in_place_and_then_by_the_finished_stage() -> None:
    from hifirag_core.serving.answer_report import writing_step
    from hifirag_core.serving.contract import STEP_SEPARATOR, Transcript, check_messages

    transcript = Transcript()
    messages = [transcript.thinking("**Question received**"),
                transcript.writing(writing_step("draft", "Use the")),
                transcript.writing(writing_step("draft", "Use the --max-rate option.")),
                transcript.thinking("**Draft**: 4 words from 1 source."),
                transcript.writing(writing_step("refine", "Use")),
                transcript.thinking("**Refined**: 4 words."),
                transcript.complete("Use the --max-rate option. [1]", ["https://a.example/"])]
    steps = [m.intermediate_steps.split(STEP_SEPARATOR) for m in messages]
    assert [len(s) for s in steps] == [1, 2, 2, 2, 3, 3, 3]
    assert steps[2][1] == "**Draft** (writing): 4 words so far.\n\nUse the --max-rate option.\n"
    assert steps[-1] == ["**Question received**\n", "**Draft**: 4 words from 1 source.\n", "**Refined**: 4 words.\n"]
    assert check_messages([m.to_dict() for m in messages]) == []


def test_the_service_hands_the_stream_the_writers_text_at_most_every_quarter_second() -> None:
    import asyncio

    from hifirag_core.serving.service import WRITING_EVERY_S, Ticket

    loop = asyncio.new_event_loop()
    try:
        ticket = Ticket(None, "/run", "token", None, loop, deadline_at=0.0)  # type: ignore[arg-type]
        for text in ("Use", "Use the", "Use the --max-rate"):  # far less than 0.25 s apart
            ticket.writing("draft", text)
        ticket.wrote_at -= WRITING_EVERY_S  # as if a quarter second had passed
        ticket.writing("draft", "Use the --max-rate option.")
        loop.run_until_complete(asyncio.sleep(0))
        sent = [ticket.events.get_nowait() for _ in range(ticket.events.qsize())]
    finally:
        loop.close()
    assert sent == [("writing", ("draft", "Use")), ("writing", ("draft", "Use the --max-rate option."))]


def test_a_listener_that_raises_never_breaks_the_call(make_guards) -> None:
    def broken(_stage: str, _text: str) -> None:
        raise RuntimeError("the client went away")

    with OpenAIFake() as fake, listening(broken):
        draft = openai_writer(fake, make_guards, stream=True).draft(Q, SOURCES, max_words=120)
    assert draft.status == "ok" and draft.calls[0].attempts == 1 and draft.value.last_reply
