"""Rebuild the answerability transfer set and refit the calibration, leaving one corpus out, in one command.

    .venv/bin/python tools/answerability_transfer.py --data-root /tmp/transfer

Steps (each one the same every time, so two runs write the same bytes):

1. **the health site**: MedQuAD rendered as HTML pages (``hifirag_core.evaluation.transfer_set``) and
   built into the local corpus ``health``, as ``hifirag corpus build --name health --folder DIR --manifest
   DIR/manifest.jsonl`` would (skipped when the corpus was built from the same manifest);
2. **the selection** (``hifirag_core/evaluation/transfer_set.json``): page groups in a fixed hash order;
   - unanswerable: the first ``--unanswerable`` groups whose question's gold answer is carried by at most
     ``--max-carrying`` pages outside the group. A page carries it when one of its passages, among the top
     20 by BM25 for the answer, the question and its keyword query, has a MiniLM cosine of at least
     ``--threshold`` (0.55, as ``tools/build_answerability_set.py`` chose for the docs) with the answer.
     The group's pages and the carrying pages leave the corpus; a question whose answer is everywhere is
     dropped (listed with the reason);
   - answerable: the next ``--answerable`` groups none of whose pages left, one question each;
   - MMU-RAGent questions whose reference a health page carries (same test) are dropped: the set
     says the health corpus does not answer them;
3. **the runs**: ``hifirag run`` of each corpus's questions with ``final_judged`` (it answers every
   question and stores the decision's signals; stages are cached, so a second run costs little);
4. **the choice, the fit and the table** (``hifirag_core.evaluation.transfer``): the signals and the
   threshold's recall chosen by leaving one corpus out between the **tune** halves; then that recipe fitted
   on one corpus's tune half and measured on the other's report half, both ways, and the shipped fit on
   both tune halves (copy it into ``answerability.CALIBRATION`` and the ``answerability`` config defaults),
   written to ``--out`` (Markdown) and printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hifirag_core.backends.offline import search_queries  # noqa: E402
from hifirag_core.corpus.build import build_from_folder  # noqa: E402
from hifirag_core.corpus.store import corpus_at, open_corpus, passages  # noqa: E402
from hifirag_core.evaluation import transfer_set  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402

PASSAGE_CHARS = 2000
PER_QUERY = 20
MIN_ANSWER_WORDS = 20


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_health_corpus(root: Path) -> None:
    """Render the site and build the corpus, unless it was built from this very manifest."""
    folder = transfer_set.site_folder(root)
    manifest = transfer_set.render_health_site(folder)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted((folder / "pages").glob("*.html")))
                            + manifest.read_bytes()).hexdigest()
    target = corpus_at(root, transfer_set.HEALTH_CORPUS)
    stamp = target.root / "site.sha256"
    if target.is_current() and stamp.exists() and stamp.read_text() == digest:
        print(f"health corpus: current ({target.root})", file=sys.stderr)
        return
    built = build_from_folder(target.root, target.blobs, folder, None, manifest=manifest)
    stamp.write_text(digest)
    print(f"health corpus: built, {built.manifest()['pages']} pages", file=sys.stderr)


class Carriers:
    """Which corpus pages carry a given answer (BM25 candidates, then MiniLM cosine)."""

    def __init__(self, root: Path, threshold: float):
        self.corpus = open_corpus(root, transfer_set.HEALTH_CORPUS)
        self.urls, self.owners, self.bm25 = self.corpus.bm25()
        pages = self.corpus.pages()
        self.texts = [chunk for u in self.urls for chunk in (passages(pages[u].title, pages[u].text) or [pages[u].title])]
        self.embedder = Embedder(root / "cache" / "vectors.sqlite")
        self.threshold = threshold

    def pages(self, answer: str, question: str, outside: set[str]) -> list[str]:
        mask = np.array([0.0 if u in outside else 1.0 for u in self.urls], dtype=np.float32)[self.owners]
        candidates: set[int] = set()
        for query in [answer, *search_queries(question, 2)]:
            tokens = self.corpus.tokenize([query])
            if not tokens[0]:
                continue
            docs, scores = self.bm25.retrieve(tokens, k=PER_QUERY, show_progress=False, n_threads=1, weight_mask=mask)
            candidates.update(int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0)
        ordered = sorted(candidates)
        if not ordered:
            return []
        cosine = self.embedder.encode([self.texts[d][:PASSAGE_CHARS] for d in ordered]) @ self.embedder.encode_one(answer)
        return sorted({self.urls[self.owners[d]] for d, c in zip(ordered, cosine, strict=True) if c >= self.threshold})


def select(root: Path, args: argparse.Namespace) -> dict:
    """The committed selection (see the module docstring, step 2)."""
    shared = shared_data_dir()
    pages = transfer_set.health_pages(transfer_set.load_medquad(shared))
    groups = transfer_set.page_groups(pages)
    members: dict[str, list[transfer_set.HealthPage]] = {}
    for page in pages:
        members.setdefault(groups[page.url], []).append(page)
    order = sorted(members, key=lambda g: _hash(f"transfer-order:{g}"))
    carriers = Carriers(root, args.threshold)

    def candidate(group: str) -> tuple[transfer_set.HealthPage, dict] | None:
        pairs = [(p, q) for p in members[group] for q in p.qa
                 if len(q["answer"].split()) >= MIN_ANSWER_WORDS and q["question"].strip()]
        return min(pairs, key=lambda pq: _hash(f"transfer-question:{pq[1]['key']}")) if pairs else None

    unanswerable: dict[str, str] = {}
    dropped: dict[str, str] = {}
    left_out: set[str] = set()
    rest = iter(order)
    for group in rest:
        if len(unanswerable) >= args.unanswerable:
            break
        chosen = candidate(group)
        if chosen is None:
            continue
        page, pair = chosen
        own = {p.url for p in members[group]}
        carrying = [u for u in carriers.pages(pair["answer"], pair["question"], own) if u not in left_out]
        if len(carrying) > args.max_carrying:
            dropped[pair["key"]] = f"{len(carrying)} pages outside its group carry its answer"
            continue
        unanswerable[pair["key"]] = group
        left_out |= own | set(carrying)
        print(f"unanswerable {len(unanswerable)}: {pair['key']} ({len(carrying)} carrying)", file=sys.stderr)
    answerable: dict[str, str] = {}
    for group in rest:
        if len(answerable) >= args.answerable:
            break
        chosen = candidate(group)
        if chosen is None or any(p.url in left_out for p in members[group]):
            continue
        answerable[chosen[1]["key"]] = group
    mmu_lines = (shared / "mmu_ragent" / "t2t_val.jsonl").read_text(encoding="utf-8").splitlines()[: args.mmu]
    mmu_dropped: dict[str, str] = {}
    for line in mmu_lines:
        mmu = json.loads(line)
        if not mmu.get("reference"):
            continue
        carrying = carriers.pages(mmu["reference"], mmu["query"], left_out)
        if carrying:
            mmu_dropped[mmu["iid"]] = f"its reference is carried by {', '.join(carrying[:3])}"
    return {"answerable": answerable, "unanswerable": unanswerable, "dropped": dropped,
            "left_out_pages": sorted(left_out), "mmu_lines": args.mmu, "mmu_dropped": mmu_dropped,
            "threshold": args.threshold, "max_carrying": args.max_carrying}


def run_set(root: Path, corpus: str, variant: str) -> None:
    """``hifirag run`` of one corpus's questions (the run the fit reads; no scoring needed)."""
    built = transfer_set.build_transfer_set()
    questions = built.write(transfer_set.dataset_file(root, corpus), corpus)  # type: ignore[arg-type]
    overrides = [f"corpus.exclude={json.dumps(list(built.exclude[corpus]))}"]
    if corpus == "health":
        overrides.append(f"corpus.name={transfer_set.HEALTH_CORPUS}")
    command = [sys.executable, "-m", "flows.cli", "run", str(questions), "--variant", variant, "--data-root", str(root)]
    for override in overrides:
        command += ["--set", override]
    print(f"$ hifirag run {questions} --variant {variant} (+ the corpus overrides)", file=sys.stderr)
    env = {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", **os.environ}  # a busy machine starts slowly
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        problems = [line[:500] for line in done.stderr.splitlines() if "| INFO" not in line]
        raise SystemExit(f"hifirag run failed ({done.returncode}):\n" + "\n".join(problems[-15:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, required=True)
    parser.add_argument("--answerable", type=int, default=150)
    parser.add_argument("--unanswerable", type=int, default=150)
    parser.add_argument("--mmu", type=int, default=100, help="MMU-RAGent lines asked of the health corpus")
    parser.add_argument("--threshold", type=float, default=0.55)
    parser.add_argument("--max-carrying", type=int, default=10)
    parser.add_argument("--variant", default="final_judged")
    parser.add_argument("--skip-select", action="store_true", help="keep the committed selection")
    parser.add_argument("--skip-runs", action="store_true", help="fit on the runs already in the warehouse")
    parser.add_argument("--out", type=Path, help="the transfer table (Markdown) [default: <data root>/reports/transfer.md]")
    args = parser.parse_args()
    root = args.data_root.resolve()
    ensure_health_corpus(root)
    if not args.skip_select:
        spec = select(root, args)
        transfer_set.SPEC_PATH.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {transfer_set.SPEC_PATH}", file=sys.stderr)
    if not args.skip_runs:
        for corpus in transfer_set.CORPORA:
            run_set(root, corpus, args.variant)
    from hifirag_core.evaluation.transfer import transfer_report

    text = transfer_report(root, args.variant)
    out = args.out or root / "reports" / "transfer.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
