"""Several search providers at once, through the fakes: SearXNG, DuckDuckGo and a folder of files (or
Programmable Search, Scrapingdog and the folder).

Answers FAQ questions (the demo's sample; the FAQ pages left out of the web) with ``search.providers`` set to
``--providers`` (``searxng,duckduckgo,folder`` by default). The web providers' fakes serve the documentation
corpus: SearXNG and Programmable Search rank the question's words by best passage, DuckDuckGo and Scrapingdog
its keywords only, so their lists differ. The fakes listen on 127.0.0.1; ddgs, which has DuckDuckGo's address
built in, reaches DuckDuckGo's fake through its proxy setting (``backends.ddgs_proxy``, the fake's CA in
``backends.ddgs_ca_file``). The folder holds our own notes (Markdown, text, a PDF) and a few HTML pages. It
prints which providers the cited pages came from and the fused ranks in ``search_results`` (the SQL with its
output). ``--fail NAME`` makes that web provider fail mid-run: its first search is answered, every later one
meets a 429 and then a 500 on the retry, turn by turn.

    .venv/bin/python bench/demo_providers.py --root /tmp/providers-demo [--providers google,scrapingdog,folder]
        [--fail searxng] [--questions 20]
    .venv/bin/python bench/demo_providers.py --root /tmp/providers-demo --providers fineweb --questions 5 --faq-pages

``fineweb`` serves MMU-RAGent's FineWeb search from its fake: each found page as a FineWeb document (its text
without markup), read by the fetch stage without fetching (alone, with ``backends.fetch=http``: a URL without a
document would go to the web, which is not there); the run then shows its pages by where their text came from, and the
funnel.

Offline LLM roles (the default). Web pages are read from the corpus (``backends.fetch=local``), or through
Scrapingdog's scrape API when Scrapingdog is listed. Each run uses its own data root below ``--root``
(``run-<providers>[-fail-<name>]``; the corpus is built once in ``--root/base`` and copied), so no cache is
shared.
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

from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS, docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.text import question_keywords  # noqa: E402

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
    from tests.support.pdfgen import pdf_document

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


def show(w, title: str, sql: str, run_id: str) -> None:
    result = w.query(sql, [run_id])
    print(f"\n-- {title}\n{sql.replace('$1', repr(run_id))};")
    print(" | ".join(result.columns))
    for row in result.rows:
        print(" | ".join("" if v is None else str(v) for v in row))


WEB_PROVIDERS = ("searxng", "duckduckgo", "google", "scrapingdog", "fineweb")


def document_text(html: bytes | None) -> str | None:
    """A page as FineWeb stores one: its text without markup (headings as lines of their own), paragraphs apart."""
    if html is None:
        return None
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css("script, style, nav, header, footer"):
        node.decompose()
    root = tree.css_first("main") or tree.css_first("[role=main]") or tree.body
    blocks = [" ".join(n.text(separator=" ").split()) for n in root.css("h1, h2, h3, h4, p, li, pre, dt, dd")]
    return "\n\n".join(b for b in blocks if b) if root is not None else None


def start_fakes(names: list[str], web, page, fail: str | None) -> tuple[dict, list[str]]:
    """The fakes of the web providers in ``names`` (``fail`` fails after its first search), with the config
    overrides and secrets that point the run at them."""
    from tests.support.fakes.gemini import google_error
    from tests.support.fakes.search_providers import DuckDuckGoFake, MmuSearchFake, SearxngFake
    from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
    from tests.support.fakes.server import Response

    by_question = lambda q, n: web.search(q, num=n)  # noqa: E731
    by_keywords = lambda q, n: web.search(" ".join(question_keywords(q)) or q, num=n)  # noqa: E731
    fakes: dict = {}
    overrides = ["backends.fetch=local"]
    if "searxng" in names:
        fakes["searxng"] = SearxngFake(search=by_question).start()
        overrides.append(f"backends.searxng_url={fakes['searxng'].base_url}")
        if fail == "searxng":
            fakes["searxng"].fail_after_first("/search", too_many=Response(429, "Too Many Requests"),
                                              error=Response(500, "Internal Server Error"))
    if "duckduckgo" in names:  # ddgs reaches it through its proxy setting, verifying the fake's certificate
        fakes["duckduckgo"] = DuckDuckGoFake(search=by_keywords).start()
        overrides += [f"backends.ddgs_proxy={fakes['duckduckgo'].proxy_url}",
                      f"backends.ddgs_ca_file={fakes['duckduckgo'].ca_file}"]
        if fail == "duckduckgo":
            fakes["duckduckgo"].fail_after_first("/html/", too_many=Response(429, "Too Many Requests"),
                                                 error=Response(500, "Internal Server Error"))
    if "google" in names:
        fakes["google"] = GoogleSearchFake(search=by_question).start()
        os.environ.update({"GOOGLE_CSE_KEY": fakes["google"].api_key, "GOOGLE_CSE_ID": fakes["google"].engine_id})
        overrides.append(f"backends.google_search_base_url={fakes['google'].base_url}")
        if fail == "google":
            fakes["google"].fail_after_first(
                "/customsearch", too_many=Response(429, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded")),
                error=Response(500, google_error(500, "INTERNAL", "Backend Error")))
    if "fineweb" in names:  # its documents carry their text; any URL that came without would go to the web
        fakes["fineweb"] = MmuSearchFake(search=by_question, text=lambda url: document_text(page(url))).start()
        overrides.append(f"backends.base_urls.fineweb={fakes['fineweb'].base_url}")
        if names == ["fineweb"]:  # alone: nothing is read from the corpus, and the web is not there
            overrides.append("backends.fetch=http")
    if "scrapingdog" in names:
        fakes["scrapingdog"] = ScrapingdogFake(search=by_keywords, page=page).start()
        os.environ["SCRAPINGDOG_API_KEY"] = fakes["scrapingdog"].api_key
        overrides += ["backends.fetch=scrapingdog", f"backends.scrapingdog_base_url={fakes['scrapingdog'].base_url}"]
    return fakes, overrides


def calls(fakes: dict) -> str:
    """How often each fake was asked."""
    counts = {name: fake.count() for name, fake in fakes.items()}
    if "scrapingdog" in fakes:
        counts["scrapingdog scrape"] = fakes["scrapingdog"].count(lambda r: r.path.startswith("/scrape"))
        counts["scrapingdog"] -= counts["scrapingdog scrape"]
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--providers", default="searxng,duckduckgo,folder", help="search.providers of the run")
    parser.add_argument("--fail", choices=("searxng", "duckduckgo", "google"),  # the fakes that fail on request
                        help="this provider fails after its first search (a 429, then a 500 on each retry)")
    parser.add_argument("--set", action="append", default=[], help="more config overrides, key=value")
    parser.add_argument("--faq-pages", action="store_true",
                        help="keep the FAQ pages on the web (left out by default: their text is the gold answer), so "
                             "the funnel can follow each question's gold page through the stages")
    args = parser.parse_args()
    names = [p.strip() for p in args.providers.split(",") if p.strip()]
    if args.fail and args.fail not in names:
        parser.error(f"--fail {args.fail}: not among --providers {args.providers}")
    base = base_root(args.root)
    run_root = args.root / ("run-" + "+".join(names) + (f"-fail-{args.fail}" if args.fail else ""))
    if run_root.exists():
        shutil.rmtree(run_root)
    shutil.copytree(base, run_root)
    folder = write_folder(args.root / "myfiles")
    os.environ["PREFECT_HOME"] = str(run_root / "prefect-home")

    from flows.environment import configure, stage_cache_at
    from hifirag_core.backends.offline import LocalSearch
    from hifirag_core.corpus.store import open_corpus
    from hifirag_core.store.warehouse import Warehouse

    configure(run_root)
    corpus = open_corpus(run_root, "docs")
    left_out = () if args.faq_pages else FAQ_PAGE_PATTERNS
    web = LocalSearch(corpus.index(left_out))

    def page(url: str) -> bytes | None:
        found = corpus.page(url)
        return corpus.blobs.get(found.sha256) if found is not None and url in web.index else None

    fakes, backends = start_fakes(names, web, page, args.fail)
    overrides = [f"corpus.exclude={list(left_out)!r}".replace("'", '"'),
                 f"search.providers={','.join(names)}", f"search.folder={folder}", *backends,
                 "limits.retry_base_delay_s=0.2", *args.set]
    from flows.answer import answer_questions

    began = time.perf_counter()
    with stage_cache_at(run_root):
        summary = answer_questions(questions=str(FAQ), sample=args.questions, overrides=overrides,
                                   data_root=str(run_root))
    print(f"\nrun {summary['run_id']}: {summary['n_answered']} of {summary['n_questions']} answered in "
          f"{time.perf_counter() - began:.0f}s; calls: {calls(fakes)}")
    w, run_id = Warehouse(run_root), summary["run_id"]
    show(w, "cited pages by the providers that found them",
         "SELECT s.found_by, count(DISTINCT c.url) AS cited_pages, count(DISTINCT c.question_id) AS questions "
         "FROM citations c JOIN (SELECT DISTINCT question_id, url, array_to_string(list_sort(coalesce(providers, [provider])), '+') "
         "AS found_by FROM search_results WHERE run_id = $1 AND status = 'ok') s "
         "ON s.question_id = c.question_id AND s.url = c.url WHERE c.run_id = $1 AND c.cited GROUP BY 1 ORDER BY 1", run_id)
    show(w, "cited pages per provider (a page found by several counts for each)",
         "SELECT p AS provider, count(DISTINCT c.url) AS cited_pages, count(DISTINCT c.question_id) AS questions "
         "FROM citations c JOIN (SELECT DISTINCT question_id, url, unnest(coalesce(providers, [provider])) AS p FROM search_results "
         "WHERE run_id = $1 AND status = 'ok') s ON s.question_id = c.question_id AND s.url = c.url "
         "WHERE c.run_id = $1 AND c.cited GROUP BY 1 ORDER BY 1", run_id)
    show(w, "fused ranks: the first question's first query, its first 8 rows",
         "SELECT rank, round(fusion_score, 4) AS score, providers, provider_ranks, url FROM search_results "
         "WHERE run_id = $1 AND status = 'ok' AND query_index = 0 AND question_id = "
         "(SELECT min(question_id) FROM search_results WHERE run_id = $1) ORDER BY rank LIMIT 8", run_id)
    show(w, "rows per provider and status",
         "SELECT p AS provider, status, count(*) AS n_rows FROM (SELECT unnest(coalesce(providers, [provider])) AS p, status "
         "FROM search_results WHERE run_id = $1) GROUP BY ALL ORDER BY 1, 2", run_id)
    show(w, "failure rows",
         "SELECT provider, status, error, count(*) AS n_rows FROM search_results WHERE run_id = $1 "
         "AND status <> 'ok' GROUP BY ALL ORDER BY 1, 2, 3", run_id)
    show(w, "answers", "SELECT status, count(*) AS n FROM answers WHERE run_id = $1 GROUP BY 1", run_id)
    show(w, "search calls per provider",
         "SELECT provider, status, count(*) AS calls, sum(attempts) AS attempts, sum(rate_limited) AS rate_limited, "
         "round(sum(backoff_s), 2) AS backoff_s FROM search_calls WHERE run_id = $1 GROUP BY ALL ORDER BY 1, 2",
         run_id)
    if "fineweb" in names:
        from hifirag_core.store.queries import funnel_summary

        show(w, "pages by where their text came from",
             "SELECT fetcher, kind, text_source, status, count(*) AS pages FROM pages WHERE run_id = $1 "
             "GROUP BY ALL ORDER BY ALL", run_id)
        funnel = funnel_summary(w, [run_id])
        print("\n-- the funnel (hifirag funnel)\n" + "\n".join(f"{c}: {v}" for c, v in zip(funnel.columns,
                                                                                          funnel.rows[0], strict=True)))
    for fake in fakes.values():
        if hasattr(fake, "stop"):
            fake.stop()


if __name__ == "__main__":
    main()
