"""Several search providers at once, through the fakes: Programmable Search, Scrapingdog and a folder of files.

Answers FAQ questions (the demo's sample; the FAQ pages left out of the web) with ``search.providers`` set to
``google,scrapingdog,folder``: the two search fakes serve the documentation corpus (Programmable Search ranks
the question's words by best passage, Scrapingdog its keywords only, so their lists differ), the folder holds
our own notes (Markdown, text, a PDF) and a few HTML pages. It prints which providers the cited pages came
from and the fused ranks in ``search_results`` (the SQL with its output). ``--fail`` makes Programmable Search
fail mid-run: its first search is answered, every later one meets a 429 and then a 500 on the retry.

    .venv/bin/python bench/demo_providers.py --root /tmp/providers-demo [--fail] [--questions 20]

Offline LLM roles (the default), Scrapingdog's scrape API as the fetcher for web pages. Each run uses its own
data root below ``--root`` (the corpus is built once in ``--root/base`` and copied), so no cache is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.corpus.sources import FAQ_PAGE_PATTERNS, docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402

FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"

NOTES = {
    "python/strings.md": "# Our notes on Python strings\n\n## Why strings are immutable\n\nPython strings are "
    "immutable: a string's value never changes, so strings can be dictionary keys and are safe to share "
    "between threads. To build a string in a loop, collect the parts in a list and call ''.join(parts) once.\n",
    "python/performance.txt": "Making slow Python code faster\n\nProfile first with cProfile to find the hot "
    "spots. Move work out of inner loops, use local variables, and prefer built-in functions and list "
    "comprehensions over explicit loops. For numeric work use NumPy.\n",
    "django/forms.md": "# Django forms in our team\n\n## Validation\n\nWe validate every form on the server with "
    "form.is_valid() and read cleaned_data afterwards; never trust request.POST directly.\n",
}


def write_folder(folder: Path) -> Path:
    """Our own notes, a PDF, and the Python HOWTO pages as HTML files (as a user keeps a local copy)."""
    from tests.pdfgen import pdf_document

    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in NOTES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    (folder / "python" / "threads.pdf").write_bytes(pdf_document([[
        ("Threads in CPython", 20), None,
        ("The global interpreter lock lets one thread run Python bytecode at a time.", 11),
        ("Threads still help with input and output; for CPU-bound work use processes.", 11),
    ]], title="Threads in CPython"))
    tarball = docs_html_dir() / "python3.11-doc.html.tar.xz"
    for page in iter_tarball_pages(tarball):
        if page.relpath.startswith("howto/") and page.relpath.count("/") == 1:
            (folder / page.relpath).parent.mkdir(parents=True, exist_ok=True)
            (folder / page.relpath).write_bytes(page.html)
    return folder


def base_root(root: Path) -> Path:
    from hifirag_core.corpus.build import build_default
    from hifirag_core.corpus.store import corpus_at

    base = root / "base"
    corpus = corpus_at(base, "docs")
    if not corpus.is_current():
        began = time.perf_counter()
        build_default(corpus.root, corpus.blobs)
        print(f"corpus built in {time.perf_counter() - began:.0f}s", flush=True)
    return base


def fail_after_first(fake, path: str) -> None:
    """The first search is answered; every later call meets a 429, then a 500 on its retry."""
    from tests.fakes.gemini import google_error
    from tests.fakes.server import Fault, Response

    state = {"n": 0, "next": ""}

    def rate_limited(request) -> bool:
        if not request.path.startswith(path):
            return False
        state["n"] += 1
        state["next"] = "" if state["n"] == 1 else ("429" if state["n"] % 2 == 0 else "500")
        return state["next"] == "429"

    fake.inject(Fault("status", times=10**6, match=rate_limited,
                      response=Response(429, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded"))))
    fake.inject(Fault("status", times=10**6, match=lambda r: r.path.startswith(path) and state["next"] == "500",
                      response=Response(500, google_error(500, "INTERNAL", "Backend Error"))))


def show(w, title: str, sql: str, run_id: str) -> None:
    result = w.query(sql, [run_id])
    print(f"\n-- {title}\n{sql.replace('$1', repr(run_id))};")
    print(" | ".join(result.columns))
    for row in result.rows:
        print(" | ".join("" if v is None else str(v) for v in row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--fail", action="store_true", help="Programmable Search fails after its first search")
    parser.add_argument("--set", action="append", default=[], help="more config overrides, key=value")
    args = parser.parse_args()
    base = base_root(args.root)
    run_root = args.root / ("run-fail" if args.fail else "run")
    if run_root.exists():
        shutil.rmtree(run_root)
    shutil.copytree(base, run_root)
    folder = write_folder(args.root / "myfiles")
    os.environ["PREFECT_HOME"] = str(run_root / "prefect-home")

    from flows.environment import configure, stage_cache_at
    from hifirag_core.backends.offline import LocalSearch
    from hifirag_core.corpus.store import open_corpus
    from hifirag_core.store.warehouse import Warehouse
    from hifirag_core.text import question_keywords
    from tests.fakes.search_servers import GoogleSearchFake, ScrapingdogFake

    configure(run_root)
    corpus = open_corpus(run_root, "docs")
    web = LocalSearch(corpus.index(FAQ_PAGE_PATTERNS))

    def page(url: str) -> bytes | None:
        found = corpus.page(url)
        return corpus.blobs.get(found.sha256) if found is not None and url in web.index else None

    google = GoogleSearchFake(search=lambda q, n: web.search(q, num=n)).start()
    scrapingdog = ScrapingdogFake(search=lambda q, n: web.search(" ".join(question_keywords(q)) or q, num=n),
                                  page=page).start()
    if args.fail:
        fail_after_first(google, "/customsearch")
    os.environ.update({"GOOGLE_CSE_KEY": google.api_key, "GOOGLE_CSE_ID": google.engine_id,
                       "SCRAPINGDOG_API_KEY": scrapingdog.api_key})
    overrides = [f"corpus.exclude={list(FAQ_PAGE_PATTERNS)!r}".replace("'", '"'),
                 "search.providers=google,scrapingdog,folder", f"search.folder={folder}",
                 "backends.fetch=scrapingdog", f"backends.google_search_base_url={google.base_url}",
                 f"backends.scrapingdog_base_url={scrapingdog.base_url}", "limits.retry_base_delay_s=0.2", *args.set]
    from flows.answer import answer_questions

    began = time.perf_counter()
    with stage_cache_at(run_root):
        summary = answer_questions(questions=str(FAQ), sample=args.questions, overrides=overrides,
                                   data_root=str(run_root))
    print(f"\nrun {summary['run_id']}: {summary['n_answered']} of {summary['n_questions']} answered in "
          f"{time.perf_counter() - began:.0f}s; Programmable Search asked {google.count()} times, Scrapingdog "
          f"search {scrapingdog.count(lambda r: r.path.startswith('/google'))}, scrape "
          f"{scrapingdog.count(lambda r: r.path.startswith('/scrape'))}")
    w, run_id = Warehouse(run_root), summary["run_id"]
    show(w, "cited pages by the providers that found them",
         "SELECT s.found_by, count(DISTINCT c.url) AS cited_pages, count(DISTINCT c.question_id) AS questions "
         "FROM citations c JOIN (SELECT DISTINCT question_id, url, array_to_string(list_sort(providers), '+') "
         "AS found_by FROM search_results WHERE run_id = $1 AND status = 'ok') s "
         "ON s.question_id = c.question_id AND s.url = c.url WHERE c.run_id = $1 GROUP BY 1 ORDER BY 1", run_id)
    show(w, "fused ranks: the first question's first query, its first 8 rows",
         "SELECT rank, round(fusion_score, 4) AS score, providers, provider_ranks, url FROM search_results "
         "WHERE run_id = $1 AND status = 'ok' AND query_index = 0 AND question_id = "
         "(SELECT min(question_id) FROM search_results WHERE run_id = $1) ORDER BY rank LIMIT 8", run_id)
    show(w, "rows per provider and status",
         "SELECT p AS provider, status, count(*) AS n_rows FROM (SELECT unnest(providers) AS p, status "
         "FROM search_results WHERE run_id = $1) GROUP BY ALL ORDER BY 1, 2", run_id)
    show(w, "answers", "SELECT status, count(*) AS n FROM answers WHERE run_id = $1 GROUP BY 1", run_id)
    google.stop()
    scrapingdog.stop()


if __name__ == "__main__":
    main()
