"""Citation verification (prompt A.5): each sentence of the answer with the source that backs it."""


from __future__ import annotations

from hifirag_core.evidence.attribution import (
    attribute_sentences,
    locate_evidence,
    marked_sentences,
)
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    AnswerSentenceRecord,
    CitationRecord,
    Record,
)
from hifirag_core.types import (
    Decision,
    SourceDoc,
)


def verify_citations(question: Question, answer: str | None, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    """Each sentence of the answer with the source that backs it (A.5), and each source cited or not.

    ``answer`` is the writer's text with its ``[n]`` markers, which the check may follow. With the check
    off (the paper's ablation rows), the markers are the citations, unchecked (method ``writer+marker``).
    """
    if not answer or not sources:
        return StageOutput(records=[], status="skipped")
    numbers = [s.index for s in sources]
    if rt.cfg.citations.enabled:
        decision = rt.filter_model.verify_citations(question.query, answer, sources)
    else:
        decision = Decision(attribute_sentences(marked_sentences(answer), numbers, None, allowed=numbers,
                                                min_support=None, method="writer", cite_unmarked=False),
                            method="writer-markers")
    url = {s.index: s.url for s in sources}
    citing: dict[int, list[int]] = {}
    for sentence in decision.value:
        for n in sentence.sources:
            citing.setdefault(n, []).append(sentence.index)
    records: list[Record] = [
        CitationRecord(source_index=s.index, url=s.url, title=s.title, cited=s.index in citing,
                       support=decision.scores[j] if decision.scores else None,
                       supported_sentences=citing.get(s.index, []), method=decision.method,
                       status=decision.status, error=decision.error)
        for j, s in enumerate(sources)
    ]
    by_number = {s.index: s for s in sources}
    for c in decision.value:
        found = [locate_evidence(c.text, by_number[n], rt.embedder) for n in c.sources]
        records.append(AnswerSentenceRecord(
            sentence_index=c.index, sentence=c.text, source_indices=list(c.sources), urls=[url[n] for n in c.sources],
            support=c.support, marked=list(c.marked), method=c.method,
            section_ids=[e.section_id if e else "" for e in found], evidence=[e.sentence if e else "" for e in found],
            evidence_scores=[e.score if e else None for e in found],
            status=decision.status, error=decision.error))
    return StageOutput(records=records, calls=list(decision.calls), status=decision.status,
                       error=decision.error)
