"""The examples a fresh set imitates: ``--style mmu:10`` or ``--style FILE.jsonl:N``.

A.6 shows the model examples of the wanted style and length. The paper pasted the first 10 lines of
the MMU-RAGent validation set; those lines are among the 100 the paper scores, so ``mmu`` draws its
examples from lines 101-300 instead (questions with a null reference are never examples). Which
examples are drawn depends only on the seed.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.config import ConfigError
from hifirag_core.evaluation.datasets import MMU_PAPER_LIMIT
from hifirag_core.hashing import stable_hash
from hifirag_core.questions import load_questions
from hifirag_core.resources import shared_data_dir
from hifirag_core.text import word_count

DEFAULT_COUNT = 10


@dataclass(frozen=True)
class StyleExample:
    example_id: str
    query: str
    reference: str


@dataclass(frozen=True)
class StyleSpec:
    """Where the examples come from and how many."""

    name: str  # "mmu" or the file's path
    path: Path
    count: int
    skip_first: int  # lines never used (the scored ones)

    @property
    def description(self) -> str:
        """What A.6's "similar to [...]" names."""
        if self.name == "mmu":
            return f"these {self.count} samples of the MMU-RAGent validation set"
        return f"these {self.count} samples of {self.path.name}"


def parse_style(spec: str) -> StyleSpec:
    """``mmu``, ``mmu:10``, ``questions.jsonl`` or ``questions.jsonl:5``."""
    m = re.fullmatch(r"(.+?)(?::(\d+))?", spec.strip())
    if not m or not m.group(1):
        raise ConfigError(f"--style {spec!r}: expected mmu:N or FILE.jsonl:N")
    source, count = m.group(1), int(m.group(2) or DEFAULT_COUNT)
    if count < 1:
        raise ConfigError(f"--style {spec!r}: the number of examples must be at least 1")
    if source.lower() in ("mmu", "mmu_ragent", "mmu-ragent"):
        return StyleSpec("mmu", shared_data_dir() / "mmu_ragent" / "t2t_val.jsonl", count, MMU_PAPER_LIMIT)
    return StyleSpec(source, Path(source), count, 0)


def style_examples(spec: StyleSpec, seed: int) -> list[StyleExample]:
    """``spec.count`` examples with a reference, after the skipped lines, chosen by the seed, in file order."""
    if not spec.path.exists():
        where = " (the shared data: set HIFIRAG_SHARED_DATA)" if spec.name == "mmu" else ""
        raise ConfigError(f"--style {spec.name}: no file {spec.path}{where}")
    questions = load_questions(spec.path).questions
    usable = [q for q in questions[spec.skip_first:] if q.reference and q.reference.strip()]
    if len(usable) < spec.count:
        raise ConfigError(f"--style {spec.name}: {len(usable)} usable examples, {spec.count} asked for")
    chosen = sorted(usable, key=lambda q: stable_hash([seed, q.id]))[: spec.count]
    return [StyleExample(q.id, q.query, q.reference.strip()) for q in sorted(chosen, key=lambda q: q.line_no)]


def render_examples(examples: list[StyleExample]) -> str:
    """The examples as the ``.jsonl`` A.6 shows: one ``{"query", "reference"}`` object per line."""
    return "\n".join(json.dumps({"query": e.query, "reference": e.reference}, ensure_ascii=False) for e in examples)


def typical_words(examples: list[StyleExample]) -> int:
    """The examples' median answer length in words."""
    return int(statistics.median(word_count(e.reference) for e in examples))
