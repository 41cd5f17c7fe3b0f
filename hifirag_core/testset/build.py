"""The fresh test-set builder: propose pairs, date their sources, check them, keep the honest ones.

    while fewer than n pairs are kept and calls remain:
        propose a batch (A.6 to a search-grounded model, or the offline stand-in)
        date every source of the batch (fetch it, read its dates)
        check each candidate, in order, and stop at the first rule it breaks:
          1. not_fresh: no source dated after the cutoff
          2. near_duplicate: the same question as an earlier candidate or a style example, or a MiniLM
             cosine of "question\\nanswer" to one of them at or above the threshold
          3. answered_without_search: the no-search baseline (Baseline Q, the same model) scores
             ROUGE-L F1 above the threshold against the reference

Each step is a method, so ``flows/testset.py`` can run it as a task; :func:`build_fresh_set` runs
the same loop without Prefect. The result is deterministic for a seed and the same replies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import numpy as np

from hifirag_core.metrics.text_metrics import rouge_l
from hifirag_core.records import LLMCallRecord
from hifirag_core.testset.pair_sources import Batch, Candidate, DatedSource, PairSource, SourceDater
from hifirag_core.testset.style import StyleExample
from hifirag_core.testset.testset_config import FreshSetConfig
from hifirag_core.types import WriterModel

RULES = ("not_fresh", "near_duplicate", "answered_without_search")
Embed = Callable[[list[str]], np.ndarray]  # texts -> unit vectors, one row each


@dataclass
class Verdict:
    """What the checks made of one candidate."""

    candidate: Candidate
    sources: list[DatedSource]
    kept: bool = False
    rule: str | None = None  # the rule that dropped it; None when kept or never checked
    reason: str | None = None
    iid: str | None = None
    similarity: float | None = None  # cosine to its nearest earlier pair or example
    nearest: str | None = None
    baseline_status: str | None = None  # ok, or why the baseline gave no answer
    baseline_answer: str | None = None
    baseline_rouge_l: float | None = None
    calls: list[LLMCallRecord] = field(default_factory=list)  # the baseline call

    def to_json(self) -> dict:
        """The provenance entry."""
        c = self.candidate
        return {"candidate_id": c.candidate_id, "iid": self.iid, "query": c.query, "reference": c.reference,
                "kept": self.kept, "rule": self.rule, "reason": self.reason, "attribution": c.attribution,
                "sources": [s.to_json() for s in self.sources],
                "near_duplicate": {"nearest": self.nearest, "cosine": _round(self.similarity)},
                "baseline": {"status": self.baseline_status, "answer": self.baseline_answer,
                             "rouge_l_f1": _round(self.baseline_rouge_l)}}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


@dataclass
class FreshSet:
    """A finished build: the kept pairs in order, every verdict, and what each call did."""

    config: FreshSetConfig
    source_name: str
    label: str | None
    examples: list[StyleExample]
    verdicts: list[Verdict]
    batches: list[Batch]
    status: str  # complete | short

    @property
    def kept(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kept]

    def counts(self) -> dict[str, int]:
        """Proposed, dropped per rule, kept, proposed but never checked (enough were kept), and what the
        reply parser skipped (objects without a question or an answer, replies without pairs)."""
        out = {"calls": len(self.batches), "proposed": len(self.verdicts),
               "reply_problems": sum(len(b.problems) for b in self.batches)}
        for rule in RULES:
            out[rule] = sum(1 for v in self.verdicts if v.rule == rule)
        out["kept"] = len(self.kept)
        out["not_checked"] = sum(1 for v in self.verdicts if not v.kept and v.rule is None)
        out["baseline_unchecked"] = sum(1 for v in self.verdicts if v.kept and v.baseline_status != "ok")
        return out

    @property
    def calls(self) -> list[LLMCallRecord]:
        return [c for b in self.batches for c in b.calls] + [c for v in self.verdicts for c in v.calls]


class FreshSetBuilder:
    """One build's state between steps."""

    def __init__(self, config: FreshSetConfig, source: PairSource, dater: SourceDater, embed: Embed,
                 baseline: WriterModel, examples: Sequence[StyleExample]):
        self.config = config
        self.source = source
        self.dater = dater
        self.embed = embed
        self.baseline = baseline
        self.examples = list(examples)
        self.batches: list[Batch] = []
        self.verdicts: list[Verdict] = []
        self._dated: dict[str, DatedSource] = {}
        # What a new pair must not repeat: the style examples, then every candidate that was fresh.
        self._seen_ids: list[str] = [f"style example {e.example_id}" for e in self.examples]
        self._seen_queries = [" ".join(e.query.lower().split()) for e in self.examples]
        self._seen_vectors = list(embed([pair_text(e.query, e.reference) for e in self.examples])) \
            if self.examples else []
        self._exhausted = False

    # --- the steps -------------------------------------------------------------------------------

    @property
    def kept(self) -> int:
        return sum(1 for v in self.verdicts if v.kept)

    def needs_more(self) -> bool:
        """Fewer than n pairs kept, calls left, and the source not exhausted."""
        return self.kept < self.config.n and len(self.batches) < self.config.max_calls and not self._exhausted

    def propose(self) -> Batch:
        """One call to the pair source, asking for what is missing plus a margin for the checks."""
        missing = self.config.n - self.kept
        want = min(self.config.pairs_per_call, max(1, math.ceil(missing * self.config.oversample)))
        batch = self.source.propose(len(self.batches) + 1, want)
        self.batches.append(batch)
        if not batch.candidates and batch.status == "exhausted":
            self._exhausted = True
        return batch

    def date_sources(self, batch: Batch, workers: int = 4) -> dict[str, DatedSource]:
        """Every new source URI of the batch dated once (a build fetches each URI once)."""
        new = list(dict.fromkeys(s.uri for c in batch.candidates for s in c.sources if s.uri not in self._dated))
        refs = {s.uri: s for c in batch.candidates for s in c.sources}
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for uri, dated in zip(new, pool.map(lambda u: self.dater.date(refs[u]), new), strict=True):
                self._dated[uri] = dated
        return {s.uri: self._dated[s.uri] for c in batch.candidates for s in c.sources}

    def check(self, batch: Batch, dated: dict[str, DatedSource]) -> list[Verdict]:
        """The three rules over the batch's candidates, in order; stops once n pairs are kept."""
        verdicts = [Verdict(c, [dated[s.uri] for s in c.sources]) for c in batch.candidates]
        self.verdicts.extend(verdicts)
        fresh = [v for v in verdicts if self._fresh(v)]
        vectors = self.embed([pair_text(v.candidate.query, v.candidate.reference) for v in fresh]) if fresh else []
        survivors = [v for v, vector in zip(fresh, vectors, strict=True) if self._novel(v, vector)]
        start = 0
        while start < len(survivors) and self.kept < self.config.n:
            chunk = survivors[start:start + self.config.n - self.kept]
            start += len(chunk)
            with ThreadPoolExecutor(max_workers=self.config.baseline_workers) as pool:
                list(pool.map(self._ask_baseline, chunk))
            for verdict in chunk:
                self._judge_baseline(verdict)
        return verdicts

    def result(self) -> FreshSet:
        """The build's outcome; kept pairs get their ids in order."""
        for n, verdict in enumerate((v for v in self.verdicts if v.kept), 1):
            verdict.iid = f"{self.config.id_prefix}_{n:04d}"
        status = "complete" if self.kept >= self.config.n else "short"
        return FreshSet(self.config, self.source.name, self.source.label, self.examples, self.verdicts,
                        self.batches, status)

    # --- the rules -------------------------------------------------------------------------------

    def _fresh(self, verdict: Verdict) -> bool:
        after = self.config.after
        if any(s.date is not None and s.date.date > after for s in verdict.sources):
            return True
        verdict.rule = "not_fresh"
        if not verdict.sources:
            verdict.reason = ("the reply carried no grounding metadata" if verdict.candidate.attribution == "none"
                              else "no grounding source supports this pair")
        else:
            verdict.reason = f"no source dated after {after.isoformat()}: " + "; ".join(
                _describe(s) for s in verdict.sources)
        return False

    def _novel(self, verdict: Verdict, vector: np.ndarray) -> bool:
        c = verdict.candidate
        asked = " ".join(c.query.lower().split())
        same = next((who for who, q in zip(self._seen_ids, self._seen_queries, strict=True) if q == asked), None)
        if self._seen_vectors:
            sims = np.stack(self._seen_vectors) @ vector
            best = int(np.argmax(sims))
            verdict.similarity, verdict.nearest = float(sims[best]), self._seen_ids[best]
        self._seen_ids.append(f"candidate {c.candidate_id}")
        self._seen_queries.append(asked)
        self._seen_vectors.append(vector)
        if same is not None:  # one question with two answers makes an ambiguous test
            verdict.rule, verdict.reason = "near_duplicate", f"the same question as {same}"
            return False
        if verdict.similarity is not None and verdict.similarity >= self.config.near_duplicate_threshold:
            verdict.rule = "near_duplicate"
            verdict.reason = (f"near-duplicate of {verdict.nearest} (cosine {verdict.similarity:.3f} >= "
                              f"{self.config.near_duplicate_threshold})")
            return False
        return True

    def _ask_baseline(self, verdict: Verdict) -> None:
        decision = self.baseline.draft(verdict.candidate.query, [], max_words=200)
        for call in decision.calls:
            call.stage = "testset_baseline"  # in llm_calls, not to be read as a pipeline run's draft
        verdict.calls = list(decision.calls)
        answer = decision.value.last_reply.strip() if decision.status == "ok" else ""
        if answer:
            verdict.baseline_status, verdict.baseline_answer = "ok", answer
        else:
            status = decision.status if decision.status != "ok" else "empty"
            verdict.baseline_status = f"{status}: {decision.error or 'no answer'}"

    def _judge_baseline(self, verdict: Verdict) -> None:
        if verdict.baseline_answer:
            verdict.baseline_rouge_l = rouge_l(verdict.baseline_answer, verdict.candidate.reference)[2]
            if verdict.baseline_rouge_l > self.config.baseline_rouge_threshold:
                verdict.rule = "answered_without_search"
                verdict.reason = (f"the no-search baseline answers it (ROUGE-L F1 {verdict.baseline_rouge_l:.3f} > "
                                  f"{self.config.baseline_rouge_threshold})")
                return
        # A pair the baseline could not be asked about is kept; its provenance says it is unchecked.
        verdict.kept = True


def pair_text(query: str, reference: str) -> str:
    """What the near-duplicate check embeds: the question and its answer together."""
    return f"{query}\n{reference}"


def _describe(source: DatedSource) -> str:
    name = source.url or source.uri
    if source.date is not None:
        return f"{name} {source.date.kind} {source.date.date.isoformat()} ({source.date.source})"
    if source.fetch_status != "ok":
        return f"{name} not dated (fetch {source.fetch_status})"
    modified = next((d for d in source.dates if d.kind == "modified"), None)
    if modified is not None:
        return f"{name} has only a modification date, {modified.date.isoformat()} ({modified.source})"
    return f"{name} has no date"


def build_fresh_set(builder: FreshSetBuilder, progress: Callable[[Batch, list[Verdict]], None] | None = None
                    ) -> FreshSet:
    """The whole loop without Prefect."""
    while builder.needs_more():
        batch = builder.propose()
        verdicts = builder.check(batch, builder.date_sources(batch))
        if progress is not None:
            progress(batch, verdicts)
    return builder.result()


def today_utc() -> date:
    """The build day when none is given."""
    return datetime.now(UTC).date()
