"""Steering: the values and their checks, the config file and profiles, the search requests through the
fakes, the writer's prompt, and the offline pipeline honouring site rules and date windows."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from hifirag_core.backends.factory import build_search_backend
from hifirag_core.config import ConfigError, build_config
from hifirag_core.language import detect_language
from hifirag_core.profiles import load_config_file, profile_settings, resolve_config
from hifirag_core.questions import InputError, Question, load_questions
from hifirag_core.steering import DateWindow, SiteRules, SteeringError, question_steering, site_rule
from hifirag_core.types import SearchSteer
from tests import SUPPORT
from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.support.fakes.web import WebHit

# --- values -----------------------------------------------------------------------------------------------


def test_a_domain_takes_its_subdomains_and_an_exact_rule_only_its_host() -> None:
    rules = SiteRules.of(["python.org", "=www.postgresql.org"], ["wiki.python.org"])
    assert rules.allows("https://docs.python.org/3/library/venv.html")
    assert rules.allows("https://python.org/")
    assert rules.allows("https://www.postgresql.org/docs/15/")
    assert not rules.allows("https://postgresql.org/docs/")  # the exact rule is that host only
    assert "excluded by exclude_sites" in rules.verdict("https://wiki.python.org/moin/")
    assert "not one of the sites" in rules.verdict("https://en.wikipedia.org/wiki/Python")
    assert not rules.allows("https://notpython.org/")  # a suffix is not a subdomain
    assert site_rule("Bücher.DE.").domain == "xn--bcher-kva.de"


@pytest.mark.parametrize("bad, says", [("https://example.com/", "without a scheme"), ("example", "needs a dot"),
                                       ("exa mple.com", "space"), ("-x.com", "inner hyphens"), ("1.2.3.4", "IP"),
                                       ("example.com:8080", "port"), ("", "empty")])
def test_a_malformed_domain_is_a_clear_error(bad: str, says: str) -> None:
    with pytest.raises(SteeringError, match=says):
        site_rule(bad)


def test_a_date_window_drops_pages_outside_it_and_undated_ones_by_its_rule() -> None:
    window = DateWindow(date(2023, 1, 1), date(2023, 12, 31))
    assert window.verdict(date(2023, 6, 1)) is None
    assert "before the window" in window.verdict(date(2022, 12, 31))
    assert "after the window" in window.verdict(date(2024, 1, 1))
    assert window.verdict(None) is None  # kept by default
    assert "no date" in DateWindow(date(2023, 1, 1), None, "drop").verdict(None)
    assert DateWindow().verdict(date(1999, 1, 1)) is None  # no window: nothing is dropped


def test_question_fields_are_checked_and_normalized() -> None:
    good, problems = question_steering({"sites": "docs.python.org, =www.postgresql.org", "after": "2020-01-01",
                                        "language": "PT-br", "length": "short"})
    assert problems == []
    assert good == {"sites": ["docs.python.org", "=www.postgresql.org"], "after": "2020-01-01", "language": "pt",
                    "length": "short"}
    _, problems = question_steering({"sites": ["ok.com", "http://bad.com"], "after": "2021-02-30",
                                     "language": "klingon", "length": "tiny"})
    assert len(problems) == 4 and problems[0].startswith("sites:") and "not a day" in problems[1]
    _, problems = question_steering({"after": "2024-01-01", "before": "2023-01-01"})
    assert problems == ["after 2024-01-01 is later than before 2023-01-01: no page can be in that window"]
    _, problems = question_steering({"sites": ["a.com"], "exclude_sites": ["a.com"]})
    assert "in both sites and exclude_sites" in problems[0]


def test_a_questions_file_with_bad_steering_fails_naming_each_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    lines = [{"iid": "1", "query": "ok?", "sites": ["docs.python.org"], "length": "long"},
             {"iid": "2", "query": "bad date?", "after": "2024/01/01"},
             {"iid": "3", "query": "bad language?", "language": "xx"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(InputError) as caught:
        load_questions(path)
    assert [p.split(":")[0] for p in caught.value.problems] == ["line 2", "line 3"]
    path.write_text(json.dumps(lines[0]) + "\n")
    (q,) = load_questions(path).questions
    assert q.steering == {"sites": ["docs.python.org"], "length": "long"}


@pytest.mark.parametrize("override, says", [("steer.sites=https://a.com", "steer.sites"),
                                            ("steer.after=2030-13-01", "not a day"),
                                            ("steer.language=xx", "unknown language code"),
                                            ("steer.length=tiny", "steer.length")])
def test_a_bad_run_setting_is_a_config_error(override: str, says: str) -> None:
    from hifirag_core.config import parse_overrides

    with pytest.raises(ConfigError, match=says):
        build_config(overrides=parse_overrides([override]))


def test_language_detection_falls_back_to_english_on_code() -> None:
    assert detect_language("Comment créer un environnement virtuel en Python ?").code == "fr"
    assert detect_language("pg_dump -Fc --schema-only?").code == "en"
    assert detect_language("Was ist der Unterschied zwischen select_related und prefetch_related?").code == "de"


def test_language_detection_is_right_on_most_of_the_short_question_set() -> None:
    """The accuracy bench's own set: a floor under the 98% measured, so a broken detector fails here."""
    rows = [json.loads(x) for x in (SUPPORT / "data" / "language_questions.jsonl").read_text().splitlines()]
    right = sum(detect_language(r["question"]).code == r["lang"] for r in rows)
    assert len(rows) >= 200 and len({r["lang"] for r in rows}) >= 10
    assert right / len(rows) >= 0.95


# --- the config file and profiles -------------------------------------------------------------------------


def test_precedence_is_defaults_then_file_then_profile_then_variant_then_set(tmp_path: Path) -> None:
    path = tmp_path / "hifirag.toml"
    path.write_text('profile = "llama-cpp:filemodel@http://127.0.0.1:9/v1"\n'
                    "[models]\nwriter_max_tokens = 111\nopenai_response_format = \"none\"\n"
                    "[limits]\nconcurrency = 7\ndeadline_s = 100\n[steer]\nexclude_sites = [\"pinterest.com\"]\n")
    cfg = resolve_config(config_file=path, variant="rag", variant_settings={"url_filter": {"enabled": False}},
                         overrides=["limits.deadline_s=50"])
    assert cfg.models.writer_max_tokens == 111  # the file alone sets it
    assert cfg.models.openai_response_format == "json_object_schema"  # the profile beats the file
    assert cfg.limits.concurrency == 1  # (the llama-cpp profile)
    assert cfg.limits.deadline_s == 50  # --set beats the file
    assert cfg.url_filter.enabled is False  # the variant's switch
    assert cfg.models.writer == "filemodel" and cfg.steer.exclude_sites == ("pinterest.com",)
    # a command's --profile beats the file's
    assert resolve_config(config_file=path, profile="offline").backends.writer_llm == "offline"
    # no file: the defaults
    assert resolve_config().backends.writer_llm == "offline"


def test_the_config_file_comes_from_the_environment_and_holds_profiles_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[profiles.box]\nextends = "openai:qwen@http://127.0.0.1:11434/v1"\n'
                    "[profiles.box.models]\nwriter_max_tokens = 400\n")
    file = load_config_file(env={"HIFIRAG_CONFIG": str(path)})
    cfg = resolve_config(profile="box", file=file)
    assert (cfg.backends.filter_llm, cfg.models.writer, cfg.models.writer_max_tokens) == ("openai", "qwen", 400)
    assert cfg.models.openai_base_url == "http://127.0.0.1:11434/v1" and cfg.models.openai_api_key_optional


@pytest.mark.parametrize("text, says", [("[nonsense]\nx = 1\n", "unknown key"), ("[limits\n", "not valid TOML"),
                                        ("[steer]\nafter = \"2024-02-30\"\n", "not a day"),
                                        ("[profiles.gemini]\n", "built in")])
def test_a_bad_config_file_fails_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as caught:
        load_config_file(path)
    assert str(path) in str(caught.value)


def test_profiles_take_a_model_and_url_in_one_word() -> None:
    assert profile_settings("openai:qwen2.5:7b@http://127.0.0.1:11434/v1")["models"] == {
        "filter": "qwen2.5:7b", "writer": "qwen2.5:7b", "openai_base_url": "http://127.0.0.1:11434/v1",
        "openai_api_key_optional": True}
    with pytest.raises(ConfigError, match="unknown profile"):
        profile_settings("nope")
    with pytest.raises(ConfigError, match="takes no MODEL@URL"):
        profile_settings("gemini:x@http://a")


def test_doctor_says_what_a_profile_lacks() -> None:
    from hifirag_core.backends.doctor import profile_gaps

    gaps = profile_gaps("openai", resolve_config(profile="openai"), env={})
    assert any("server's URL" in g for g in gaps) and any("model name" in g for g in gaps)
    assert any("OPENAI_API_KEY" in g for g in gaps)
    assert profile_gaps("llama-cpp:m@http://127.0.0.1:8080/v1",
                        resolve_config(profile="llama-cpp:m@http://127.0.0.1:8080/v1"), env={}) == []
    assert [g.split(":")[0] for g in profile_gaps("gemini", resolve_config(profile="gemini"), env={})] == [
        "GEMINI_API_KEY or GOOGLE_API_KEY", "GOOGLE_CSE_KEY", "GOOGLE_CSE_ID"]


# --- the search requests, through the fakes ----------------------------------------------------------------


def _hits(query: str, n: int) -> list[WebHit]:
    hosts = ["docs.python.org", "wiki.python.org", "www.pinterest.com", "stackoverflow.com"]
    return [WebHit(f"{h} on {query}", f"https://{h}/{i}", "snippet") for i, h in enumerate(hosts)][:n]


def test_google_requests_carry_site_and_date_and_language_parameters(make_guards) -> None:
    with GoogleSearchFake(search=_hits) as fake:
        cfg = build_config(overrides={"backends": {"search": "google", "google_search_base_url": fake.base_url}})
        backend = build_search_backend(cfg, guards=make_guards(cfg), env={"GOOGLE_CSE_KEY": fake.api_key,
                                                                          "GOOGLE_CSE_ID": fake.engine_id})
        one = SearchSteer(SiteRules.of(["python.org"], []), DateWindow(date(2024, 1, 1), date(2024, 6, 30)), "fr")
        hits = backend.search("venv", num=10, steer=one)
        assert fake.steered[-1] == {"siteSearch": "python.org", "siteSearchFilter": "i",
                                    "sort": "date:r:20240101:20240630", "hl": "fr"}
        assert {h.url.split("/")[2] for h in hits} == {"docs.python.org", "wiki.python.org"}
        several = SearchSteer(SiteRules.of(["python.org", "stackoverflow.com"], ["wiki.python.org"]),
                              DateWindow(date(2020, 1, 1)))
        hits = backend.search("venv", num=10, steer=several)
        assert fake.queries[-1] == "venv site:python.org OR site:stackoverflow.com -site:wiki.python.org"
        assert fake.steered[-1]["dateRestrict"] == f"d{(date.today() - date(2020, 1, 1)).days + 1}"
        assert {h.url.split("/")[2] for h in hits} == {"docs.python.org", "stackoverflow.com"}
        backend.search("venv", num=10, steer=SearchSteer(SiteRules.of([], ["pinterest.com"])))
        assert fake.steered[-1] == {"siteSearch": "pinterest.com", "siteSearchFilter": "e"}
        backend.search("venv", num=10)
        assert fake.steered[-1] == {} and fake.queries[-1] == "venv"


def test_scrapingdog_requests_carry_site_terms_a_date_range_and_a_language(make_guards) -> None:
    with ScrapingdogFake(search=_hits) as fake:
        cfg = build_config(overrides={"backends": {"search": "scrapingdog", "scrapingdog_base_url": fake.base_url}})
        backend = build_search_backend(cfg, guards=make_guards(cfg), env={"SCRAPINGDOG_API_KEY": fake.api_key})
        steer = SearchSteer(SiteRules.of([], ["pinterest.com"]), DateWindow(date(2024, 3, 5), date(2024, 12, 1)), "de")
        hits = backend.search("venv", num=10, steer=steer)
        assert fake.steered[-1] == {"tbs": "cdr:1,cd_min:3/5/2024,cd_max:12/1/2024", "language": "de",
                                    "query": "venv -site:pinterest.com"}
        assert "www.pinterest.com" not in {h.url.split("/")[2] for h in hits} and len(hits) == 3


def test_the_fakes_refuse_malformed_steering_parameters() -> None:
    import httpx

    with GoogleSearchFake() as fake:
        base = {"key": fake.api_key, "cx": fake.engine_id, "q": "x"}
        for bad in ({"siteSearchFilter": "x", "siteSearch": "a.com"}, {"dateRestrict": "2024"}, {"sort": "date:r:1:2"}):
            assert httpx.get(f"{fake.base_url}/customsearch/v1", params={**base, **bad}).status_code == 400
    with ScrapingdogFake() as fake:
        r = httpx.get(f"{fake.base_url}/google", params={"api_key": fake.api_key, "query": "x", "tbs": "qdr:2024"})
        assert r.status_code == 400


# --- the writer's prompt, through a fake server -------------------------------------------------------------


def test_the_writer_prompt_carries_each_sources_date_and_the_target_language(openai_fake, make_guards) -> None:
    from hifirag_core.backends.factory import build_writer_model
    from hifirag_core.types import AnswerStyle, SourceDoc, SourceSection

    cfg = build_config(overrides={"backends": {"writer_llm": "openai"},
                                  "models": {"openai_base_url": openai_fake.base_url + "/v1", "writer": "w"}})
    writer = build_writer_model(cfg, guards=make_guards(cfg), env={"OPENAI_API_KEY": openai_fake.api_key or "k"})
    sources = [SourceDoc(1, "https://a.example/new", "New", "", (SourceSection("s1", ("Sync",), "Use --max-rate."),),
                         published="2024-05-01"),
               SourceDoc(2, "https://b.example/old", "Old", "", (SourceSection("s2", ("Sync",), "Use --bwlimit."),))]
    writer.draft("Wie begrenze ich die Bandbreite?", sources, max_words=80,
                 style=AnswerStyle(language="de", length="short", source_dates=True))
    prompt = openai_fake.bodies[-1]["messages"][-1]["content"]
    assert "Published: 2024-05-01" in prompt and "Published: unknown" in prompt
    assert "Where sources disagree, prefer the more recent one" in prompt
    assert "Write the answer in German" in prompt and "Keep the answer short" in prompt
    assert "# Not in the paper" not in prompt  # headers stay in the files
    writer.draft("How do I limit the bandwidth?", sources, max_words=80)
    paper = openai_fake.bodies[-1]["messages"][-1]["content"]
    assert "Published:" not in paper and "Write the answer in" not in paper  # the paper's prompt, unchanged


# --- the offline pipeline on a corpus with sites and dates -------------------------------------------------


def _page(title: str, body: str, published: str | None) -> bytes:
    meta = f'<meta property="article:published_time" content="{published}T09:00:00Z">' if published else ""
    return (f"<html><head><title>{title}</title>{meta}</head><body><main><h1>{title}</h1>"
            f"<h2>Limiting bandwidth</h2><p>{body}</p></main></body></html>").encode()


@pytest.fixture
def steered_root(tmp_path: Path) -> Path:
    from hifirag_core.corpus.sites import SourcePage
    from hifirag_core.corpus.store import Corpus
    from hifirag_core.store.blobs import blob_store

    pages = [
        ("a.example", "https://docs.a.example/sync.html", "Sync options", "Use --max-rate to limit the bandwidth a "
         "sync uses; --max-rate 2M limits it to two megabytes per second.", "2020-02-01"),
        ("a.example", "https://blog.a.example/bandwidth.html", "Bandwidth tips", "To limit the bandwidth of a sync, "
         "pass --max-rate with a rate such as 500K; the limit applies per transfer.", "2024-03-10"),
        ("b.example", "https://b.example/sync-bandwidth.html", "Sync bandwidth", "The bandwidth a sync uses is "
         "limited with the --max-rate option, for example --max-rate 1M.", None),
        ("c.example", "https://c.example/limits.html", "Limits", "A sync limits its bandwidth with --max-rate; set "
         "it to 0 for no limit.", "2019-05-05"),
    ]
    root = tmp_path / "data"
    Corpus.build(root / "corpus" / "docs", blob_store(root),
                 [SourcePage(site, url.split("/", 3)[3], url, _page(title, body, day)) for site, url, title, body, day
                  in pages], sources=["test"])
    return root


def _answer(root: Path, examples_file: Path, steer: dict, question: Question | None = None) -> dict:
    from hifirag_core.llm.examples import resolve_example_set
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.runner import run_question
    from hifirag_core.pipeline.wiring import build_runtime

    cfg = build_config(overrides={"steer": steer})
    rt = build_runtime(RunContext("steer-test", str(root), cfg, resolve_example_set(str(examples_file), "custom")))
    return run_question(question or Question("q1", "How do I limit the bandwidth a sync uses?", None, 1), rt)


def _cited(outputs: dict) -> list[str]:
    return outputs["answer"].records[0].cited_urls


def test_offline_answers_cite_only_the_sites_allowed(steered_root: Path, examples_file: Path) -> None:
    everything = _answer(steered_root, examples_file, {})
    assert len({u.split("/")[2] for u in _cited(everything)}) >= 2  # without rules several sites are cited
    only = _answer(steered_root, examples_file, {"sites": ["a.example"], "exclude_sites": ["blog.a.example"]})
    assert _cited(only) and all(u.startswith("https://docs.a.example/") for u in _cited(only))
    searched = {r.url for r in only["search"].records}
    assert searched == {"https://docs.a.example/sync.html"}  # the corpus honours the rules at search time


def test_offline_answers_cite_no_page_outside_the_date_window(steered_root: Path, examples_file: Path) -> None:
    out = _answer(steered_root, examples_file, {"after": "2020-01-01", "before": "2023-12-31"})
    # an answer that cites nothing would lie in any window: it must cite, and only pages in the window
    assert _cited(out) and set(_cited(out)) <= {"https://docs.a.example/sync.html",
                                                "https://b.example/sync-bandwidth.html"}
    pages = {p.url: p for p in out["fetch"].records}
    assert pages["https://docs.a.example/sync.html"].published == "2020-02-01"
    assert pages["https://docs.a.example/sync.html"].date_source == "corpus"
    dropped = _answer(steered_root, examples_file, {"after": "2020-01-01", "undated": "drop"})
    assert _cited(dropped) and set(_cited(dropped)) <= {"https://docs.a.example/sync.html",
                                                        "https://blog.a.example/bandwidth.html"}
    # under undated=drop every cited page is dated, and in the window
    dated = {p.url: p.published for p in dropped["fetch"].records}
    assert all(dated[u] is not None and dated[u] >= "2020-01-01" for u in _cited(dropped))


def test_a_questions_own_steering_wins_over_the_runs(steered_root: Path, examples_file: Path) -> None:
    question = Question("q1", "How do I limit the bandwidth a sync uses?", None, 1, {"sites": ["c.example"]})
    out = _answer(steered_root, examples_file, {"sites": ["a.example"]}, question)
    assert _cited(out) == ["https://c.example/limits.html"]


def test_the_fetch_stage_excludes_a_page_that_redirects_off_the_allowed_sites(steered_root: Path,
                                                                                 examples_file: Path) -> None:
    from hifirag_core.pipeline.stages import fetch
    from hifirag_core.records import PageRecord

    page = PageRecord(url="https://docs.a.example/sync.html", final_url="https://evil.example/landing", status="ok",
                      content_sha256="x", kind="html", published="2024-01-01")
    rules = SiteRules.of(["a.example"], [])
    moved = fetch._steered(page, rules, DateWindow())
    assert moved.status == "excluded" and moved.content_sha256 is None
    assert moved.error.startswith("redirected to https://evil.example/landing")
    stayed = PageRecord(url=page.url, final_url=page.url, status="ok", content_sha256="x", kind="html",
                        published="2024-01-01")
    assert fetch._steered(stayed, rules, DateWindow()) == stayed
    assert fetch._steered(stayed, rules, DateWindow(date(2025, 1, 1))).error.startswith("published 2024-01-01")
    thread = PageRecord(url="https://www.reddit.com/r/x/comments/1/", final_url="https://www.reddit.com/r/x/comments/1/",
                        status="ok", content_sha256="x", kind="reddit")
    assert "excluded by exclude_sites" in fetch._steered(thread, SiteRules.of([], ["reddit.com"]), DateWindow()).error


def test_a_non_english_question_gets_an_english_answer_with_a_note_offline(steered_root: Path,
                                                                           examples_file: Path) -> None:
    out = _answer(steered_root, examples_file, {}, Question("q1", "Comment limiter la bande passante d'une "
                                                                  "synchronisation avec --max-rate ?", None, 1))
    answer = out["answer"].records[0]
    assert answer.language == "fr" and "English only" in answer.note and "French" in answer.note
    english = _answer(steered_root, examples_file, {})["answer"].records[0]
    assert english.language == "en" and english.note is None


def test_hifirag_doctor_with_a_profile_says_what_it_lacks(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HIFIRAG_CONFIG", raising=False)
    result = CliRunner().invoke(app, ["doctor", "--profile", "openai", "--data-root", str(tmp_path)])
    assert result.exit_code == 1
    assert "Profile openai: it still lacks:" in result.output and "the server's URL" in result.output
    assert "OPENAI_API_KEY" in result.output
    bad = CliRunner().invoke(app, ["doctor", "--profile", "nope", "--data-root", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown profile 'nope'" in bad.output


@pytest.mark.parametrize("args, says", [(["--after", "2024-13-01"], "not a day of the calendar"),
                                        (["--after", "2024-05-01", "--before", "2024-01-01"], "later than before"),
                                        (["--sites", "http://x.com/a"], "is not a domain"),
                                        (["--language", "xx"], "unknown language code"),
                                        (["--length", "tiny"], "steer.length"),
                                        (["--profile", "openai:m@ftp://x"], "must start with http")])
def test_a_bad_steering_option_exits_2_before_any_work(questions_file: Path, tmp_path: Path, args, says) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["run", str(questions_file), "--data-root", str(tmp_path / "data"), *args])
    assert result.exit_code == 2 and says in " ".join(result.output.split())
    assert not (tmp_path / "data" / "tables").exists()  # nothing was written


def test_the_runs_steering_and_a_questions_together_are_checked_in_one_place(tmp_path: Path) -> None:
    """`hifirag run` (exit 2) and `hifirag serve` (422, tests/unit/serving/test_service_access.py) both ask steering_conflicts."""
    from typer.testing import CliRunner

    from flows.cli import app
    from hifirag_core.config import build_config
    from hifirag_core.pipeline.question_steering import steering_conflicts

    cfg = build_config(overrides={"steer": {"before": "2020-01-01", "exclude_sites": ["a.example"]}})
    (window,) = steering_conflicts(cfg, {"after": "2023-01-01"}, "the request's")
    assert "no page can be in that window" in window
    assert "after the request's" in window and "before the run's steer.before" in window
    (sites,) = steering_conflicts(cfg, {"sites": ["docs.a.example"]})
    assert "nothing could be searched" in sites and "exclude_sites the run's steer.exclude_sites" in sites
    assert steering_conflicts(cfg, {"after": "2019-01-01", "sites": ["b.example"]}) == []
    # both fields the question's own: question_steering's to report, not repeated here
    assert steering_conflicts(cfg, {"after": "2023-01-01", "before": "2024-01-01"}) == []

    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"iid": "w1", "query": "How do I limit sync bandwidth?", "after": "2023-01-01"})
                         + "\n")
    result = CliRunner().invoke(app, ["run", str(questions), "--data-root", str(tmp_path / "data"),
                                      "--before", "2020-01-01"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "no page can be in that window" in said and "steer.before" in said
    assert not (tmp_path / "data" / "tables").exists()
