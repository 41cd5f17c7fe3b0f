"""Question sets: JSONL in the MMU-RAGent format, the docs FAQ format, or any mapped fields.

Every problem in a file is reported at once, each naming its line, before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hifirag_core.hashing import stable_hash
from hifirag_core.jsonl import NotUtf8Error, read_jsonl
from hifirag_core.steering import QUESTION_FIELDS, question_steering
from hifirag_core.turns import EarlierTurn

# format name -> (id field, query field, reference field)
FORMATS: dict[str, tuple[str, str, str]] = {
    "mmu_ragent": ("iid", "query", "reference"),
    "docs_faq": ("id", "question", "answer"),
}
_MAX_LISTED = 20
# The data sets' own files. Runs over any other file are named after that file, whatever its format
# (a fresh test set in MMU format is not the MMU-RAGent validation set).
CANONICAL_FILES: dict[str, str] = {"mmu_ragent": "t2t_val.jsonl", "docs_faq": "faq_qa.jsonl"}


class InputError(ValueError):
    """A question file that cannot be used as it is; ``problems`` name each bad line."""

    def __init__(self, path: Path, problems: list[str]):
        self.path = path
        self.problems = problems
        listed = "\n".join(f"  {p}" for p in problems[:_MAX_LISTED])
        more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
        super().__init__(f"{path}: {len(problems)} problem(s); nothing was written\n{listed}{more}")


@dataclass(frozen=True)
class Question:
    """One question. ``meta`` holds the line's other fields; its steering fields (``sites``,
    ``exclude_sites``, ``after``, ``before``, ``language``, ``length``) are checked and normalized, and
    replace the run's ``steer`` values for this question (``hifirag_core.pipeline.question_steering``). ``meta["follows"]``
    names the answer it follows (a follow-up turn, ``hifirag_core.turns``), and ``earlier`` is that answer as
    the warehouse holds it, read where the question is admitted (``hifirag_core.pipeline.threads``)."""

    id: str
    query: str
    reference: str | None
    line_no: int
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    earlier: EarlierTurn | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def steering(self) -> dict:
        """The question's own steering fields (absent: the run's)."""
        return {k: self.meta[k] for k in QUESTION_FIELDS if self.meta.get(k) is not None}


@dataclass(frozen=True)
class QuestionSet:
    path: Path
    format: str  # mmu_ragent | docs_faq | custom
    questions: tuple[Question, ...]
    dropped: tuple[str, ...] = ()  # ids left out, with the reason in ``note``
    note: str | None = None

    @property
    def dataset(self) -> str:
        return self.format if self.format != "custom" else f"custom:{self.path.stem}"

    @property
    def fingerprint(self) -> str:
        # a question's steering, and the answer it follows, are part of what is asked: two files that differ only
        # in them are two runs
        return stable_hash([(q.id, q.query, q.reference, *([q.steering] if q.steering else []),
                             *([{"follows": q.meta["follows"]}] if q.meta.get("follows") else []))
                            for q in self.questions])

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def slug(self) -> str:
        """The dataset part of a run id: the format for a data set's own file, else ``custom-<file stem>``."""
        if self.format in CANONICAL_FILES and self.path.name != CANONICAL_FILES[self.format]:
            name = f"custom-{self.path.stem}"
        else:
            name = self.dataset.replace(":", "-")
        return re.sub(r"[^A-Za-z0-9._-]", "-", name)


def detect_format(first: dict) -> str:
    if "iid" in first and "query" in first:
        return "mmu_ragent"
    if "id" in first and "question" in first:
        return "docs_faq"
    return "custom"


def load_questions(
    path: Path,
    *,
    fields: dict[str, str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    ids: Sequence[str] | None = None,
    exclude_ids: Sequence[str] = (),
) -> QuestionSet:
    """Read and validate a JSONL question file, then select questions.

    ``fields`` maps ``id``/``query``/``reference`` to other field names for custom files.
    Selection order: ``exclude_ids`` (such as the few-shot examples), then ``ids``, then
    ``sample`` (that many questions spread evenly over the file), then ``limit`` (the first N).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, ["file not found"])
    try:
        objects, problems = read_jsonl(path, "questions file")
    except NotUtf8Error as exc:
        raise InputError(path, [exc.problem]) from None
    if not objects and not problems:
        raise InputError(path, ["the file holds no questions"])

    fmt = detect_format(objects[0][1]) if objects else "custom"
    if fields:
        fmt = "custom"
        id_field, query_field, ref_field = (fields.get("id", "id"), fields.get("query", "query"),
                                            fields.get("reference", "reference"))
    elif fmt == "custom":
        id_field, query_field, ref_field = "id", "query", "reference"
    else:
        id_field, query_field, ref_field = FORMATS[fmt]

    questions: list[Question] = []
    first_line: dict[str, int] = {}
    for line_no, obj in objects:
        qid, query, reference = obj.get(id_field), obj.get(query_field), obj.get(ref_field)
        bad = False
        if qid is None:
            problems.append(f"line {line_no}: missing field {id_field!r}")
            bad = True
        elif not isinstance(qid, (str, int)) or not str(qid).strip():
            problems.append(f"line {line_no}: field {id_field!r} must be a non-empty string")
            bad = True
        if query is None:
            problems.append(f"line {line_no}: missing field {query_field!r}")
            bad = True
        elif not isinstance(query, str) or not query.strip():
            problems.append(f"line {line_no}: empty query in field {query_field!r}")
            bad = True
        if reference is not None and not isinstance(reference, str):
            problems.append(f"line {line_no}: field {ref_field!r} must be a string or null")
            bad = True
        steering, steer_problems = question_steering(obj)
        problems.extend(f"line {line_no}: {p}" for p in steer_problems)
        if bad or steer_problems:
            continue
        qid = str(qid).strip()
        if qid in first_line:
            problems.append(f"line {line_no}: duplicate id {qid!r} (first on line {first_line[qid]})")
            continue
        first_line[qid] = line_no
        meta = {k: v for k, v in obj.items() if k not in (id_field, query_field, ref_field, *QUESTION_FIELDS)}
        meta.update(steering)
        questions.append(Question(qid, query.strip(), reference, line_no, meta))
    if problems:
        raise InputError(path, problems)
    return select_questions(QuestionSet(path, fmt, tuple(questions)), limit=limit, sample=sample, ids=ids,
                            exclude_ids=exclude_ids)


def select_questions(qs: QuestionSet, *, limit: int | None = None, sample: int | None = None,
                     ids: Sequence[str] | None = None, exclude_ids: Sequence[str] = ()) -> QuestionSet:
    """The questions of ``qs`` chosen as :func:`load_questions` describes."""
    questions = list(qs.questions)
    dropped = [q.id for q in questions if q.id in set(exclude_ids)]
    questions = [q for q in questions if q.id not in set(exclude_ids)]
    if ids:
        by_id = {q.id: q for q in questions}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise InputError(qs.path, [f"no question with id {i!r}" + (" (it is a few-shot example)"
                                                                          if i in dropped else "")
                                       for i in unknown])
        questions = [by_id[i] for i in ids]
    if sample is not None and 0 < sample < len(questions):
        step = len(questions) / sample
        questions = [questions[int(i * step)] for i in range(sample)]
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise InputError(qs.path, ["no questions left after selection"])
    note = (f"{len(dropped)} question(s) left out because they are the refine pass's few-shot examples"
            if dropped else None)
    return QuestionSet(qs.path, qs.format, tuple(questions), tuple(dropped), note)
