"""What a run's questions came to: answered or why not, the stage work, the model calls paid, the searches
sent and what the run's calls cost.

A model call counts as *paid* only when the model answered it and reported the tokens it bills
(``tokens_in`` set): a refused connection, an HTTP error or a timeout reached no model and costs
nothing, so it counts as *unbilled*. Calls of stages taken from the cache are *reused*. A question
without an answer is counted under its reason: the generation pass that failed and its error. Errors
are counted per backend: model calls by backend and model, failed searches by provider, pages that
did not load by fetcher.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.specs import ANSWER_STAGE, WRITER_STAGES
from hifirag_core.records import OK, PageRecord, SearchResultRecord

# Outputs that are not failures, whatever else they say.
_FINE = frozenset({OK, "skipped"})


def _short(error: str | None, limit: int = 140) -> str:
    text = " ".join((error or "no error message").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class RunTally:
    """Counts over a run's questions, added one question at a time."""

    answered: int = 0  # abstentions included: an answer that says the sources do not answer
    abstained: int = 0
    unanswered: int = 0
    computed: int = 0
    cache_hits: int = 0
    paid: int = 0
    reused: int = 0
    unbilled: int = 0
    searched: int = 0  # search calls sent to a provider (not reused, not answered from the search cache)
    backed_off: int = 0  # of those, the ones a provider turned away for its rate limit at least once
    cost_usd: float = 0.0  # what the run's own model and search calls cost (reused ones were paid before)
    looked_again: int = 0  # questions that ran at least one follow-up round
    rounds: int = 0  # follow-up rounds, over every question
    reasons: Counter[str] = field(default_factory=Counter)  # why a question has no answer -> questions
    backend_errors: Counter[str] = field(default_factory=Counter)  # "openai gemma: failed" -> occurrences
    examples: dict[str, str] = field(default_factory=dict)  # backend error -> its first message

    def add(self, outputs: Sequence[StageOutput], cached: Sequence[bool]) -> None:
        """One question: its stage outputs and, for each, whether it came from the cache."""
        answer = next((o for o in outputs if o.stage == ANSWER_STAGE), None)
        if answer is not None and answer.status == OK:
            self.answered += 1
            self.abstained += any(getattr(r, "abstained", False) for r in answer.records)
        else:
            self.unanswered += 1
            self.reasons[_reason(outputs, answer)] += 1
        extra = max((o.round for o in outputs), default=0)
        self.looked_again += extra > 0
        self.rounds += extra
        self.computed += sum(1 for c in cached if not c)
        self.cache_hits += sum(1 for c in cached if c)
        for output, was_cached in zip(outputs, cached, strict=True):
            for call in output.calls:
                if was_cached:
                    self.reused += 1
                elif call.tokens_in is not None:
                    self.paid += 1
                else:
                    self.unbilled += 1
                self.cost_usd += 0.0 if was_cached else call.cost_usd or 0.0
                if call.status != OK and not was_cached:
                    self._error(f"{call.backend} {call.model}: {call.status}", call.error)
            for search in output.search_calls:
                if not was_cached and not search.cached_answer:
                    self.searched += 1
                    self.backed_off += search.rate_limited > 0
                    self.cost_usd += search.cost_usd or 0.0
            if was_cached:
                continue
            for record in output.records:
                if isinstance(record, SearchResultRecord) and not record.ok:
                    self._error(f"search {record.provider}: {record.status}", record.error)
                elif isinstance(record, PageRecord) and not record.ok:
                    self._error(f"fetch {record.fetcher or 'fetcher'}: {record.status}", record.error)

    def _error(self, key: str, message: str | None) -> None:
        self.backend_errors[key] += 1
        self.examples.setdefault(key, _short(message))

    def lines(self) -> list[str]:
        """Why questions went unanswered and what failed per backend, for the run's closing notes."""
        out = []
        if self.reasons:
            why = "; ".join(f"{reason} (x{n})" for reason, n in self.reasons.most_common())
            out.append(f"{self.unanswered} question(s) without an answer: {why}")
        if self.backend_errors:
            errors = "; ".join(f"{key} x{n} ({self.examples[key]})" for key, n in self.backend_errors.most_common())
            out.append(f"errors per backend: {errors}")
        if self.unbilled:
            out.append(f"{self.unbilled} model call(s) got no billed answer (not counted as paid)")
        if self.backed_off:
            out.append(f"{self.backed_off} of {self.searched} search call(s) were rate-limited and backed off "
                       "(search_calls: rate_limited, backoff_s)")
        if self.looked_again:
            out.append(f"{self.looked_again} question(s) looked again when their evidence fell short: "
                       f"{self.rounds} follow-up round(s) in all (see the research_rounds view)")
        return out


def _reason(outputs: Sequence[StageOutput], answer: StageOutput | None) -> str:
    """The generation pass that failed (or, failing that, the answer stage) with its status and error."""
    for output in outputs:
        if output.stage in WRITER_STAGES and output.status not in _FINE:
            return f"{output.stage} {output.status}: {_short(output.error)}"
    if answer is None:
        return "no answer stage ran"
    return f"answer {answer.status}: {_short(answer.error)}"
