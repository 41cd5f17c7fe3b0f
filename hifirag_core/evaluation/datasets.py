"""The data sets an evaluation runs on, and what makes two evaluations comparable.

* ``mmu`` (``mmu_ragent``): the MMU-RAGent text-to-text validation set; the paper scores its first
  100 lines, so that is the default selection. Questions whose reference is null are reported as
  unscorable, never scored.
* ``faq-a``: the FAQ set with the FAQ pages left out of the corpus (their text is the gold
  answer); answers are scored against the gold answers.
* ``faq-b``: the FAQ set over the whole corpus, known-item: is the gold section kept by section
  ranking and its page cited.
* ``answerability``: questions the docs corpus answers (FAQ protocol b) and questions it does not
  (FAQ protocol a with every page carrying their answer left out, and MMU-RAGent web questions);
  ``answerability-tune`` and ``answerability-report`` are its two fixed halves (see
  ``hifirag_core.evaluation.answerability_set``). Scores abstention precision and recall and the
  share of answerable questions answered and cited.
* ``two-part``: pairs of FAQ questions from different pages asked as one ("How do I X, and what is Y?"),
  over the whole corpus (protocol b); the gold is both sections. ``two-part-tune`` and
  ``two-part-report`` are its fixed halves (``hifirag_core.evaluation.two_part``). Scores, beside the
  known-item check of the first part, whether every gold section was kept and cited.
* any JSONL path with ``query`` and ``reference`` (or fields mapped with ``fields``).

An evaluation's *dataset fingerprint* covers the selected questions (ids, queries, references)
and the protocol (the corpus exclusions it implies), so protocol (a) and (b) of the same
questions never compare with each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS
from hifirag_core.evaluation import answerability_set, transfer_set, two_part
from hifirag_core.hashing import stable_hash
from hifirag_core.questions import QuestionSet
from hifirag_core.resources import data_root, shared_data_dir

MMU_PAPER_LIMIT = 100


@dataclass(frozen=True)
class EvalDataset:
    """A question file, the protocol's config overrides, and the default selection."""

    name: str  # mmu_ragent | faq_a | faq_b | answerability[_tune|_report] | custom:<stem>
    path: Path
    overrides: tuple[str, ...] = ()
    default_limit: int | None = None
    fields: dict[str, str] | None = None
    note: str = ""
    # Score the known-item check (gold section kept and cited): True, False, or None for "where
    # the questions say where their answer lives" (gold_url).
    known_item: bool | None = None

    @property
    def slug(self) -> str:
        """The name in ids and artifact keys: lower-case letters, digits and dashes."""
        return "".join(c if c.isalnum() else "-" for c in self.name.lower()).strip("-")

    def fingerprint(self, questions: QuestionSet) -> str:
        """Same questions and same protocol: comparable evaluations."""
        return stable_hash({"questions": questions.fingerprint, "protocol": self.name.split(":")[0],
                            "overrides": sorted(self.overrides)})


def faq_exclusion() -> str:
    """The override that leaves the FAQ pages out of the corpus (protocol a)."""
    return f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}"


def resolve_dataset(spec: str, fields: dict[str, str] | None = None, root: Path | None = None) -> EvalDataset:
    """A dataset name (``mmu``, ``faq-a``, ``faq-b``, ``answerability[-tune|-report]``,
    ``two-part[-tune|-report]``) or a path to a JSONL file of questions. ``root`` is the data root a built
    dataset (answerability, two-part) is written under."""
    shared = shared_data_dir()
    key = spec.strip().lower().replace("_", "-")
    if key in ("answerability", "answerability-tune", "answerability-report"):
        return _answerability(key, root)
    if key.startswith("transfer-") and key.split("-")[1] in transfer_set.CORPORA and \
            key.split("-", 2)[2:] in ([], ["tune"], ["report"]):
        return _transfer(key, root)
    if key in ("two-part", "two-part-tune", "two-part-report"):
        return _two_part(key, root)
    if key in ("mmu", "mmu-ragent"):
        return EvalDataset("mmu_ragent", shared / "mmu_ragent" / "t2t_val.jsonl", default_limit=MMU_PAPER_LIMIT,
                           note="MMU-RAGent validation set: the first 100 lines, as the paper scored")
    if key in ("faq-a", "faq"):
        return EvalDataset("faq_a", shared / "docs_faq" / "faq_qa.jsonl", (faq_exclusion(),), known_item=False,
                           note="FAQ protocol (a): FAQ pages left out of the corpus, scored against the gold answers")
    if key == "faq-b":
        return EvalDataset("faq_b", shared / "docs_faq" / "faq_qa.jsonl", known_item=True,
                           note="FAQ protocol (b): every page in the corpus; is the gold section kept and cited")
    path = Path(spec)
    return EvalDataset(f"custom:{path.stem}", path, fields=fields,
                       note=f"questions from {path}")


def _answerability(key: str, root: Path | None) -> EvalDataset:
    half = key.removeprefix("answerability").lstrip("-") or None
    path = answerability_set.dataset_file(root or data_root(), half)  # type: ignore[arg-type]
    which = f"the {half} half of " if half else ""
    note = (f"Answerability: {which}FAQ (b) questions the corpus answers, FAQ (a) questions whose answering "
            "pages are left out and MMU-RAGent web questions it does not")
    faq = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
    if not faq.exists():  # plan_evaluation names the missing shared file
        return EvalDataset(f"answerability{'_' + half if half else ''}", faq, note=note)
    built = answerability_set.build_set()
    built.write(path, half)  # type: ignore[arg-type]
    return EvalDataset(f"answerability{'_' + half if half else ''}", path,
                       (f"corpus.exclude={json.dumps(list(built.exclude))}",), known_item=None, note=note)


def _transfer(key: str, root: Path | None) -> EvalDataset:
    corpus, _, half = key.removeprefix("transfer-").partition("-")
    path = transfer_set.dataset_file(root or data_root(), corpus, half or None)  # type: ignore[arg-type]
    name = "transfer_" + corpus + (f"_{half}" if half else "")
    which = f"the {half} half of " if half else ""
    note = (f"Answerability transfer set: {which}the {corpus} corpus's answerable and unanswerable questions "
            "(halved by page group)")
    shared = shared_data_dir()
    needed = shared / ("docs_faq/faq_qa.jsonl" if corpus == "docs" else str(transfer_set.MEDQUAD))
    if not needed.exists():  # plan_evaluation names the missing shared file
        return EvalDataset(name, needed, note=note)
    built = transfer_set.build_transfer_set(shared)
    built.write(path, corpus, half or None)  # type: ignore[arg-type]
    overrides = [f"corpus.exclude={json.dumps(list(built.exclude[corpus]))}"]
    if corpus == "health":
        overrides.insert(0, f"corpus.name={transfer_set.HEALTH_CORPUS}")
    return EvalDataset(name, path, tuple(overrides), known_item=None, note=note)


def _two_part(key: str, root: Path | None) -> EvalDataset:
    half = key.removeprefix("two-part").lstrip("-") or None
    path = two_part.dataset_file(root or data_root(), half)  # type: ignore[arg-type]
    which = f"the {half} half of " if half else ""
    note = (f"Two-part questions: {which}pairs of FAQ questions from different pages asked as one, every page "
            "in the corpus; are both gold sections kept and cited")
    name = f"two_part{'_' + half if half else ''}"
    faq = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
    if not faq.exists():  # plan_evaluation names the missing shared file
        return EvalDataset(name, faq, note=note)
    two_part.build_set().write(path, half)  # type: ignore[arg-type]
    return EvalDataset(name, path, known_item=True, note=note)
