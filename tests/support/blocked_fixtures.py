"""The blocked-page fixtures, their expected verdicts, and the rule mutation check over them.

``stand_in/`` holds pages that must be blocked with a given ``reason:vendor``; ``real/`` holds real
pages mentioning the same words that must not be. Each stand-in is written here after the shape such
pages have in the wild (title, vendor markers, the phrases they show, how little else they hold),
from the vendors' public descriptions, not copied from a real page.

The mutation check leaves each rule of ``RULES`` out in turn and re-judges every fixture: a rule whose
absence changes no verdict is guarded by no test. ``GUARDS`` names, for every rule, the fixture that
only it catches (its verdict changes, to none or to another ``reason:vendor``, when the rule is left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hifirag_core.sectioning.decoding import decode_html
from hifirag_core.web.blocked import RULES, PageShape, Rule, classify_shape, page_shape

FIXTURES = Path(__file__).parent / "fixtures" / "blocked"
URL = "https://site.example/guides/setup/"

STAND_INS = {
    "cloudflare_challenge.html": "challenge:cloudflare",  # "Just a moment..."
    "cloudflare_verifying.html": "challenge:cloudflare",  # the newer page, its title the site's name
    "cloudflare_waiting.html": "challenge:cloudflare",  # the title, its script on a path the markup rule lacks
    "cloudflare_challenge_fr.html": "challenge:cloudflare",  # localised: only the markup is Cloudflare's
    "cloudflare_checking_browser.html": "challenge:cloudflare",  # the older "Checking your browser" page
    "cloudflare_blocked.html": "denied:cloudflare",  # "Attention Required!", error 1020
    "cloudflare_block_restyled.html": "denied:cloudflare",  # the title over a restyled body
    "cloudflare_error_1010.html": "denied:cloudflare",  # "Access denied", banned by browser signature
    "cloudflare_blocked.txt": "denied:cloudflare",  # the block page as plain text
    "anubis.html": "challenge:anubis",
    "anubis_own_assets.html": "challenge:anubis",  # the title, its scripts served from the site's own path
    "anubis_fr.html": "challenge:anubis",  # localised title, the challenge's script id
    "recaptcha_wall.html": "captcha:generic",
    "hcaptcha_wall.html": "captcha:generic",  # an hCaptcha widget and a line asking to solve it
    "human_verification.html": "captcha:generic",  # "Human Verification", a slider puzzle of its own
    "text_captcha.html": "captcha:generic",  # a captcha of the site's own: only the phrase gives it away
    "datadome.html": "captcha:datadome",
    "perimeterx.html": "captcha:perimeterx",
    "incapsula.html": "challenge:imperva",
    "imperva_pardon.html": "captcha:imperva",  # "Pardon Our Interruption"
    "aws_waf.html": "challenge:aws-waf",
    "sucuri.html": "denied:sucuri",  # "Access Denied - Sucuri Website Firewall"
    "ddos_guard.html": "challenge:ddos-guard",  # DDoS-Guard's browser check
    "vercel_checkpoint.html": "challenge:vercel",  # "Vercel Security Checkpoint"
    "amazon_robot_check.html": "captcha:amazon",  # Amazon's "Robot Check"
    "nginx_403.html": "denied:generic",  # a "403 Forbidden" body served with 200
    "nginx_401.html": "denied:generic",  # "401 Authorization Required": the title alone says so
    "akamai_access_denied.html": "denied:akamai",
    "wordfence.html": "denied:wordfence",
    "forbidden.txt": "denied:generic",  # plain text
    "rate_limited.html": "rate_limited:generic",
    "rate_limit_title.html": "rate_limited:generic",  # the title says it, the body in other words
    "rate_limited_text.html": "rate_limited:generic",  # the body says it, the title is the site's name
    "paywall.html": "paywall:generic",  # a teaser, the site's whole navigation around it
    "paywall_phrase.html": "paywall:generic",  # the phrase, no structured data
    "paywall_structured.html": "paywall:generic",  # the structured-data flag, no phrase
    "javascript_required.html": "javascript_required:generic",  # a tiny body with a script
    "self_refresh.html": "interstitial:generic",  # a meta refresh to a captcha
}

# For each rule (``rule_key``), the stand-in that only it catches.
GUARDS = {
    "challenge:cloudflare title": "cloudflare_waiting.html",
    "denied:cloudflare title": "cloudflare_block_restyled.html",
    "challenge:cloudflare markup": "cloudflare_challenge_fr.html",
    "denied:cloudflare markup": "cloudflare_error_1010.html",
    "denied:cloudflare text": "cloudflare_blocked.txt",
    "challenge:cloudflare text": "cloudflare_checking_browser.html",
    "challenge:anubis title": "anubis_own_assets.html",
    "challenge:anubis markup": "anubis_fr.html",
    "captcha:datadome markup": "datadome.html",
    "captcha:perimeterx markup": "perimeterx.html",
    "challenge:imperva markup": "incapsula.html",
    "captcha:imperva title": "imperva_pardon.html",
    "challenge:aws-waf markup": "aws_waf.html",
    "denied:sucuri markup": "sucuri.html",
    "denied:wordfence markup": "wordfence.html",
    "denied:akamai markup": "akamai_access_denied.html",
    "challenge:ddos-guard title": "ddos_guard.html",
    "challenge:vercel title": "vercel_checkpoint.html",
    "captcha:amazon title": "amazon_robot_check.html",
    "captcha:generic markup": "hcaptcha_wall.html",
    "captcha:generic title": "human_verification.html",
    "captcha:generic text": "text_captcha.html",
    "rate_limited:generic title": "rate_limit_title.html",
    "denied:generic title": "nginx_401.html",
    "rate_limited:generic text": "rate_limited_text.html",
    "denied:generic text": "forbidden.txt",
    "paywall:generic text": "paywall_phrase.html",
    "paywall:generic markup": "paywall_structured.html",
}


def kind_of(path: Path) -> str:
    return "text" if path.suffix == ".txt" else "html"


def rule_key(rule: Rule) -> str:
    """``reason:vendor where``: unique per rule, stable when rules are added or moved."""
    return f"{rule.reason}:{rule.vendor} {rule.where}"


def fixture_paths() -> list[Path]:
    return sorted((FIXTURES / "stand_in").iterdir()) + sorted((FIXTURES / "real").iterdir())


@cache
def _shapes() -> dict[str, PageShape]:
    """Each fixture's shape, parsed once: the mutation check re-runs only the rules."""
    shapes = {}
    for path in fixture_paths():
        decoded = decode_html(path.read_bytes(), None)
        assert decoded.status == "ok" and decoded.text is not None, path
        shapes[f"{path.parent.name}/{path.name}"] = page_shape(decoded.text, kind_of(path))
    return shapes


def verdicts(rules: Sequence[Rule] = RULES) -> dict[str, str | None]:
    """``folder/name`` -> the verdict's ``reason:vendor`` (None: not blocked) under these rules."""
    out = {}
    for name, shape in _shapes().items():
        verdict = classify_shape(shape, URL, rules)
        out[name] = verdict.code if verdict else None
    return out


@dataclass(frozen=True)
class Mutation:
    """Rule ``index`` left out: which fixtures' verdicts changed, ``{name: (with, without)}``."""

    index: int
    rule: Rule
    changed: dict[str, tuple[str | None, str | None]]

    @property
    def key(self) -> str:
        return rule_key(self.rule)


def leave_out(index: int, rules: Sequence[Rule] = RULES) -> Mutation:
    """Re-judge every fixture without rule ``index``; the verdicts that changed."""
    rules = tuple(rules)
    base = verdicts(rules)
    without = verdicts(rules[:index] + rules[index + 1:])
    return Mutation(index, rules[index], {n: (base[n], without[n]) for n in base if base[n] != without[n]})


def mutation_check(rules: Sequence[Rule] = RULES) -> list[Mutation]:
    """Leave each rule out in turn."""
    return [leave_out(i, rules) for i in range(len(rules))]
