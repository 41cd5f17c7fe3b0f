"""Ranking candidates in as few calls as the model's window allows (the URL filter's and section ranking's jobs)."""

from __future__ import annotations

from collections.abc import Callable

from hifirag_core.llm.job import Fallback, ModelJob
from hifirag_core.llm.parsing import ParseResult
from hifirag_core.llm.window import balanced_batches, retry_share, split_in
from hifirag_core.types import ChatReply, Decision

# One batch's call: the reply and its parsed indices (None: no reply text).
Ask = Callable[[list[int]], tuple[ChatReply, ParseResult[int] | None]]
# One batch's prompt values.
Values = Callable[[list[int]], dict[str, str]]


class BatchRanking(ModelJob):
    """A job that ranks candidates, splitting them into batches when their prompt does not fit the window."""

    def batches(self, values: Values, n: int) -> list[list[int]]:
        """The candidates ``0..n-1`` in consecutive batches whose prompts fit the window (one batch when all fit)."""
        everything = list(range(n))
        prompt, window = self.setup.prompts[self.prompt_name], self.setup.window
        if window is None or window.fits(prompt.render(**values(everything))):
            return [everything]
        base = window.need(prompt.render(**values([])))
        # each candidate's own tokens (its line, label and separator), measured alone: the estimate adds up
        weights = [window.need(prompt.render(**values([i]))) - base + 2 for i in everything]
        capacity = window.prompt_tokens - base
        out: list[list[int]] = []
        for batch in balanced_batches(weights, capacity):  # check each batch whole; one the sum misjudged is halved
            if len(batch) > 1 and not window.fits(prompt.render(**values(batch))):
                out.extend(split_in(batch, 0.5))
            else:
                out.append(batch)
        return out

    def rank_in_batches(self, ask: Ask, values: Values, *, n: int, k: int, fallback_k: int, fallback: Fallback,
                        query: str, texts: list[str]) -> Decision[list[int]]:
        """Rank ``n`` candidates in as few calls as the window allows; the rankings merged as the paper orders one.

        A ranking lists candidates from most to least useful. Batches are judged apart, so their lists are
        merged rank by rank: every batch's first choice (batches in input order, i.e. the page's or the search
        engine's), then every batch's second, and so on, cut at ``k``. A call the provider refuses as longer than
        the window (``context_length_exceeded``) is retried once, its batch split smaller (by the provider's own
        count when it gives one); a part refused again takes the fallback, and the method and status say so.
        One batch that fits is one call, recorded exactly as before (method ``llm``).
        """
        batches = self.batches(values, n)
        reply_tokens = self.setup.reply_tokens()
        if len(batches) == 1:
            reply, parsed = ask(batches[0])
            if reply.overflow is None or n < 2:
                return self.index_decision(reply, parsed, n=n, k=k, fallback_k=fallback_k, fallback=fallback,
                                           query=query, texts=texts)
            first_calls = [reply.call]
            batches = split_in(batches[0], retry_share(*reply.overflow, reply_tokens))
            retried = True
        else:
            first_calls, retried = [], False
        results: list[tuple[list[int], Decision[list[int]]]] = []
        calls = list(first_calls)

        def judged(batch: list[int], reply: ChatReply, parsed: ParseResult[int] | None) -> None:
            decision = self.index_decision(reply, parsed, n=len(batch), k=k, fallback_k=fallback_k,
                                           fallback=fallback, query=query, texts=[texts[i] for i in batch])
            calls.extend(decision.calls)
            results.append((batch, decision))

        for batch in batches:
            reply, parsed = ask(batch)
            if reply.overflow is not None and not retried and len(batch) > 1:
                calls.append(reply.call)
                for part in split_in(batch, retry_share(*reply.overflow, reply_tokens)):
                    judged(part, *ask(part))
                continue
            judged(batch, reply, parsed)
        merged = sorted(((pos, b, batch[i]) for b, (batch, d) in enumerate(results) for pos, i in enumerate(d.value)))
        kept = [i for _, _, i in merged][:k]
        failed = [d for _, d in results if d.status != "ok"]
        method = f"llm:split={len(results)}"
        status, error, scores = "ok", None, None
        if failed:
            status = failed[0].status
            error = f"{len(failed)} of {len(results)} calls fell back; the first: {failed[0].error}"
            method += "+" + failed[0].method.split("+", 1)[-1]
            if fallback == "top_k":
                scores = self.scores(query, texts)
        return Decision(kept, method=method, calls=calls, status=status, error=error, scores=scores)
