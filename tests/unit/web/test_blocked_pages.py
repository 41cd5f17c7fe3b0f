"""Pages standing in for the content (challenges, captchas, denials, paywalls) are told apart from real pages."""

from __future__ import annotations

import pytest

from hifirag_core.web.blocked import REASONS, RULES, Blocked, detect_blocked
from tests.support.blocked_fixtures import (
    FIXTURES,
    GUARDS,
    STAND_INS,
    kind_of,
    leave_out,
    mutation_check,
    rule_key,
    verdicts,
)
from tests.support.real_pages import iter_doc_pages, iter_health_pages

# The fixtures and their expected verdicts are listed in tests/support/blocked_fixtures.py, with the rule
# mutation check that tools/blocked_rule_mutation.py prints as a table.


def test_every_stand_in_fixture_is_listed() -> None:
    assert sorted(p.name for p in (FIXTURES / "stand_in").iterdir()) == sorted(STAND_INS)


@pytest.mark.parametrize(("name", "code"), sorted(STAND_INS.items()))
def test_each_kind_of_stand_in_page_is_blocked_with_its_reason(name: str, code: str) -> None:
    path = FIXTURES / "stand_in" / name
    verdict = detect_blocked(path.read_bytes(), url="https://site.example/guides/setup/", kind=kind_of(path))
    assert verdict is not None and verdict.code == code
    assert verdict.reason in REASONS and verdict.evidence and verdict.message.startswith(verdict.reason.replace("_", " "))


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "real").iterdir()))
def test_real_pages_that_mention_the_same_things_are_not_blocked(name: str) -> None:
    # a guide to 403 errors, a contact form with a reCAPTCHA, an article carrying Cloudflare's
    # bot-detection script, the god Anubis, a full article under a "subscribe" promo, a redirect
    # stub, an API's rate-limit docs, an app page with real text
    path = FIXTURES / "real" / name
    assert detect_blocked(path.read_bytes(), url="https://site.example/docs/page.html", kind=kind_of(path)) is None


def test_every_rule_has_a_fixture_that_only_it_catches() -> None:
    keys = [rule_key(rule) for rule in RULES]
    assert len(set(keys)) == len(keys)  # a key names one rule
    assert sorted(GUARDS) == sorted(keys)  # no rule without its fixture, no fixture for a rule gone
    base = verdicts()
    for rule in RULES:
        guard = f"stand_in/{GUARDS[rule_key(rule)]}"
        assert base[guard] == f"{rule.reason}:{rule.vendor}", (rule_key(rule), base[guard])


@pytest.mark.parametrize("index", range(len(RULES)), ids=[rule_key(r) for r in RULES])
def test_leaving_out_any_one_rule_changes_a_fixtures_verdict(index: int) -> None:
    # The mutation check: a rule that can be deleted with every verdict unchanged is guarded by nothing.
    mutation = leave_out(index)
    guard = f"stand_in/{GUARDS[mutation.key]}"
    assert guard in mutation.changed, (mutation.key, mutation.changed)
    assert all(name.startswith("stand_in/") for name in mutation.changed)  # leaving a rule out flags nothing new


def test_the_mutation_check_sees_a_rule_that_guards_nothing() -> None:
    # A copy of a rule is never needed: the check must say so, or it would pass blind.
    mutations = mutation_check((*RULES, RULES[0]))
    assert mutations[-1].changed == {} and mutations[0].changed == {}  # each copy covers the other
    assert all(m.changed for m in mutations[1:-1])


def test_meta_refresh_blocks_only_when_it_reloads_the_page_or_goes_to_a_challenge() -> None:
    def page(content: str) -> bytes:
        return f'<html><head><meta http-equiv="refresh" content="{content}"></head><body>One moment</body></html>'.encode()

    url = "https://site.example/a/page.html"
    assert detect_blocked(page("5"), url=url) == Blocked("interstitial", "generic",
                                                        f"meta refresh to {url!r} and 2 words")
    assert detect_blocked(page("0;url=/a/page.html"), url=url) is not None
    assert detect_blocked(page("0; URL='/cdn-cgi/l/chk_jschl?x=1'"), url=url) is not None
    assert detect_blocked(page("0; url=/b/moved.html"), url=url) is None  # a moved page


def test_a_long_page_is_never_a_stand_in_whatever_its_title() -> None:
    body = " ".join(["The river rose overnight and the ferry stopped running."] * 60)
    html = f"<html><head><title>Just a moment...</title></head><body><p>{body}</p></body></html>".encode()
    assert detect_blocked(html) is None
    short = b"<html><head><title>Just a moment...</title></head><body><p>Loading</p></body></html>"
    assert detect_blocked(short) is not None


def test_only_pages_and_text_are_judged() -> None:
    challenge = (FIXTURES / "stand_in" / "cloudflare_challenge.html").read_bytes()
    assert detect_blocked(challenge, kind="pdf") is None
    assert detect_blocked(challenge, kind="reddit") is None
    assert detect_blocked(b"", kind="html") is None
    assert detect_blocked(b"\x89PNG\r\n\x1a\n\x00\x00", kind="html") is None


def test_a_declared_charset_is_honoured() -> None:
    html = "<html><head><title>Accès refusé</title></head><body>Accès refusé. Access denied.</body></html>"
    verdict = detect_blocked(html.encode("cp1252"), encoding="windows-1252")
    assert verdict is not None and verdict.code == "denied:generic" and "refusé" in verdict.evidence


def test_every_rule_has_a_known_reason_and_a_word_limit() -> None:
    for rule in RULES:
        assert rule.reason in REASONS and rule.where in ("title", "markup", "text") and rule.max_words > 0
        assert rule.measure in ("page", "content")


@pytest.mark.shared_data
@pytest.mark.slow
def test_no_documentation_page_is_flagged() -> None:
    pages = list(iter_doc_pages())
    assert len(pages) == 3174
    flagged = [(p.url, v.message) for p in pages if (v := detect_blocked(p.body, url=p.url, kind=p.kind))]
    assert flagged == []


@pytest.mark.shared_data
@pytest.mark.slow
def test_no_page_of_the_health_corpus_is_flagged() -> None:
    pages = list(iter_health_pages())
    assert len(pages) == 2 * 5486
    flagged = [(p.url, v.message) for p in pages if (v := detect_blocked(p.body, url=p.url, kind=p.kind))]
    assert flagged == []
