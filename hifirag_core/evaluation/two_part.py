"""Two-part questions: whose answer lives in two places, to measure whether looking again finds the second.

Built from the shared FAQ set only, the same way every time:

* **eligible** FAQ questions are one question each (one "?", at its end, no ";") that open with an asking
  word ("How", "What", "Why", "Is", ...), so "How do I X, and what is Y?" reads as one question;
* **pairs**: the eligible questions in the order of a fixed hash of their id; each takes the next one not
  yet used whose page differs (``corpus:page``), until :data:`PAIRS` pairs. A FAQ question is in one pair;
* **the question** is the first as asked without its "?", ", and ", then the second with its first letter
  lower-cased (every eligible question opens with an asking word, never a name or "I");
* **the gold** is both sections (``page#anchor`` each, in ``gold_sections``); ``gold_url`` and
  ``gold_anchor`` name the first, so the evidence funnel follows it as it follows any FAQ question;
* **halves**: the pairs in the order of a fixed hash of the pair's id; the first half is ``tune``, the
  other ``report``. Settings are chosen on the tune half only; figures are reported on the other.

The corpus is FAQ protocol (b): every page stays in it (the known-item check: is each gold section kept by
section ranking and its page cited).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hifirag_core.corpus.sites import gold_location
from hifirag_core.metrics.bootstrap import PairedBootstrapCI, paired_bootstrap_ci
from hifirag_core.resources import shared_data_dir
from hifirag_core.store.warehouse import Warehouse

Half = Literal["tune", "report"]
HALVES: tuple[Half, ...] = ("tune", "report")
PAIRS = 80
# The words an eligible question opens with: lower-cased, each still reads as the start of a clause (and
# the sufficiency check's splitter knows a clause that starts with one asks something of its own).
ASKING = frozenset({"how", "what", "why", "when", "where", "which", "is", "are", "can", "do", "does", "should",
                    "have"})


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def eligible(faq: Mapping) -> bool:
    """One question that opens with an asking word and ends with its only "?"."""
    text = str(faq["question"]).strip()
    first = text.split(maxsplit=1)[0] if text else ""
    return text.endswith("?") and text.count("?") == 1 and ";" not in text and first.lower() in ASKING


def join_questions(first: str, second: str) -> str:
    """"How do I X, and what is Y?" from "How do I X?" and "What is Y?"."""
    head = first.strip().rstrip("?").rstrip()
    tail = second.strip()
    return f"{head}, and {tail[:1].lower()}{tail[1:]}"


def _page(faq: Mapping) -> str:
    return f"{faq['corpus']}:{faq['page']}"


def _gold_section(faq: Mapping) -> str:
    url, anchor = gold_location(faq)
    return f"{url}#{anchor}"


def pair_rows(faqs: Sequence[Mapping], n_pairs: int = PAIRS) -> list[dict]:
    """The question-file rows of ``n_pairs`` two-part questions (see the module docstring), report half last."""
    pool = sorted((f for f in faqs if eligible(f)), key=lambda f: _key(f"two-part:{f['id']}"))
    used: set[str] = set()
    pairs: list[tuple[Mapping, Mapping]] = []
    for first in pool:
        if len(pairs) == n_pairs:
            break
        if first["id"] in used:
            continue
        second = next((f for f in pool if f["id"] not in used and f["id"] != first["id"]
                       and _page(f) != _page(first)), None)
        if second is None:
            break
        used.update((first["id"], second["id"]))
        pairs.append((first, second))
    rows = []
    for first, second in pairs:
        pair_id = f"two-part:{_key(first['id'] + '+' + second['id'])[:12]}"
        gold_url, gold_anchor = gold_location(first)
        rows.append({"id": pair_id, "question": join_questions(first["question"], second["question"]),
                     "answer": f"{first['answer'].strip()}\n\n{second['answer'].strip()}",
                     "gold_url": gold_url, "gold_anchor": gold_anchor,
                     "gold_sections": [_gold_section(first), _gold_section(second)],
                     "parts": [first["id"], second["id"]],
                     "part_questions": [first["question"], second["question"]]})
    rows.sort(key=lambda r: _key(f"two-part-half:{r['id']}"))
    for i, row in enumerate(rows):
        row["half"] = HALVES[0] if i < len(rows) // 2 else HALVES[1]
    return rows


@dataclass(frozen=True)
class TwoPartSet:
    rows: list[dict]

    def write(self, path: Path, half: Half | None = None) -> Path:
        """The question file of the whole set, or of one half; rewritten only when it changed."""
        rows = [r for r in self.rows if half is None or r["half"] == half]
        text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return path


def build_set(shared: Path | None = None, n_pairs: int = PAIRS) -> TwoPartSet:
    """The set from the shared FAQ file."""
    path = (shared or shared_data_dir()) / "docs_faq" / "faq_qa.jsonl"
    faqs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return TwoPartSet(pair_rows(faqs, n_pairs))


def dataset_file(root: Path, half: Half | None = None) -> Path:
    """Where the set's question file lives under a data root."""
    name = "two_part" if half is None else f"two_part_{half}"
    return Path(root) / "datasets" / f"{name}.jsonl"


# --- scoring -----------------------------------------------------------------------------------------

def gold_sections_found(warehouse: Warehouse, run_id: str) -> dict[str, list[tuple[bool, bool]]]:
    """question -> per gold section (``gold_sections`` of the question's metadata), whether section ranking
    kept it in any round and whether the answer cites its page. A kept section is the gold one when its
    anchor is the gold anchor or its heading is that part's question (as the evidence funnel matches a FAQ
    question's). Only rounds the run's ledger (``stage_runs``) holds count: a rerun under the same run id that
    looked again fewer times left an earlier attempt's later rounds in the tables before such rows were
    removed on write (``Warehouse.drop_rounds_after``), and older data roots still hold them. Questions
    without ``gold_sections`` are left out."""
    golds: dict[str, list[tuple[str, str, str]]] = {}
    for qid, meta_json in warehouse.query("SELECT question_id, meta_json FROM questions WHERE run_id = ?",
                                          [run_id]).rows:
        meta = json.loads(meta_json) if meta_json else {}
        sections = meta.get("gold_sections") or []
        headings = meta.get("part_questions") or [""] * len(sections)
        if sections:
            golds[qid] = [(*s.split("#", 1), h) for s, h in zip(sections, headings, strict=True)]
    kept: dict[str, list[tuple[str, str, str]]] = {}
    for qid, url, anchor, heading in warehouse.query(
            """SELECT d.question_id, split_part(s.url, '#', 1), coalesce(s.anchor, ''), coalesce(s.heading, '')
               FROM section_decisions d JOIN sections s USING (run_id, question_id, section_id)
               WHERE d.run_id = ? AND d.kept
                 AND EXISTS (SELECT 1 FROM stage_runs r WHERE r.run_id = d.run_id AND r.question_id = d.question_id
                             AND r.stage = d.stage AND r.round = d.round)""", [run_id]).rows:
        kept.setdefault(qid, []).append((url, anchor, heading))
    cited = {qid: set(urls or []) for qid, urls in
             warehouse.query("SELECT question_id, cited_urls FROM answers WHERE run_id = ?", [run_id]).rows}
    return {qid: [(any(u == url and (a == anchor or (heading and h == heading)) for u, a, h in kept.get(qid, [])),
                   url in cited.get(qid, set())) for url, anchor, heading in gold]
            for qid, gold in golds.items()}


def all_cited(found: Sequence[tuple[bool, bool]]) -> bool:
    """Every gold section kept and its page cited."""
    return bool(found) and all(kept and cited for kept, cited in found)


@dataclass(frozen=True)
class PairedTable:
    """Two runs over the same two-part questions: both gold sections cited, paired per question."""

    baseline: str
    system: str
    interval: PairedBootstrapCI
    both: int  # McNemar's table: cited by both runs, by the system only, by the baseline only, by neither
    system_only: int
    baseline_only: int
    neither: int

    def markdown(self) -> str:
        ci = self.interval
        return "\n".join([
            "| both gold sections cited | n | baseline | system | paired difference [95% CI] |",
            "|---|---|---|---|---|",
            f"| {self.baseline} vs {self.system} | {ci.n} | {ci.mean_baseline:.3f} | {ci.mean_system:.3f} | "
            f"{ci.mean_diff:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}] |",
            "",
            f"McNemar: both {self.both}, {self.system} only {self.system_only}, "
            f"{self.baseline} only {self.baseline_only}, neither {self.neither} "
            f"(paired percentile bootstrap, {ci.n_resamples} resamples, seed fixed; "
            f"exact McNemar two-sided p = {self.mcnemar_p:.4f})",
        ])

    @property
    def mcnemar_p(self) -> float:
        """The exact (binomial) two-sided McNemar p-value of the discordant questions."""
        n, k = self.system_only + self.baseline_only, min(self.system_only, self.baseline_only)
        if n == 0:
            return 1.0
        return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired_table(baseline: Mapping[str, Sequence[tuple[bool, bool]]], system: Mapping[str, Sequence[tuple[bool, bool]]],
                 names: tuple[str, str] = ("baseline", "system")) -> PairedTable:
    """The paired difference of "both gold sections cited" over the questions both runs have."""
    ids = sorted(set(baseline) & set(system))
    if not ids:
        raise ValueError("the two runs share no two-part question")
    a = [float(all_cited(baseline[q])) for q in ids]
    b = [float(all_cited(system[q])) for q in ids]
    pairs = list(zip(a, b, strict=True))
    return PairedTable(names[0], names[1], paired_bootstrap_ci(b, a),
                       sum(1 for x, y in pairs if x and y), sum(1 for x, y in pairs if y and not x),
                       sum(1 for x, y in pairs if x and not y), sum(1 for x, y in pairs if not x and not y))
