"""The fresh test-set builder end to end: the real google-genai client against the loopback Gemini fake
(grounded replies with groundingMetadata), the direct fetcher against a loopback site whose pages carry
their dates in different places, every drop rule, MMU-RAGent output, byte-identical rebuilds; the
offline stand-in; the flow, the CLI and an evaluation of a built set; a live build with a real key."""

from __future__ import annotations

import json
import os
from datetime import date, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from hifirag_core.corpus.build import build_from_folder
from hifirag_core.corpus.store import corpus_at
from hifirag_core.questions import load_questions
from hifirag_core.testset.build import build_fresh_set
from hifirag_core.testset.pair_sources import STANDIN_LABEL
from hifirag_core.testset.testset_output import provenance_path, validate_mmu_jsonl
from hifirag_core.testset.testset_plan import open_builder, plan_fresh_set, save
from tests.support.fakes.gemini import FreshFact, GeminiFake
from tests.support.fakes.server import Response
from tests.support.fakes.site import SiteFake

runner = CliRunner()
AFTER = "2025-02-01"
TODAY = "2026-01-15"


def _page(title: str, body: str, head: str = "") -> Response:
    html = (f"<!doctype html><html><head><title>{title}</title>{head}</head><body><nav>Home | News | About</nav>"
            f"<main><h1>{title}</h1>{body}</main><footer>Tidewater Labs</footer></body></html>")
    return Response(200, html, content_type="text/html; charset=utf-8")


PARAGRAPH = "<p>Tidewater is a file-sync tool; this page describes one of its releases in some detail.</p>"
PAGES = {
    "/2025/03/10/tidewater-3.html": _page("Tidewater 3.0 released", PARAGRAPH,
                                          '<meta property="article:published_time" content="2025-03-10T09:00:00Z">'),
    "/news/protocol.html": _page("Tidewater 3.1 moves to QUIC", PARAGRAPH,
                                 '<script type="application/ld+json">{"@type": "NewsArticle", '
                                 '"datePublished": "2025-06-01", "dateModified": "2025-06-02"}</script>'),
    "/news/old.html": _page("Tidewater 2.4 fixes", PARAGRAPH, '<meta name="date" content="2024-11-20">'),
    "/news/dashboard.html": _page("The Tidewater dashboard", "<p><em>April 2, 2025</em></p>" + PARAGRAPH),
}
UPDATED = _page("Tidewater roadmap", PARAGRAPH)
UPDATED.headers["Last-Modified"] = "Tue, 01 Jul 2025 08:00:00 GMT"
PAGES["/news/updated.html"] = UPDATED

A = ("When did Tidewater 3.0 come out?",
     "Tidewater 3.0 was released on March 10, 2025, with parallel checksums that make syncs twice as fast.")
F = ("When was Tidewater 3.0 released?",  # a paraphrase of A
     "Tidewater 3.0 came out on March 10, 2025; its parallel checksums make syncing twice as fast.")
G = ("Who founded Tidewater Labs?", "Tidewater Labs was founded by Mira Okafor in 2019 in Lisbon.")


def _facts(base: str) -> list[FreshFact]:
    return [
        FreshFact(*A, (base + "/2025/03/10/tidewater-3.html",)),
        FreshFact("What did Tidewater 2.4 fix?", "Tidewater 2.4 fixed a crash when a folder was renamed during a sync.",
                  (base + "/news/old.html",)),
        FreshFact("What is on the Tidewater roadmap?", "The roadmap lists end-to-end encryption for shared folders.",
                  (base + "/news/updated.html",)),
        FreshFact("How many people use Tidewater?", "About two million people use Tidewater every month."),  # no source
        FreshFact(*F, (base + "/2025/03/10/tidewater-3.html",)),
        FreshFact(*G, (base + "/news/protocol.html",)),
        FreshFact("Which protocol does Tidewater 3.1 use?",
                  "Tidewater 3.1 moved its transfers to QUIC streams, which resume after a dropped connection.",
                  (base + "/news/protocol.html", base + "/news/old.html")),
        FreshFact("What did the Tidewater 3.2 beta add?", "The 3.2 beta added selective sync for large folders.",
                  (base + "/news/gone.html",)),  # the page is gone: undated
        FreshFact("What does the Tidewater dashboard show?",
                  "The dashboard shows each folder's last sync, its size and any conflicts waiting for a decision.",
                  (base + "/news/dashboard.html",)),
    ]


@pytest.fixture
def fresh_web():
    """A loopback site with dated pages and a Gemini fake whose search finds facts on it."""
    with SiteFake(PAGES) as site, GeminiFake(fresh_web=_facts(site.base_url), knowledge={G[0]: G[1]}) as gemini:
        yield site, gemini


@pytest.fixture
def style_file(tmp_path) -> Path:
    path = tmp_path / "style.jsonl"
    rows = [("How do I repot a cactus?", "Wear gloves, loosen the soil, lift the cactus with folded paper and set it "
             "in a pot one size larger with dry cactus mix; wait a week before watering."),
            ("What is a solar eclipse?", "A solar eclipse happens when the Moon passes between the Sun and Earth and "
             "blocks all or part of the Sun's light for a few minutes."),
            ("Why do cats purr?", "Cats purr when content and also when stressed or hurt; the vibration may soothe "
             "them and help heal bones and tissue.")]
    path.write_text("".join(json.dumps({"query": q, "reference": r, "iid": f"S_{i}"}) + "\n"
                            for i, (q, r) in enumerate(rows)))
    return path


def _build(gemini: GeminiFake, out: Path, style: Path, data_root: Path, monkeypatch, settings: tuple = ()):
    monkeypatch.setenv("GEMINI_API_KEY", gemini.api_key)
    overrides = [f"models.gemini_base_url={gemini.base_url}", "fetch.allow_loopback=true",
                 "fetch.politeness_delay_s=0", "limits.retries=0"]
    plan = plan_fresh_set({"after": AFTER, "n": 3, "style": f"{style}:3", "seed": 0, "source": "gemini"}, out=out,
                          data_root=data_root, overrides=overrides,
                          settings=[f"today={TODAY}", "pairs_per_call=9", "oversample=3", *settings])
    result = build_fresh_set(open_builder(plan))
    save(plan, result)
    return result, json.loads(provenance_path(out).read_text())


def test_grounded_build_keeps_fresh_pairs_and_drops_each_rule_with_its_reason(fresh_web, style_file, tmp_path,
                                                                             monkeypatch):
    _, gemini = fresh_web
    out = tmp_path / "a" / "fresh.jsonl"
    result, prov = _build(gemini, out, style_file, tmp_path / "data", monkeypatch)

    # the real client sent the search tool and the seed
    body = next(b for b in gemini.bodies if "tools" in b)
    assert body["tools"] == [{"googleSearch": {}}] and body["generationConfig"]["seed"] == 0
    assert gemini.kinds["testset_fresh"] == 1 and gemini.kinds["baseline_q"] == 4

    assert prov["counts"] | {} == {"calls": 1, "proposed": 9, "not_fresh": 4, "near_duplicate": 1,
                                   "answered_without_search": 1, "kept": 3, "not_checked": 0,
                                   "baseline_unchecked": 0, "reply_problems": 0}
    reasons = {d["query"]: (d["rule"], d["reason"]) for d in prov["dropped"]}
    assert reasons["What did Tidewater 2.4 fix?"][0] == "not_fresh"
    assert "published 2024-11-20 (meta:date)" in reasons["What did Tidewater 2.4 fix?"][1]
    assert "only a modification date, 2025-07-01 (http:last-modified)" in reasons["What is on the Tidewater roadmap?"][1]
    assert reasons["How many people use Tidewater?"] == ("not_fresh", "no grounding source supports this pair")
    assert "not dated (fetch not_found)" in reasons["What did the Tidewater 3.2 beta add?"][1]
    assert reasons[F[0]][0] == "near_duplicate" and "candidate c01-01" in reasons[F[0]][1]
    assert reasons[G[0]][0] == "answered_without_search" and "ROUGE-L F1 1.000 > 0.35" in reasons[G[0]][1]

    # each kept pair: its sources, followed through the grounding redirect, and their dates
    kept = {p["query"]: p for p in prov["pairs"]}
    assert list(kept) == [A[0], "Which protocol does Tidewater 3.1 use?", "What does the Tidewater dashboard show?"]
    first = kept[A[0]]["sources"][0]
    assert "/grounding-api-redirect/" in first["uri"] and first["url"].endswith("/2025/03/10/tidewater-3.html")
    assert first["date"] == {"date": "2025-03-10", "kind": "published", "source": "meta:article:published_time"}
    protocol = kept["Which protocol does Tidewater 3.1 use?"]["sources"]
    assert [s["date"]["date"] for s in protocol] == ["2025-06-01", "2024-11-20"]  # one fresh source is enough
    assert kept["What does the Tidewater dashboard show?"]["sources"][0]["date"]["source"] == "text:byline"
    assert all(p["baseline"]["status"] == "ok" and p["baseline"]["rouge_l_f1"] < 0.35 for p in kept.values())
    assert prov["label"] is None and prov["generator"]["model"] == "gemini-2.5-pro"
    assert prov["batches"][0]["searches"]  # webSearchQueries
    assert [c["stage"] for c in prov["calls"]] == ["testset_generate"] + ["testset_baseline"] * 4
    assert all(c["status"] == "ok" and c["tokens_in"] and c["cost_usd"] is not None for c in prov["calls"])

    # the output is MMU-RAGent JSONL
    assert validate_mmu_jsonl(out) == []
    questions = load_questions(out)
    assert questions.format == "mmu_ragent" and [q.id for q in questions.questions] == ["F_0001", "F_0002", "F_0003"]
    assert [list(json.loads(line)) for line in out.read_text().splitlines()] == [["query", "reference", "iid"]] * 3


def test_same_seed_and_replies_rebuild_byte_identical_files(fresh_web, style_file, tmp_path, monkeypatch):
    _, gemini = fresh_web
    first, second = tmp_path / "one" / "fresh.jsonl", tmp_path / "two" / "fresh.jsonl"
    _build(gemini, first, style_file, tmp_path / "data", monkeypatch)
    _build(gemini, second, style_file, tmp_path / "data", monkeypatch)
    assert first.read_bytes() == second.read_bytes()
    assert provenance_path(first).read_bytes() == provenance_path(second).read_bytes()
    third = tmp_path / "three" / "fresh.jsonl"
    _build(gemini, third, style_file, tmp_path / "data", monkeypatch, settings=("seed=1",))
    assert provenance_path(third).read_bytes() != provenance_path(first).read_bytes()


def test_any_date_evidence_lets_a_modification_date_count(fresh_web, style_file, tmp_path, monkeypatch):
    _, gemini = fresh_web
    _, prov = _build(gemini, tmp_path / "fresh.jsonl", style_file, tmp_path / "data", monkeypatch,
                     settings=("date_evidence=any",))
    kept = [p["query"] for p in prov["pairs"]]
    assert kept == [A[0], "What is on the Tidewater roadmap?", "Which protocol does Tidewater 3.1 use?"]
    assert prov["counts"]["not_checked"] == 1  # enough pairs were kept before the last one was asked about


def test_a_reply_without_grounding_keeps_nothing_and_says_why(style_file, tmp_path, monkeypatch):
    with GeminiFake(fresh_web=[FreshFact(*A, ("https://news.example/a",))]) as gemini:
        gemini.inject(GeminiFake.text_reply('{"query": "Q?", "reference": "An answer."}'))  # no groundingMetadata
        result, prov = _build(gemini, tmp_path / "fresh.jsonl", style_file, tmp_path / "data", monkeypatch,
                              settings=("max_calls=1",))
    assert result.status == "short" and prov["counts"]["kept"] == 0
    assert prov["dropped"][0]["reason"] == "the reply carried no grounding metadata"
    assert (tmp_path / "fresh.jsonl").read_text() == ""


# --- the offline stand-in ------------------------------------------------------------------------


def _release(version: str, released: str | None, fixes: list[str]) -> str:
    dated = f"<p><strong>Release date: </strong>{released}</p>" if released else ""
    items = "".join(f"<li><p>{fix}</p></li>" for fix in fixes)
    return (f"<html><head><title>Release {version}</title></head><body><div class='navheader'>Prev Next</div>"
            f"<div class='sect1'><h2>Release {version}</h2>{dated}<p>This release contains a variety of fixes "
            f"from the previous one.</p><h3>Migration to Version {version}</h3><p>A dump/restore is not required "
            f"for those running this series; see the previous section when upgrading from an older release.</p>"
            f"<h3>Changes</h3><ul>{items}</ul></div></body></html>")


@pytest.fixture
def standin_root(tmp_path) -> Path:
    """A data root whose ``docs`` corpus holds release notes: two after the cutoff, one before, one undated."""
    site = tmp_path / "releases"
    site.mkdir()
    (site / "release-5-2.html").write_text(_release("5.2", "2025-04-10", [
        "Fix a crash of the replication worker when a slot name contained quotes, which could stop replication "
        "until the server was restarted.", "Make the planner use incremental sorts for window functions."]))
    (site / "release-5-3.html").write_text(_release("5.3", "2025-09-18", [
        "Prevent a buffer overrun in the currency formatting of locales whose symbols are longer than eight bytes.",
        "Allow vacuum to skip pages that another session has locked instead of waiting for them."]))
    (site / "release-5-1.html").write_text(_release("5.1", "2024-12-05", [
        "Fix the handling of time zones in logs written during a daylight-saving change, which were off by an hour."]))
    (site / "overview.html").write_text(_release("overview", None, [
        "Every release is supported for five years after its first minor release comes out."]))
    root = tmp_path / "data"
    target = corpus_at(root, "docs")
    build_from_folder(target.root, target.blobs, site, "https://db.example/docs/")
    return root


def test_offline_standin_draws_only_from_pages_published_after_the_cutoff(standin_root, style_file, tmp_path):
    out = tmp_path / "standin.jsonl"
    plan = plan_fresh_set({"after": AFTER, "n": 20, "style": f"{style_file}:3", "source": "offline"}, out=out,
                          data_root=standin_root, settings=[f"today={TODAY}"])
    result = build_fresh_set(open_builder(plan))
    save(plan, result)
    prov = json.loads(provenance_path(out).read_text())
    assert prov["label"] == STANDIN_LABEL and prov["generator"]["source"] == "offline"
    assert result.status == "short"  # six sections were all the corpus had: it says so instead of padding
    urls = {s["url"] for p in prov["pairs"] + prov["dropped"] for s in p["sources"]}
    assert urls == {"https://db.example/docs/release-5-2.html", "https://db.example/docs/release-5-3.html"}
    queries = [p["query"] for p in prov["pairs"]]
    assert "What does Release 5.3 say about Changes?" in queries
    # the two migration notes say the same thing, and so do the two releases' opening lines: one of each goes
    assert prov["counts"] | {} == {"calls": 2, "proposed": 6, "not_fresh": 0, "near_duplicate": 2,
                                   "answered_without_search": 0, "kept": 4, "not_checked": 0,
                                   "baseline_unchecked": 4, "reply_problems": 0}
    dropped = sorted(d["query"].split(" say about ")[-1].split(" ")[0] for d in prov["dropped"])
    assert dropped == ["Migration", "What"] and all(d["rule"] == "near_duplicate" for d in prov["dropped"])
    # the offline writer has no knowledge of its own: the baseline check is recorded as not run
    assert all(p["baseline"]["status"].startswith("no_evidence") for p in prov["pairs"])
    assert validate_mmu_jsonl(out) == []


# --- the flow, the CLI, and evaluating a built set ----------------------------------------------


@pytest.mark.usefixtures("prefect_harness")
def test_flow_and_cli_build_the_same_standin_and_eval_scores_it_with_runs_named_after_it(
        standin_root, style_file, tmp_path, monkeypatch):
    from flows.environment import stage_cache_at
    from flows.testset import build_fresh_testset
    from hifirag_core.store.warehouse import Warehouse

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    by_flow = tmp_path / "flow" / "fresh-standin.jsonl"
    with stage_cache_at(standin_root):
        summary = build_fresh_testset(after=AFTER, n=3, out=str(by_flow), style=f"{style_file}:3",
                                      settings=[f"today={TODAY}"], data_root=str(standin_root))
    assert summary["status"] == "complete" and summary["label"] == STANDIN_LABEL
    assert summary["counts"]["kept"] == 3 and summary["run_id"].startswith("testset-fresh-standin-")

    out = tmp_path / "fresh-standin.jsonl"
    args = ["testset", "fresh", "--after", AFTER, "--n", "3", "--out", str(out), "--style", f"{style_file}:3",
            "--testset-set", f"today={TODAY}", "--data-root", str(standin_root)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "OFFLINE STAND-IN" in result.output and "near-duplicate" in result.output
    assert out.read_bytes() == by_flow.read_bytes()  # the command is the flow
    assert validate_mmu_jsonl(out) == [] and len(out.read_text().splitlines()) == 3

    # Table 3's rows on the built set (three of them here, for time; the command takes all six)
    variants = "baseline_q,rag,final"
    evaluated = runner.invoke(app, ["eval", "--dataset", str(out), "--variants", variants, "--eval-set",
                                    "bootstrap_resamples=200", "--out", str(tmp_path / "reports"),
                                    "--data-root", str(standin_root)])
    assert evaluated.exit_code == 0, evaluated.output
    assert "first evaluation" in evaluated.output
    warehouse = Warehouse(standin_root)
    rows = warehouse.query("SELECT variant, scored_run_id, verdict FROM evaluations ORDER BY variant").rows
    assert {r[0] for r in rows} == set(variants.split(","))
    assert all(r[1].startswith(f"custom-fresh-standin-{r[0]}-") and r[2] == "first" for r in rows)
    summary_rows = warehouse.query(
        "SELECT variant, mean, low, high FROM evaluation_summary WHERE metric = 'rouge_l_f1'").rows
    final = next(r for r in summary_rows if r[0] == "final")
    assert final[2] <= final[1] <= final[3] and final[1] > 0.1
    built = warehouse.query("SELECT variant, n_answered FROM runs WHERE run_id LIKE 'testset-%'").rows
    assert built == [("testset-fresh", 3)] * 2  # the flow's build and the command's


def test_cli_refuses_a_future_cutoff_and_a_missing_key(tmp_path, style_file, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    base = ["testset", "fresh", "--n", "3", "--out", str(tmp_path / "x.jsonl"), "--style", f"{style_file}:3",
            "--data-root", str(tmp_path)]
    future = (date.today() + timedelta(days=30)).isoformat()
    result = runner.invoke(app, [*base, "--after", future])
    assert result.exit_code == 2 and "is not before the build day" in result.output
    result = runner.invoke(app, [*base, "--after", AFTER, "--source", "gemini"])
    assert result.exit_code == 2 and "GEMINI_API_KEY" in result.output
    result = runner.invoke(app, [*base, "--after", AFTER, "--testset-set", "near_duplicate_threshold=2"])
    assert result.exit_code == 2 and "near_duplicate_threshold" in result.output
    assert not (tmp_path / "x.jsonl").exists()


# --- live ----------------------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.skipif(not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")),
                    reason="needs GEMINI_API_KEY (a real Gemini key with Google Search grounding)")
def test_live_gemini_builds_three_grounded_pairs(style_file, tmp_path):
    out = tmp_path / "live.jsonl"
    after = (date.today() - timedelta(days=120)).isoformat()
    plan = plan_fresh_set({"after": after, "n": 3, "style": f"{style_file}:3", "source": "gemini"}, out=out,
                          data_root=tmp_path / "data", settings=["max_calls=4", "pairs_per_call=8"],
                          overrides=["models.writer=gemini-2.5-flash"])
    result = build_fresh_set(open_builder(plan))
    save(plan, result)
    prov = json.loads(provenance_path(out).read_text())
    assert result.status == "complete", prov["counts"]
    assert validate_mmu_jsonl(out) == [] and len(out.read_text().splitlines()) == 3
    for pair in prov["pairs"]:
        assert any(s["date"] and s["date"]["date"] > after for s in pair["sources"])
