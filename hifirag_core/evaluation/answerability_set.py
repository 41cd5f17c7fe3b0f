"""The answerability development set: questions the docs corpus answers and questions it does not.

Built from the shared data only, the same way every time:

* **answerable** (FAQ protocol b): the FAQ questions of the FAQ pages that stay in the corpus. Which
  FAQ pages stay is fixed by a hash of the page (:func:`faq_page_left_out`), about half of them;
  each question's gold section is on its page, so "answered and cited" is checked against it.
* **unanswerable**:
  - FAQ protocol (a): the questions of the other FAQ pages. Those pages leave the corpus, and so does
    every other page found to carry a question's gold answer (``answerability_set.json``, built and
    explained by ``tools/build_answerability_set.py``); a question whose answer is spread too widely
    to leave out is dropped from the set instead (listed there with the reason);
  - MMU-RAGent validation questions (general web questions: cooking, physics, games) asked of the
    documentation corpus: the first ``mmu_lines`` lines, the ones the paper scores.
* **halves**: every question is in the ``tune`` or the ``report`` half by a fixed hash of its id
  (:func:`half_of`). Thresholds are chosen on the tune half only; figures are reported on the other.

The set is written as a question file (FAQ format, with ``answerable``, ``origin`` and ``half`` kept as
question metadata) under ``<data root>/datasets/``; the corpus exclusions travel as the dataset's
``corpus.exclude`` override.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hifirag_core.corpus.sites import SITES, gold_location
from hifirag_core.resources import shared_data_dir

SPEC_PATH = Path(__file__).with_name("answerability_set.json")
Half = Literal["tune", "report"]
HALVES: tuple[Half, ...] = ("tune", "report")


def _bit(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2


def faq_page_left_out(corpus: str, page: str) -> bool:
    """Whether a FAQ page leaves the corpus (its questions become unanswerable): a fixed hash of the page."""
    return _bit(f"{corpus}:{page}") == 1


def half_of(question_id: str) -> Half:
    """The half a question belongs to, by a fixed hash of its id."""
    return HALVES[_bit(f"answerability-half:{question_id}")]


@dataclass(frozen=True)
class AnswerabilitySet:
    """The questions (as question-file rows) and the corpus pages to leave out."""

    rows: list[dict]
    exclude: tuple[str, ...]

    def write(self, path: Path, half: Half | None = None) -> Path:
        """The question file of the whole set, or of one half; rewritten only when it changed."""
        rows = [r for r in self.rows if half is None or r["half"] == half]
        text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return path


def load_spec(path: Path = SPEC_PATH) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def build_set(shared: Path | None = None, spec: dict | None = None) -> AnswerabilitySet:
    """The set from the shared FAQ and MMU-RAGent files and the committed selection."""
    shared = shared or shared_data_dir()
    spec = spec or load_spec()
    dropped = set(spec.get("faq_dropped", {})) | set(spec.get("mmu_dropped", {}))
    rows: list[dict] = []
    left_out_pages: set[str] = set()
    for line in (shared / "docs_faq" / "faq_qa.jsonl").read_text(encoding="utf-8").splitlines():
        faq = json.loads(line)
        if faq["id"] in dropped:
            continue
        row = {"id": faq["id"], "question": faq["question"], "answer": faq["answer"], "half": half_of(faq["id"])}
        if faq_page_left_out(faq["corpus"], faq["page"]):
            left_out_pages.add(SITES[faq["corpus"]].url_for(faq["page"]))
            row.update(answerable=False, origin="faq-a")
        else:
            gold_url, gold_anchor = gold_location(faq)
            row.update(answerable=True, origin="faq-b", gold_url=gold_url, gold_anchor=gold_anchor)
        rows.append(row)
    mmu_lines = (shared / "mmu_ragent" / "t2t_val.jsonl").read_text(encoding="utf-8").splitlines()
    for line in mmu_lines[: spec["mmu_lines"]]:
        mmu = json.loads(line)
        if mmu["iid"] in dropped:
            continue
        rows.append({"id": mmu["iid"], "question": mmu["query"], "answer": mmu.get("reference"),
                     "half": half_of(mmu["iid"]), "answerable": False, "origin": "mmu"})
    answer_pages = {url for urls in spec.get("answer_pages", {}).values() for url in urls}
    return AnswerabilitySet(rows, tuple(sorted(left_out_pages | answer_pages)))


def dataset_file(root: Path, half: Half | None = None) -> Path:
    """Where the set's question file lives under a data root."""
    name = "answerability" if half is None else f"answerability_{half}"
    return Path(root) / "datasets" / f"{name}.jsonl"
