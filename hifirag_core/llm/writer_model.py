"""The writer's job (prompt A.4): the strong model's two passes as one two-turn conversation.

Pass 1, the draft, answers from the numbered sources (or, for the paper's "Baseline Q" row, from the raw
query); pass 2, the refinement, sends the refine instruction with the few-shot examples in the draft's
conversation. Neither pass raises for a bad reply: the refine pass falls back to the draft, and the status
says why.
"""

from __future__ import annotations

from typing import Literal

from hifirag_core.llm.job import PARSER_VERSION, chat_identity, failed_status
from hifirag_core.llm.prompts import PromptSet, render_examples, render_sources
from hifirag_core.llm.window import REFINE_ROOM_TOKENS, PromptWindow, fit_sources, retry_share
from hifirag_core.types import (
    AnswerStyle,
    ChatModel,
    ChatTurn,
    Conversation,
    Decision,
    FewShotExample,
    SourceDoc,
)


class LLMWriterModel:
    """The strong model's two passes (A.4) as one two-turn conversation."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, draft_prompt: Literal["hifirag", "raw_limit"] = "hifirag",
                 answerability: bool = False, window: PromptWindow | None = None):
        self.chat = chat
        self.prompts = prompts
        # the model's window: the draft's sources are trimmed to fit it (None: sent as they are)
        self.window = window
        self.draft_prompt_name = "draft" if draft_prompt == "hifirag" else "baseline_q"
        # With abstention on, the draft prompt ends by asking whether the sources answer the question
        # (prompts/answerability.txt); the paper's rows send the draft prompt unchanged.
        self.asks_answerability = answerability
        names = (self.draft_prompt_name, "refine", *(("answerability",) if answerability else ()))
        hashes = {n: prompts[n].hash for n in names}
        self.prompt_hashes = hashes
        # steering's additions: part of both passes' identities (the cache key has the steering values)
        self.steering = ",".join(f"{n}={prompts[n].hash}" for n in ("answer_language", "answer_short", "answer_long",
                                                                      "source_dates"))
        self.identity = f"llm-writer/v{PARSER_VERSION}|{chat_identity(chat)}|" + ",".join(
            f"{n}={h}" for n, h in hashes.items()
        )

    def job_identity(self, job: str) -> str:
        """What one pass depends on: backend, model and that pass's prompt (the draft reaches the
        refine pass as its input, so the draft prompt is not part of the refine identity)."""
        name = self.draft_prompt_name if job == "draft" else "refine"
        asked = f",answerability={self.prompt_hashes['answerability']}" if job == "draft" and self.asks_answerability \
            else ""
        return (f"llm-writer/v{PARSER_VERSION}|{chat_identity(self.chat)}|{name}={self.prompt_hashes[name]}" + asked
                + f"|{self.steering}")

    def _steering(self, style: AnswerStyle, *, dates: bool) -> list[str]:
        """The lines steering adds to a pass: the answer's language, its length, the sources' dates."""
        lines = []
        if dates and style.source_dates:
            lines.append(self.prompts["source_dates"].render())
        if style.language:
            lines.append(self.prompts["answer_language"].render(language=style.language_name or style.language))
        if style.length != "standard":
            lines.append(self.prompts[f"answer_{style.length}"].render())
        return lines

    def draft(self, question: str, sources: list[SourceDoc], *, max_words: int,
              style: AnswerStyle = AnswerStyle()) -> Decision[Conversation]:
        """Pass 1: the answer from the filtered sources (or, for Baseline Q, from the raw query).

        The length comes from the paper's prompt (one paragraph of 1-4 sentences, or 200 words for
        Baseline Q) unless ``style`` asks for another; ``max_words`` belongs to the offline writer and is
        not sent to the model. ``style`` adds the steering prompts (the sources' dates, the answer's
        language and length); ``AnswerStyle()`` sends the paper's prompt unchanged.
        """
        prompt = self.prompts[self.draft_prompt_name]
        with_sources = self.draft_prompt_name == "draft"

        def render(docs: list[SourceDoc]) -> str:
            text = (prompt.render(question=question, web_content=render_sources(docs, dates=style.source_dates))
                    if with_sources else prompt.render(question=question))
            for line in self._steering(style, dates=with_sources):
                text = f"{text}\n{line}"
            if self.asks_answerability:
                text = f"{text}\n{self.prompts['answerability'].render()}"
            return text

        # the sources as bounded by the writer's context (hifirag_core.pipeline.context); the estimate decides
        # whether the prompt fits, and what does not is trimmed, lowest-placed sections first
        # the draft leaves room for its own reply and the refine turn (instruction, examples, reply) that follow
        window = (PromptWindow(self.window.context_tokens, 2 * self.window.reply_tokens + REFINE_ROOM_TOKENS,
                               "the draft's reply and the refine turn") if self.window is not None else None)
        sent, note = fit_sources(window, lambda docs: [render(docs)], sources) if with_sources \
            else (sources, None)
        user = ChatTurn("user", render(sent))
        reply = self.chat.chat([user], stage="draft", prompt_name=prompt.name, prompt_hash=prompt.hash)
        calls = [reply.call]
        if reply.overflow is not None and with_sources and window is not None:
            sent, note = fit_sources(window, lambda docs: [render(docs)], sent,
                                     share=retry_share(*reply.overflow, window.reply_tokens),
                                     refused=reply.call.error)
            user = ChatTurn("user", render(sent))
            reply = self.chat.chat([user], stage="draft", prompt_name=prompt.name, prompt_hash=prompt.hash)
            calls.append(reply.call)
        answer = (reply.text or "").strip()
        method = "llm" + ("+trimmed" if note else "")
        if reply.text is None or not answer:
            status = failed_status(reply)
            return Decision(Conversation((user,)), method=method, calls=calls, status=status,
                            error=reply.call.error or "the model returned no text")
        return Decision(Conversation((user, ChatTurn("model", answer))), method=method, calls=calls, error=note)

    def refine(self, question: str, conversation: Conversation, examples: list[FewShotExample],
               style: AnswerStyle = AnswerStyle()) -> Decision[str]:
        """Pass 2: the refine instruction with the few-shot examples, in the draft's conversation (then the
        answer's language and length when ``style`` asks for them: the examples are English, and their
        length is the paper's).

        On failure the value is the draft itself (``method`` ``llm+fallback:draft``) so the caller
        can still answer; ``status`` says why.
        """
        draft = conversation.last_reply
        if not draft:
            return Decision("", method="llm", status="no_draft", error="the draft pass produced no answer")
        if not examples:
            return Decision(draft, method="llm+fallback:draft", status="no_examples",
                            error="the refine pass needs few-shot examples")
        prompt = self.prompts["refine"]
        instruction = "\n".join([prompt.render(examples=render_examples(examples)), *self._steering(style, dates=False)])
        turns = [*conversation.turns, ChatTurn("user", instruction)]
        if self.window is not None and not self.window.fits(*(t.text for t in turns)):
            # the draft's conversation and the examples do not fit: the draft stands, and the row says why
            need = self.window.need(*(t.text for t in turns))
            return Decision(draft, method="llm+fallback:draft", status="context_length_exceeded",
                            error=f"the refine pass was not sent: {self.window.describe(need)}")
        reply = self.chat.chat(turns, stage="refine", prompt_name=prompt.name, prompt_hash=prompt.hash)
        answer = (reply.text or "").strip()
        if reply.text is None or not answer:
            return Decision(draft, method="llm+fallback:draft", calls=[reply.call], status=failed_status(reply),
                            error=reply.call.error or "the model returned no text")
        return Decision(answer, method="llm", calls=[reply.call])
