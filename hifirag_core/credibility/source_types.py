"""Source typing: which kind of publisher a URL belongs to, by rules kept as data.

The rules are ``source_rules.toml`` next to this module (the precedence is documented there). A
corpus can override them: an explicit ``source_type`` in a document's metadata always wins, and
``SourceRules.with_hosts`` adds or replaces host entries for one corpus.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import get_args
from urllib.parse import urlsplit

from hifirag_core.config import SourceType

SOURCE_TYPES: tuple[str, ...] = get_args(SourceType)
UNKNOWN = "unknown"
RULES_PATH = files("hifirag_core.credibility").joinpath("source_rules.toml")  # shipped beside this module


class SourceRulesError(ValueError):
    """A rules file or an override names a type that does not exist or is malformed."""


@dataclass(frozen=True)
class PathRule:
    """A URL path shape, on one host (and its subdomains) or on any host when ``host`` is None."""

    pattern: re.Pattern[str]
    source_type: str
    host: str | None = None


@dataclass(frozen=True)
class SourceRules:
    """Host, suffix, host-prefix and path rules; see ``source_rules.toml`` for the precedence."""

    hosts: Mapping[str, str]
    suffixes: tuple[tuple[str, str], ...]  # (suffix, type), longest suffix first
    host_prefixes: Mapping[str, str]
    path_rules: tuple[PathRule, ...]

    def with_hosts(self, hosts: Mapping[str, str]) -> SourceRules:
        """A copy whose host table also maps these domains (a corpus-level override)."""
        merged = dict(self.hosts)
        for host, source_type in hosts.items():
            merged[_clean_host(host)] = _check_type(source_type, f"override for {host!r}")
        return SourceRules(merged, self.suffixes, self.host_prefixes, self.path_rules)

    def classify(self, url: str) -> str:
        """The source type of one URL by the rules alone (no metadata)."""
        host, path = _host_and_path(url)
        if not host:
            return UNKNOWN
        for rule in self.path_rules:
            if rule.host is not None and _under(host, rule.host) and rule.pattern.search(path):
                return rule.source_type
        labels = host.split(".")
        for start in range(len(labels)):  # the host itself first, then each parent: longest match wins
            listed = self.hosts.get(".".join(labels[start:]))
            if listed is not None:
                return listed
        for suffix, source_type in self.suffixes:
            if host.endswith(suffix) or host == suffix[1:]:  # gov.uk itself, not only *.gov.uk
                return source_type
        first_label = host.split(".", 1)[0]
        if first_label in self.host_prefixes and "." in host:
            return self.host_prefixes[first_label]
        for rule in self.path_rules:
            if rule.host is None and rule.pattern.search(path):
                return rule.source_type
        return UNKNOWN


def _check_type(value: object, where: str) -> str:
    if value not in SOURCE_TYPES:
        raise SourceRulesError(f"{where}: {value!r} is not a source type; use one of {', '.join(SOURCE_TYPES)}")
    return str(value)


def _clean_host(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("www.")


def _under(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def _host_and_path(url: str) -> tuple[str, str]:
    """Lower-cased host without ``www.`` or port, and the path; tolerant of a missing scheme."""
    text = url.strip()
    if not text:
        return "", "/"
    if "://" not in text:
        text = "//" + text.lstrip("/")
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
    except ValueError:
        return "", "/"
    return _clean_host(host), parts.path or "/"


def parse_rules(data: Mapping[str, object]) -> SourceRules:
    """Build rules from the parsed TOML structure, checking every type name."""
    hosts: dict[str, str] = {}
    for source_type, domains in _table(data, "hosts").items():
        _check_type(source_type, "[hosts]")
        for domain in _strings(domains, f"[hosts].{source_type}"):
            hosts[_clean_host(domain)] = source_type
    suffixes: list[tuple[str, str]] = []
    for source_type, values in _table(data, "suffixes").items():
        _check_type(source_type, "[suffixes]")
        suffixes.extend((s.lower() if s.startswith(".") else "." + s.lower(), source_type)
                        for s in _strings(values, f"[suffixes].{source_type}"))
    suffixes.sort(key=lambda pair: len(pair[0]), reverse=True)  # .gov.uk before .uk-wide rules
    prefixes: dict[str, str] = {}
    for source_type, values in _table(data, "host_prefixes").items():
        _check_type(source_type, "[host_prefixes]")
        prefixes.update({p.lower(): source_type for p in _strings(values, f"[host_prefixes].{source_type}")})
    rules: list[PathRule] = []
    raw_rules = data.get("path_rules", [])
    if not isinstance(raw_rules, list):
        raise SourceRulesError("[[path_rules]] must be an array of tables")
    for i, raw in enumerate(raw_rules):
        if not isinstance(raw, dict) or "pattern" not in raw or "type" not in raw:
            raise SourceRulesError(f"path rule {i}: needs 'pattern' and 'type'")
        source_type = _check_type(raw["type"], f"path rule {i}")
        try:
            pattern = re.compile(str(raw["pattern"]), re.IGNORECASE)
        except re.error as exc:
            raise SourceRulesError(f"path rule {i}: bad pattern {raw['pattern']!r}: {exc}") from None
        host = raw.get("host")
        rules.append(PathRule(pattern, source_type, _clean_host(str(host)) if host else None))
    return SourceRules(hosts, tuple(suffixes), prefixes, tuple(rules))


def _table(data: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SourceRulesError(f"[{key}] must be a table")
    return value


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SourceRulesError(f"{where} must be a list of strings")
    return list(value)


def load_rules(path: Path | None = None) -> SourceRules:
    """Rules from a TOML file; the packaged ``source_rules.toml`` by default."""
    if path is None:
        return _default_rules()
    with path.open("rb") as f:
        return parse_rules(tomllib.load(f))


@lru_cache(maxsize=1)
def _default_rules() -> SourceRules:
    with RULES_PATH.open("rb") as f:
        return parse_rules(tomllib.load(f))


def classify_source(url: str, explicit: str | None = None, rules: SourceRules | None = None) -> str:
    """The source type of a document: its explicit metadata type if given, else the URL rules."""
    if explicit:
        return _check_type(explicit, f"explicit source_type for {url!r}")
    return (rules or _default_rules()).classify(url)


def classify_sources(urls: Iterable[str], explicit: Iterable[str | None] | None = None,
                     rules: SourceRules | None = None) -> list[str]:
    """``classify_source`` over parallel sequences of URLs and optional explicit types."""
    url_list = list(urls)
    given = list(explicit) if explicit is not None else [None] * len(url_list)
    if len(given) != len(url_list):
        raise ValueError(f"{len(url_list)} URLs but {len(given)} explicit source types")
    return [classify_source(u, e, rules) for u, e in zip(url_list, given, strict=True)]
