"""Steering a search: which sites, which dates, which language, how long an answer; values and checks.

The same controls come in four ways (the config's ``steer`` section and ``--set steer.*``, the command
line's ``--sites`` and friends, per-question JSONL fields, the service's optional body fields) and are
checked here once, so a bad value says the same thing wherever it came from, before any work starts.

* **Sites.** A rule is a domain: ``example.com`` matches that host and every subdomain of it
  (``docs.example.com``); ``=example.com`` matches that host only. ``sites`` keeps only URLs that match
  one of its rules, ``exclude_sites`` drops those that match one of its.
* **Dates.** ``after`` and ``before`` are days (``YYYY-MM-DD``), both included. A page dated outside the
  window is dropped; an undated page is kept or dropped by ``steer.undated`` (``keep`` by default:
  see docs/user-guide.md, "Steering").
* **Language.** ``auto`` (the question's own, detected) or a language code (``hifirag_core.language``).
* **Length.** ``short``, ``standard`` (the paper's) or ``long``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal
from urllib.parse import urlsplit

from hifirag_core.language import LanguageError, language_code

Length = Literal["short", "standard", "long"]
LENGTHS: tuple[str, ...] = ("short", "standard", "long")
Undated = Literal["keep", "drop"]
AUTO = "auto"
# The per-question fields (JSONL lines, the service's bodies), in the order they are documented.
QUESTION_FIELDS: tuple[str, ...] = ("sites", "exclude_sites", "after", "before", "language", "length")
EARLIEST_DAY = date(1990, 1, 1)  # page_dates.EARLIEST: older "dates" on the web are not publications
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SteeringError(ValueError):
    """A steering value that cannot be used; the message says what to write instead."""


# --- sites --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SiteRule:
    domain: str  # lower case, punycode, no trailing dot
    exact: bool = False  # "=host": that host only, not its subdomains

    def __str__(self) -> str:
        return f"={self.domain}" if self.exact else self.domain

    def matches(self, host: str) -> bool:
        return host == self.domain or (not self.exact and host.endswith("." + self.domain))


def site_rule(value: Any) -> SiteRule:
    """``"example.com"`` or ``"=docs.example.com"`` as a rule; anything else is a ``SteeringError``."""
    if not isinstance(value, str):
        raise SteeringError(f"a site must be a domain such as example.com, not {type(value).__name__}")
    text = value.strip()
    exact = text.startswith("=")
    domain = text[1:].strip() if exact else text
    problem = _domain_problem(domain)
    if problem:
        raise SteeringError(f"{value!r} is not a domain ({problem}); write e.g. example.com (with its subdomains) "
                            "or =docs.example.com (that host only)")
    return SiteRule(_normal_host(domain), exact)


def _domain_problem(domain: str) -> str | None:
    if not domain:
        return "empty"
    if "://" in domain or "/" in domain or "?" in domain or "#" in domain:
        return "give the host name alone, without a scheme or a path"
    if ":" in domain:
        return "no port"
    if " " in domain:
        return "it holds a space"
    try:
        host = _normal_host(domain)
    except UnicodeError:
        return "not a valid international domain name"
    labels = host.split(".")
    if len(labels) < 2:
        return "it needs a dot, as in example.com"
    if not all(_LABEL.match(label) for label in labels):
        return "each part between dots is letters, digits and inner hyphens"
    if labels[-1].isdigit():
        return "an IP address is not a domain"
    return None


def _normal_host(host: str) -> str:
    host = host.strip().rstrip(".").lower()
    return host.encode("idna").decode("ascii") if any(ord(c) > 127 for c in host) else host


def url_host(url: str) -> str | None:
    """The host of ``url`` in the form rules use, or None when it has none."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    try:
        return _normal_host(host)
    except UnicodeError:
        return host.lower()


def site_list(value: Any, field: str = "sites") -> tuple[str, ...]:
    """A list of site rules (or one string, comma-separated) as their normal strings, checked."""
    if value is None:
        return ()
    items: Iterable[Any] = ([v for v in value.split(",") if v.strip()] if isinstance(value, str) else value)
    if not isinstance(items, (list, tuple)):
        raise SteeringError(f"{field} must be a list of domains such as [\"example.com\"]")
    rules = []
    for item in items:
        try:
            rules.append(str(site_rule(item)))
        except SteeringError as exc:
            raise SteeringError(f"{field}: {exc}") from None
    return tuple(dict.fromkeys(rules))


@dataclass(frozen=True)
class SiteRules:
    """Which URLs the sources may come from."""

    sites: tuple[SiteRule, ...] = ()
    exclude: tuple[SiteRule, ...] = ()

    @classmethod
    def of(cls, sites: Iterable[str], exclude: Iterable[str]) -> SiteRules:
        return cls(tuple(site_rule(s) for s in sites), tuple(site_rule(s) for s in exclude))

    @property
    def active(self) -> bool:
        return bool(self.sites or self.exclude)

    def verdict(self, url: str) -> str | None:
        """None when ``url`` may be a source; else why not, in words."""
        if not self.active:
            return None
        host = url_host(url)
        if host is None:
            return f"{url!r} has no host to check against the site rules"
        hit = next((r for r in self.exclude if r.matches(host)), None)
        if hit is not None:
            return f"{host} is excluded by exclude_sites {str(hit)!r}"
        if self.sites and not any(r.matches(host) for r in self.sites):
            return f"{host} is not one of the sites {', '.join(str(r) for r in self.sites)}"
        return None

    def allows(self, url: str) -> bool:
        return self.verdict(url) is None


def check_site_conflicts(sites: Iterable[str], exclude: Iterable[str]) -> None:
    """A rule that is both wanted and excluded leaves nothing to search."""
    both = sorted(set(sites) & set(exclude))
    if both:
        raise SteeringError(f"{', '.join(both)} is in both sites and exclude_sites")
    wanted = [site_rule(s) for s in sites]
    for rule in (site_rule(s) for s in exclude):
        covered = [w for w in wanted if rule.matches(w.domain) and not (w.exact and w.domain != rule.domain)]
        if wanted and len(covered) == len(wanted):
            raise SteeringError(f"exclude_sites {str(rule)!r} excludes every one of the sites "
                                f"{', '.join(str(w) for w in wanted)}: nothing could be searched")


# --- dates ---------------------------------------------------------------------------------------------


def day(value: Any, field: str) -> date | None:
    """A day written ``YYYY-MM-DD`` (or a ``date``); None for None or an empty string."""
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not _DAY.match(value.strip()):
        raise SteeringError(f"{field} must be a day written YYYY-MM-DD, such as 2024-06-30; got {value!r}")
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise SteeringError(f"{field}: {value!r} is not a day of the calendar") from None


def check_window(after: date | None, before: date | None, today: date | None = None) -> None:
    """An impossible window (after > before, or after in the future) is an error before any work."""
    if after is not None and before is not None and after > before:
        raise SteeringError(f"after {after.isoformat()} is later than before {before.isoformat()}: "
                            "no page can be in that window")
    today = today or date.today()
    if after is not None and after > today:
        raise SteeringError(f"after {after.isoformat()} is in the future: no page can be published in that window")


@dataclass(frozen=True)
class DateWindow:
    """The days a source may have been published on, and what happens to a page with no date."""

    after: date | None = None
    before: date | None = None
    undated: Undated = "keep"

    @property
    def active(self) -> bool:
        return self.after is not None or self.before is not None

    def verdict(self, published: date | None) -> str | None:
        """None when a page published on ``published`` may be a source; else why not."""
        if not self.active:
            return None
        if published is None:
            return None if self.undated == "keep" else f"the page has no date and steer.undated is drop ({self.describe()})"
        if self.after is not None and published < self.after:
            return f"published {published.isoformat()}, before the window {self.describe()}"
        if self.before is not None and published > self.before:
            return f"published {published.isoformat()}, after the window {self.describe()}"
        return None

    def describe(self) -> str:
        return f"{self.after.isoformat() if self.after else '…'} to {self.before.isoformat() if self.before else '…'}"


# --- language and length ----------------------------------------------------------------------------


def language_setting(value: Any, field: str = "language") -> str:
    """``auto`` or a known language code, normalized."""
    if not isinstance(value, str) or not value.strip():
        raise SteeringError(f"{field} must be auto or a language code such as fr")
    if value.strip().lower() == AUTO:
        return AUTO
    try:
        return language_code(value)
    except LanguageError as exc:
        raise SteeringError(f"{field}: {exc}") from None


def length_setting(value: Any, field: str = "length") -> str:
    if value not in LENGTHS:
        raise SteeringError(f"{field} must be one of {', '.join(LENGTHS)}; got {value!r}")
    return str(value)


# --- a question's own fields ---------------------------------------------------------------------------


def question_steering(obj: Mapping[str, Any], *, today: date | None = None) -> tuple[dict[str, Any], list[str]]:
    """The steering fields of a question (a JSONL line, a request body), normalized for ``Question.meta``,
    and a problem per bad field. A field that is absent or null is not set (the run's value applies)."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    checks = {"sites": site_list, "exclude_sites": site_list, "language": language_setting, "length": length_setting}
    for name in QUESTION_FIELDS:
        value = obj.get(name)
        if value is None:
            continue
        try:
            if name in ("after", "before"):
                out[name] = day(value, name).isoformat()  # type: ignore[union-attr]
            else:
                out[name] = list(checks[name](value, name)) if name.endswith("sites") else checks[name](value, name)
        except SteeringError as exc:
            problems.append(str(exc) if str(exc).startswith(name) else f"{name}: {exc}")
    if not problems:
        try:
            if "sites" in out or "exclude_sites" in out:
                check_site_conflicts(out.get("sites", ()), out.get("exclude_sites", ()))
            check_window(day(out.get("after"), "after"), day(out.get("before"), "before"), today)
        except SteeringError as exc:
            problems.append(str(exc))
    return out, problems
