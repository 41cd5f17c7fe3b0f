"""The pages of `hifirag serve` in a real browser: Debian's chromium driven by Playwright (no browser download).

One data root holds the Tidewater site plus a hostile page (a <script>, event attributes and javascript: links
in its markup, and the same as visible text in its sections) and a finished offline batch run (variant
final_abstain) over a question it answers, one it abstains on and one answered from the hostile page. The
service runs over that data root with the OpenAI fake as its writer, slowed down so that a stream can be
seen mid-way. Screenshots of each view go to tests/artifacts/browser/ (ignored by git).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests import PROJECT_ROOT
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.prefect_server import prefect_server
from tests.support.service_process import hifirag_service
from tests.support.sitegen import BASE_URL, write_examples, write_site

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = PROJECT_ROOT / "tests" / "artifacts" / "browser"
BATCH = "browser-batch"
BANDWIDTH = "How do I limit the bandwidth Tidewater uses during a sync?"
HOSTILE_Q = "How do I run a hook script after a Tidewater sync finishes?"
HOSTILE_URL = BASE_URL + "hooks.html"
# Each would set window.__pwned (or change the title) if the browser ever ran it.
PAYLOADS = [
    "<script>window.__pwned = 'script'; document.title = 'pwned';</script>",
    "<img src=x onerror=\"window.__pwned = 'onerror'\">",
    "<a href=\"javascript:window.__pwned = 'link'\">open the hook docs</a>",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>",
]
HOSTILE_HTML = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Sync hooks &lt;img src=x onerror="window.__pwned='title'"&gt; — Tidewater 2.1 documentation</title>
<script>window.__pwned = 'head'; document.title = 'pwned';</script></head>
<body onload="window.__pwned = 'body'">
<main role="main"><div class="document"><h1>Sync hooks</h1>
<section id="after-sync"><h2>Running a hook script after a sync</h2>
<p>Tidewater runs the hook script named in the after_sync setting when a sync finishes.
The hook script receives the synced folder as its first argument. {' '.join(html.escape(p) for p in PAYLOADS)}
Hook output goes to the Tidewater log.</p>
{''.join(PAYLOADS)}
<p><a href="javascript:window.__pwned='anchor'" onclick="window.__pwned='click'">Hook script examples</a></p>
</section></div></main></body></html>"""
QUESTIONS = [
    {"iid": "T1", "query": BANDWIDTH, "reference": None},
    {"iid": "T2", "query": "What happens in Tidewater when the same file changed on both sides?", "reference": None},
    {"iid": "U1", "query": "How do you make paella?", "reference": None},
    {"iid": "H1", "query": HOSTILE_Q, "reference": None},
]
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
    e => window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sample || '')));
"""


def _why_not() -> str | None:
    if not CHROMIUM.exists():
        return ("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it "
                "when it runs as root)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs the playwright package (pip install -e '.[dev]'); it drives /usr/bin/chromium, no download"
    return None


if (_reason := _why_not()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def artifacts() -> Path:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, data root, the OpenAI fake writer) of a service over a root holding the batch run."""
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    base = tmp_path_factory.mktemp("browser")
    site = write_site(base / "site")
    (site / "hooks.html").write_text(HOSTILE_HTML, encoding="utf-8")
    root = base / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, site, BASE_URL)
    examples = write_examples(base / "examples.jsonl")
    questions = base / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    with prefect_server(base / "prefect-home") as api, OpenAIFake() as writer:
        env = {**os.environ, "PREFECT_API_URL": api}
        batch = subprocess.run([sys.executable, "-m", "flows.cli", "run", str(questions), "--variant", "final_abstain",
                                "--run-id", BATCH, "--set", f"generation.examples={examples}", "--data-root", str(root)],
                               cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert batch.returncode == 0, batch.stdout[-2000:] + batch.stderr[-2000:]
        # The live site goes away: every snapshot the pages show must come from the warehouse's own copy.
        shutil.rmtree(site)
        args = ["--set", f"generation.examples={examples}", "--set", "backends.writer_llm=openai",
                "--set", f"models.openai_base_url={writer.base_url}/v1", "--set", "models.writer=fake-writer"]
        with hifirag_service(root, *args, env={"PREFECT_API_URL": api, "OPENAI_API_KEY": writer.api_key}) as url:
            yield url, root, writer


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Watched:
    """A page with what must never happen on it recorded: dialogs, page errors, CSP violations."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1280, "height": 860})
        self.context.add_init_script(CSP_LISTENER)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def untouched(self) -> dict:
        """What a hostile script would have changed, as the page sees it now."""
        return self.page.evaluate("({pwned: window.__pwned === undefined ? null : String(window.__pwned), "
                                  "title: document.title, csp: window.__csp || []})")


@pytest.fixture
def watched(browser):
    w = Watched(browser)
    yield w
    w.context.close()


def _answer_url(base: str, run_id: str, qid: str, sentence: int | None = None) -> str:
    return f"{base}/runs/{quote(run_id, safe='')}/answers/{quote(qid, safe='')}" + (
        f"?s={sentence}#evidence" if sentence is not None else "")


def test_ask_streams_the_steps_then_the_answer(served, watched, artifacts):
    base, _, writer = served
    page = watched.page
    writer.kind_latency = {"draft": 4.0, "refine": 2.0}  # long enough to see the stream mid-way
    try:
        page.goto(base + "/")
        page.fill("#question", BANDWIDTH)
        page.click("#ask-button")
        # (wait_for_function would evaluate a string in the page, which the pages' CSP forbids)
        page.locator("#steps li").nth(2).wait_for(timeout=120_000)
        mid = page.eval_on_selector("#status", "e => e.dataset.state")
        page.screenshot(path=str(artifacts / "1-ask-mid-stream.png"), full_page=True)
        page.wait_for_selector("#status[data-state='complete']", timeout=240_000)
    finally:
        writer.kind_latency = 0.0
    assert mid == "streaming"  # the steps showed while the answer was still being written
    steps = page.locator("#steps li").all_inner_texts()
    assert steps[0].startswith("Question received") and len(steps) >= 4
    assert "--max-rate" in page.inner_text("#answer")
    assert page.locator("#answer a.cite").count() >= 1  # [k] links to its source
    assert page.locator("#answer li a[href^='https://docs.tidewater.example/']").count() >= 1  # the sources listed
    page.screenshot(path=str(artifacts / "2-ask-complete.png"), full_page=True)
    page.click("#inspect")
    page.wait_for_selector("#sentences a.sentence")
    assert page.inner_text("#query") == BANDWIDTH
    assert watched.dialogs == [] and watched.errors == [] and watched.untouched()["csp"] == []


def test_selecting_a_sentence_shows_its_section_and_the_stored_snapshot(served, watched, artifacts):
    base, _, _ = served
    page = watched.page
    page.goto(_answer_url(base, BATCH, "T2"))
    sentences = page.locator("#sentences a.sentence")
    assert sentences.count() == 2
    assert page.locator("#evidence mark").count() == 0  # nothing selected yet
    sentences.nth(1).click()
    page.wait_for_selector("#evidence mark#supporting")
    claim = sentences.nth(1).inner_text()
    assert "keep-both" in claim and page.locator("a.sentence.selected").count() == 1
    assert page.inner_text("#evidence .heading-path").endswith("Syncing folders › Conflict resolution")
    assert page.inner_text("#supporting") == "With the --keep-both option Tidewater keeps both versions and " \
                                            "renames the older one."
    assert "offline check" in page.inner_text("#evidence") and "1.00" in page.inner_text("#evidence .score")
    page.screenshot(path=str(artifacts / "3-answer-selected-sentence.png"), full_page=True)
    page.click("#evidence a.snapshot")
    page.wait_for_selector("#snapshot-text")
    text = page.inner_text("#snapshot-text")
    assert "<h2>Conflict resolution</h2>" in text  # the stored page's bytes, shown as text
    assert "https://docs.tidewater.example/sync.html" in page.inner_text(".snapshot-meta")
    page.screenshot(path=str(artifacts / "4-snapshot.png"), full_page=True)
    assert watched.dialogs == [] and watched.errors == [] and watched.untouched()["csp"] == []


def test_an_abstaining_answer_shows_why_and_the_closest_sources(served, watched, artifacts):
    base, _, _ = served
    page = watched.page
    page.goto(_answer_url(base, BATCH, "U1"))
    page.wait_for_selector("#abstained")
    assert page.inner_text("#answerability") == "not_found"
    assert page.locator("#signals tr").count() >= 2
    assert page.locator("#see-also li").count() >= 1 and page.locator("#see-also a.snapshot").count() >= 1
    page.screenshot(path=str(artifacts / "5-abstaining-answer.png"), full_page=True)


def test_a_run_shows_its_questions_funnel_and_stage_costs(served, watched, artifacts):
    base, _, _ = served
    page = watched.page
    page.goto(f"{base}/runs/{BATCH}")
    labels = page.locator("#funnel text.funnel-label").all_text_contents()
    assert labels == ["queries", "URLs found", "URLs kept", "pages fetched", "pages blocked", "sections kept",
                      "sources cited"]
    counts = [int(c) for c in page.locator("#funnel text.funnel-count").all_text_contents()]
    assert counts[0] > 0 and counts[1] >= counts[2] >= counts[3] > 0 and counts[-1] > 0
    assert page.locator("#questions tbody tr").count() == len(QUESTIONS)
    assert "abstained" in page.inner_text("#questions") and "not_found" in page.inner_text("#questions")
    assert {"query_plan", "fetch", "citations"} <= set(page.locator("#stages tbody td:first-child").all_inner_texts())
    page.screenshot(path=str(artifacts / "6-run-funnel.png"), full_page=True)


def test_a_hostile_page_executes_nothing_anywhere_it_is_shown(served, watched, artifacts):
    base, root, _ = served
    page = watched.page
    seen: dict[str, dict] = {}
    # the streamed answer (page titles in the steps, sentences in the answer)
    page.goto(base + "/")
    page.fill("#question", HOSTILE_Q)
    page.click("#ask-button")
    page.wait_for_selector("#status[data-state='complete']", timeout=240_000)
    shown = page.inner_text("#steps") + page.inner_text("#answer")
    assert "<img src=x onerror=" in shown, shown  # the page's title, in the URLs-kept step, as text
    seen["ask"] = watched.untouched()
    page.screenshot(path=str(artifacts / "7-hostile-ask.png"), full_page=True)
    # the batch answer from the hostile page, its cited sentence selected
    page.goto(_answer_url(base, BATCH, "H1"))
    hostile = page.locator("#sentences a.sentence", has_text="hook script")  # cites the hostile page's section
    assert hostile.count() >= 1, page.inner_text("#sentences")
    hostile.first.click()
    page.wait_for_selector("#evidence .section-text")
    assert "<script>window.__pwned = 'script'" in page.inner_text("#evidence .section-text")
    seen["answer"] = watched.untouched()
    page.screenshot(path=str(artifacts / "8-hostile-answer.png"), full_page=True)
    # its stored snapshot, shown as text, and the raw bytes (text/plain in a CSP sandbox)
    page.click("#evidence a.snapshot")
    page.wait_for_selector("#snapshot-text")
    assert "<body onload=" in page.inner_text("#snapshot-text")
    seen["snapshot"] = watched.untouched()
    page.screenshot(path=str(artifacts / "9-hostile-snapshot.png"), full_page=True)
    response = page.goto(page.url + "/raw")
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["content-security-policy"].startswith("sandbox")
    seen["raw"] = page.evaluate("({pwned: window.__pwned === undefined ? null : String(window.__pwned), "
                                "title: document.title, csp: []})")
    for view, state in seen.items():
        assert state["pwned"] is None, (view, state)
        assert state["title"] != "pwned", (view, state)
        assert state["csp"] == [], (view, state)  # escaped text: nothing even tried to run
    assert watched.dialogs == [] and watched.errors == []
    # and were escaping ever to fail, the policy would stop the markup: inline handlers and scripts are refused
    page.goto(_answer_url(base, BATCH, "H1"))
    page.evaluate("""() => {
        const box = document.createElement('div');
        box.innerHTML = `<img src="/favicon.ico?x" onerror="window.__pwned='injected'" onload="window.__pwned='injected'">`;
        document.body.appendChild(box);
        const s = document.createElement('script'); s.textContent = "window.__pwned = 'inline'";
        document.body.appendChild(s);
    }""")
    for _ in range(100):  # the violation reports are events: they come a moment later
        after = watched.untouched()
        if len(after["csp"]) >= 2:
            break
        page.wait_for_timeout(100)
    assert after["pwned"] is None and all("script-src" in v for v in after["csp"]), after


MARKDOWN_PAYLOADS = [
    "[open the docs](javascript:window.__pwned='md-link')",
    "[encoded](&#106;avascript:window.__pwned='md-entity')",
    "<javascript:window.__pwned='md-autolink'>",
    "<img src=x onerror=\"window.__pwned='md-img'\">",
    "<script>window.__pwned='md-script'</script>",
    "&lt;b onmouseover=alert(1)&gt;entities&lt;/b&gt;",
    "![pixel](https://evil.example/pixel.png)",
]


def test_markdown_borne_payloads_in_an_answer_run_nothing(served, watched, artifacts):
    from hifirag_core.records import AnswerRecord, QuestionRecord
    from hifirag_core.store.warehouse import Warehouse

    base, root, _ = served
    text = ("Hooks are configured in after_sync. " + " ".join(MARKDOWN_PAYLOADS)
            + "\n\n```sh\ntidewater sync ~/photos\necho done\n```\n\n> Hook output goes to the log.")
    w = Warehouse(root)
    w.write("questions", [QuestionRecord(query="hostile markdown?", reference=None, dataset="custom", line_no=1)],
            run_id="browser-markdown", stage="input", question_id="M1")
    w.write("answers", [AnswerRecord(text=text)], run_id="browser-markdown", stage="answer", question_id="M1")
    page = watched.page
    page.goto(_answer_url(base, "browser-markdown", "M1"))
    page.wait_for_selector(".answer-text pre code")
    shown = page.inner_text(".answer-text")
    assert "[open the docs](javascript:" in shown and "<img src=x onerror=" in shown and "<b onmouseover" in shown
    assert page.inner_text(".answer-text pre code") == "tidewater sync ~/photos\necho done\n"  # its lines kept
    assert page.locator(".answer-text img, .answer-text script, .answer-text b").count() == 0
    hrefs = page.eval_on_selector_all(".answer-text a", "links => links.map(a => a.getAttribute('href'))")
    assert hrefs == ["https://evil.example/pixel.png"], hrefs  # the image became a link: nothing loaded
    page.screenshot(path=str(artifacts / "10-hostile-markdown.png"), full_page=True)
    state = watched.untouched()
    assert state["pwned"] is None and state["csp"] == [] and watched.dialogs == [] and watched.errors == [], state


def test_the_service_listens_on_localhost_by_default_and_its_pages_only_read(served):
    from typer.main import get_command

    from flows.cli import app

    serve = get_command(app).commands["serve"]
    assert next(p for p in serve.params if p.name == "host").default == "127.0.0.1"
    base, _, _ = served
    for path in ("/", f"/runs/{BATCH}", f"/runs/{BATCH}/answers/T1", "/snapshots/" + "0" * 64):
        for method in ("POST", "PUT", "DELETE"):
            assert httpx.request(method, base + path, timeout=10).status_code == 405, (method, path)
    assert httpx.get(f"{base}/snapshots/{'0' * 64}", timeout=10).status_code == 404  # only what a run fetched
    assert httpx.get(f"{base}/snapshots/..%2F..%2Fetc%2Fpasswd", timeout=10).status_code == 404


CODE_ANSWER = ("Limit the rate with the --max-rate option of tidewater sync.\n\n"
               "```sh\ntidewater sync --max-rate 2M ~/photos\ntidewater status\n```\n\n"
               "> The limit is in bytes per second.")


def test_the_inspector_selects_sentences_of_a_rendered_answer_whose_code_keeps_its_lines(served, watched, artifacts):
    from hifirag_core.records import AnswerRecord, AnswerSentenceRecord, QuestionRecord
    from hifirag_core.store.warehouse import Warehouse
    from hifirag_core.text import split_sentences

    base, root, _ = served
    url = BASE_URL + "sync.html"
    ledger = split_sentences(CODE_ANSWER)  # as the citation stage reads the answer: the code block one sentence
    assert any(s.startswith("```sh tidewater sync") for s in ledger), ledger
    w = Warehouse(root)
    w.write("questions", [QuestionRecord(query="How do I limit the rate?", reference=None, dataset="custom",
                                         line_no=1)], run_id="browser-code", stage="input", question_id="C1")
    w.write("answers", [AnswerRecord(text=CODE_ANSWER, cited_urls=[url])], run_id="browser-code", stage="answer",
            question_id="C1")
    w.write("answer_sentences", [AnswerSentenceRecord(sentence_index=i, sentence=s, urls=[url], source_indices=[1],
                                                      method="offline+support", support=0.9)
                                 for i, s in enumerate(ledger)], run_id="browser-code", stage="citations",
            question_id="C1")
    page = watched.page
    page.goto(_answer_url(base, "browser-code", "C1"))
    sentences = page.locator("#sentences a.sentence")
    assert sentences.count() == len(ledger) and page.locator("#missing-sentences").count() == 0
    code = page.locator("#sentences pre a.sentence.code")
    assert page.inner_text("#sentences pre code") == "tidewater sync --max-rate 2M ~/photos\ntidewater status\n"
    assert page.locator("#sentences blockquote a.sentence").count() == 1  # the quote's sentence, inside the quote
    code.click()
    page.wait_for_selector("#evidence .claim")
    index = ledger.index(next(s for s in ledger if s.startswith("```")))
    assert page.inner_text("#evidence h2") == f"Why: sentence {index + 1}"
    assert page.locator("#sentences a.sentence.selected").get_attribute("id") == f"sentence-{index}"
    assert page.locator("#sentences pre a.sentence.code.selected").count() == 1
    assert page.inner_text("#sentences pre code") == "tidewater sync --max-rate 2M ~/photos\ntidewater status\n"
    # the claim beside its evidence is the block as written, not the ledger's one-line text of it
    assert page.inner_text("#evidence .claim pre code") == "tidewater sync --max-rate 2M ~/photos\ntidewater status\n"
    assert url in page.inner_text("#evidence")
    page.screenshot(path=str(artifacts / "11-inspector-code.png"), full_page=True)
    sentences.first.click()  # another sentence: the selection moves to it
    page.wait_for_url("**?s=0#evidence")
    assert page.locator("#sentences a.sentence.selected").get_attribute("id") == "sentence-0"
    assert watched.dialogs == [] and watched.errors == [] and watched.untouched()["csp"] == []


# What the form is given, and the same values as a JSON body of /run: the page must show the API's own words.
FORM_MISTAKES = [
    ({"depth": "99"}, {"depth": 99}),
    ({"depth": "-1"}, {"depth": -1}),
    ({"depth": "two"}, {"depth": "two"}),
    ({"after": "2024-05-01", "before": "2024-01-01"}, {"after": "2024-05-01", "before": "2024-01-01"}),
    ({"after": "2024-02-30"}, {"after": "2024-02-30"}),
    ({"after": "01/05/2024"}, {"after": "01/05/2024"}),
    ({"sites": "https://docs.tidewater.example/sync.html"}, {"sites": "https://docs.tidewater.example/sync.html"}),
    ({"sites": "docs.tidewater.example", "exclude_sites": "docs.tidewater.example"},
     {"sites": "docs.tidewater.example", "exclude_sites": "docs.tidewater.example"}),
    ({"language": "xx"}, {"language": "xx"}),
    ({"question": ""}, {"question": ""}),
    ({"question": "why? " * 1000}, {"question": "why? " * 1000}),  # longer than the service takes: said, not cut
]


def _runs_cell(page, run_id: str, column: str) -> int:
    headers = page.locator("#runs thead th").all_inner_texts()
    row = page.locator("#runs tbody tr", has=page.locator(f"td a:text-is('{run_id}')"))
    if row.count() == 0:
        return 0
    return int(row.locator("td").nth(headers.index(column)).inner_text() or 0)


def test_the_ask_form_steers_and_says_what_the_api_says(served, watched, artifacts):
    base, _, _ = served
    page = watched.page
    page.goto(base + "/")
    for typed, body in FORM_MISTAKES:
        page.goto(base + "/")
        page.fill("#question", typed.get("question", BANDWIDTH))
        for name, value in typed.items():
            if name != "question":
                page.fill(f"#{name}", value)
        page.click("#ask-button")
        page.wait_for_selector("#status[data-state='error']", timeout=30_000)
        api = httpx.post(base + "/run", json={"question": BANDWIDTH, **body}, timeout=30)
        assert api.status_code == 422, (typed, api.text)
        assert page.locator("#problems li").all_inner_texts() == api.json()["detail"], typed
        assert page.locator("#steps li").count() == 0  # nothing was asked
    page.screenshot(path=str(artifacts / "12-ask-form-refused.png"), full_page=True)

    health = httpx.get(base + "/health", timeout=10).json()
    page.goto(base + "/")
    before = _runs_cell(page, health["run_id"], "answered")
    page.fill("#question", BANDWIDTH)
    page.fill("#sites", "docs.tidewater.example")
    page.fill("#exclude_sites", "pinterest.com")
    page.select_option("#length", "short")
    page.fill("#depth", "1")
    page.click("#ask-button")
    page.wait_for_selector("#status[data-state='complete']", timeout=240_000)
    assert page.locator("#problems li").count() == 0
    # the Runs table, without a reload, counts the answer that just landed
    assert _runs_cell(page, health["run_id"], "answered") == before + 1
    page.screenshot(path=str(artifacts / "13-ask-steered.png"), full_page=True)
    page.click("#inspect")
    page.wait_for_selector("#steering")
    steered = page.inner_text("#steering")
    for shown in ("sites = docs.tidewater.example", "exclude_sites = pinterest.com", "length = short", "depth = 1"):
        assert shown in steered, steered
    page.click(".crumbs a")  # the run page: the question's row says what steered it
    page.wait_for_selector("#questions")
    row = page.locator("#questions tbody tr").last
    assert "sites = docs.tidewater.example" in row.inner_text() and "depth = 1" in row.inner_text()
    assert watched.dialogs == [] and watched.errors == [] and watched.untouched()["csp"] == []
