"""Find the corpus pages that carry the gold answer of a left-out FAQ question, for the answerability set.

The answerability set's unanswerable FAQ questions (``hifirag_core/evaluation/answerability_set.py``) are
those of the FAQ pages left out of the corpus. Their answers can also live elsewhere (the tutorial says
what Python is; the extending guide lists the alternatives to writing C). This script finds those pages:

1. candidates: the top 20 passages by BM25 for the gold answer, for the question as the pipeline
   searches it, and for its keyword query (the offline query plan), over the corpus without FAQ pages;
   With ``--run RUN_ID`` (a run of the set), the sections the pipeline itself kept for the question
   are candidates too: whatever it reads must not carry the answer.
2. each candidate's MiniLM cosine to the gold answer; a page whose passage reaches ``--threshold``
   carries the answer and leaves the corpus too. 0.5: of 10 passages drawn from 0.50-0.55 none answered
   its question, but of the best passages left below 0.55 for 25 questions three answered in part
   (the tutorial's "easy to learn" for "is Python good for beginners", PyTuple_Pack for Py_BuildValue,
   the GeoDjango tutorial's migrate for "how do I update the database"), all between 0.50 and 0.55.

A FAQ page that stays in the corpus never leaves it: a left-out question whose answer one of them carries
(the programming FAQ answers "why self?" as well as the design FAQ) is dropped from the set instead.

It writes ``answer_pages`` of ``answerability_set.json`` (question id -> pages) and prints, for a sample
of questions, the best passage that stays, to be read by hand: that is the label check.

    .venv/bin/python tools/build_answerability_set.py --check 20
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hifirag_core.backends.offline import search_queries  # noqa: E402
from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS
from hifirag_core.corpus.store import is_excluded, open_corpus, passages  # noqa: E402
from hifirag_core.evaluation.answerability_set import SPEC_PATH, faq_page_left_out, load_spec  # noqa: E402
from hifirag_core.resources import data_root, shared_data_dir
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402
from hifirag_core.store.warehouse import Warehouse  # noqa: E402

PASSAGE_CHARS = 2000  # MiniLM reads 256 tokens; the rest only costs tokenizing
PER_QUERY = 20


def kept_sections(root: Path, run_id: str) -> dict[str, list[tuple[str, str]]]:
    """question -> (page URL, heading and text) of every section the run's ranking kept."""
    rows = Warehouse(root).query(
        """SELECT d.question_id, s.url, concat_ws(' ', s.heading, s.text) FROM section_decisions d
           JOIN sections s USING (run_id, question_id, section_id) WHERE d.run_id = ? AND d.kept""", [run_id]).rows
    out: dict[str, list[tuple[str, str]]] = {}
    for qid, url, text in rows:
        out.setdefault(qid, []).append((url, text))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, help="the data root [default: $HIFIRAG_DATA_ROOT, else the project's]")
    parser.add_argument("--threshold", type=float, default=0.55)
    parser.add_argument("--check", type=int, default=20, help="questions whose best remaining passage is printed")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--write", action="store_true", help="write answer_pages into answerability_set.json")
    parser.add_argument("--run", help="a run of the set: the sections it kept are candidates too")
    args = parser.parse_args()
    root = data_root(args.data_root)
    kept = kept_sections(root, args.run) if args.run else {}

    corpus = open_corpus(root, "docs")
    urls, owners, bm25 = corpus.bm25()
    pages = corpus.pages()
    faq = np.array([0.0 if any(fnmatch.fnmatchcase(u, p) for p in FAQ_PAGE_PATTERNS) else 1.0 for u in urls],
                   dtype=np.float32)
    mask = faq[owners]
    texts = [chunk for u in urls for chunk in (passages(pages[u].title, pages[u].text) or [pages[u].title])]
    embedder = Embedder(root / "cache" / "vectors.sqlite")
    rows = [json.loads(line) for line in (shared_data_dir() / "docs_faq" / "faq_qa.jsonl").open(encoding="utf-8")]
    left_out = [r for r in rows if faq_page_left_out(r["corpus"], r["page"])]
    found: dict[str, list[str]] = {}
    dropped: dict[str, str] = {}
    remaining: dict[str, tuple[float, str, str]] = {}
    for n, row in enumerate(left_out, 1):
        candidates: set[int] = set()
        for query in [row["answer"], *search_queries(row["question"], 2)]:
            docs, scores = bm25.retrieve(corpus.tokenize([query]), k=PER_QUERY, show_progress=False, n_threads=1,
                                         weight_mask=mask)
            candidates.update(int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0)
        ordered = sorted(candidates)
        read = kept.get(row["id"], [])
        cosine = embedder.encode([texts[d][:PASSAGE_CHARS] for d in ordered] + [t[:PASSAGE_CHARS] for _, t in read]) \
            @ embedder.encode_one(row["answer"])
        by_page: dict[str, tuple[float, str]] = {}
        for (url, text), c in zip([(urls[owners[d]], texts[d]) for d in ordered] + read, cosine, strict=True):
            if c > by_page.get(url, (-1.0, ""))[0]:
                by_page[url] = (float(c), text)
        carrying = sorted(u for u, (c, _) in by_page.items() if c >= args.threshold)
        on_faq = [u for u in carrying if is_excluded(u, FAQ_PAGE_PATTERNS)]
        if on_faq:  # a FAQ page that stays answers it too: the question cannot be unanswerable here
            dropped[row["id"]] = f"its answer is also on {', '.join(on_faq)}, which stays in the corpus"
        elif carrying:
            found[row["id"]] = carrying
        stays = max(((c, u, t) for u, (c, t) in by_page.items() if c < args.threshold), default=None)
        if stays:
            remaining[row["id"]] = (stays[0], stays[1], stays[2][:400])
        print(f"[{n}/{len(left_out)}] {row['id']}: {len(carrying)} page(s) carry the answer", file=sys.stderr)
    pages_out = sorted({u for us in found.values() for u in us})
    print(f"{len(left_out)} left-out FAQ questions; {len(found)} have their answer on other pages too, "
          f"{len(pages_out)} such pages leave the corpus (threshold {args.threshold}); {len(dropped)} are dropped: "
          "a FAQ page that stays answers them")
    sample = random.Random(args.seed).sample(left_out, min(args.check, len(left_out)))
    for row in sample:
        cos, url, text = remaining.get(row["id"], (0.0, "-", ""))
        print(f"\n== {row['id']}\nQ: {row['question']}\nGOLD: {' '.join(row['answer'].split())[:300]}\n"
              f"BEST THAT STAYS ({cos:.2f}) {url}\n   {' '.join(text.split())}")
    if args.write:
        spec = load_spec()
        if args.run:  # a second round adds to what the first found
            for qid, urls_before in spec.get("answer_pages", {}).items():
                if qid not in dropped:
                    found[qid] = sorted(set(found.get(qid, [])) | set(urls_before))
            dropped = {**spec.get("faq_dropped", {}), **dropped}
        spec["answer_pages"] = found
        spec["faq_dropped"] = dropped
        spec["answer_pages_threshold"] = args.threshold
        SPEC_PATH.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"\nwrote {SPEC_PATH}")


if __name__ == "__main__":
    main()
