"""Backends in one word, and a user's own settings file; the one way every command builds its config.

A profile names the backends (``--profile gemini``), shared by ``hifirag run``, ``eval``, ``doctor``,
``serve`` and the deployments. ``openai`` and ``llama-cpp`` take the server's model and URL in the same
word: ``--profile llama-cpp:local@http://127.0.0.1:8080/v1``.

The config file (TOML; ``--config PATH`` or ``$HIFIRAG_CONFIG``) holds a user's settings: any section of
the pipeline config, the profile to use when a command names none, and profiles of one's own::

    profile = "box"                      # the default profile of every command

    [steer]
    exclude_sites = ["pinterest.com"]

    [profiles.box]                       # a profile of one's own: a built-in one and more settings
    extends = "llama-cpp:gemma@http://127.0.0.1:8080/v1"
    [profiles.box.models]
    writer_max_tokens = 400

Precedence, lowest first: the defaults, the config file, the profile, the variant's switches, ``--set``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hifirag_core.config import ConfigError, PipelineConfig, build_config, parse_overrides

CONFIG_ENV = "HIFIRAG_CONFIG"


@dataclass(frozen=True)
class Profile:
    """A named set of backends; ``takes_model``: written ``NAME:MODEL@URL`` (an OpenAI-compatible server)."""

    name: str
    summary: str
    settings: tuple[str, ...]
    takes_model: bool = False


_OPENAI = ("backends.filter_llm=openai", "backends.writer_llm=openai")
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("offline", "the local corpus as the web and the offline models: no keys, no network", ()),
    Profile("gemini", "the paper's system: Gemini 2.5 Flash filters, 2.5 Pro writes, Google search, direct crawling",
            ("backends.filter_llm=gemini", "backends.writer_llm=gemini", "backends.search=google",
             "backends.fetch=http")),
    Profile("openai", "an OpenAI-compatible server for both model roles (vLLM, Ollama, OpenAI) over the local "
            "corpus; openai:MODEL@URL", _OPENAI, takes_model=True),
    # the writer does not stream: llama-cpp-python's server sends no usage in a stream, and its calls' tokens
    # (and a token budget) would go uncounted
    Profile("llama-cpp", "a llama.cpp server (llama-cpp-python) for both model roles over the local corpus: its "
            "JSON format, one question at a time, temperature 0, the writer not streamed; llama-cpp:MODEL@URL",
            (*_OPENAI, "models.openai_response_format=json_object_schema", "limits.concurrency=1",
             "models.temperature=0", "limits.stream_writer=false"), takes_model=True),
    # no key anywhere: DuckDuckGo (or a SearXNG instance) finds the pages, they are read directly, and a local
    # OpenAI-compatible server (Ollama, llama.cpp, vLLM) filters and writes
    Profile("free-web", "no keys, the real web: DuckDuckGo search (SearXNG: --set backends.search=searxng --set "
            "backends.searxng_url=URL), direct crawling, an OpenAI-compatible local model server; free-web:MODEL@URL",
            ("backends.search=duckduckgo", "backends.fetch=http", *_OPENAI), takes_model=True),
    # MMU-RAGent's own search: its documents come with their text, so only other URLs are crawled
    Profile("mmu-ragent", "MMU-RAGent's FineWeb search (documents carried as text; ClueWeb22: --set "
            "backends.search=clueweb22-b and CLUEWEB_API_KEY) with Gemini 2.5 Flash and Pro",
            ("backends.filter_llm=gemini", "backends.writer_llm=gemini", "backends.search=fineweb",
             "backends.fetch=http")),
)}


@dataclass(frozen=True)
class ConfigFile:
    """A user's settings file, read and checked (``path`` None: there is none)."""

    path: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    profile: str | None = None
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_config_file(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> ConfigFile:
    """The config file at ``path``, else at ``$HIFIRAG_CONFIG``, else none; a bad file is a ``ConfigError``."""
    env = os.environ if env is None else env
    chosen = path or env.get(CONFIG_ENV) or None
    if chosen is None:
        return ConfigFile()
    where = Path(chosen).expanduser()
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {where}: not found (from {'--config' if path else '$' + CONFIG_ENV})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {where}: not valid TOML ({exc})") from None
    sections = set(PipelineConfig.model_fields) - {"variant"}
    unknown = sorted(set(data) - sections - {"profile", "profiles"})
    if unknown:
        raise ConfigError(f"config file {where}: unknown key(s) {', '.join(unknown)}; the keys are profile, "
                          f"profiles and the config's sections: {', '.join(sorted(sections))}")
    profile = data.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise ConfigError(f"config file {where}: profile must be a string such as \"gemini\"")
    profiles = data.get("profiles") or {}
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        raise ConfigError(f"config file {where}: [profiles.NAME] tables, one per profile")
    clash = sorted(set(profiles) & set(PROFILES))
    if clash:
        raise ConfigError(f"config file {where}: profile {clash[0]!r} is built in; name yours otherwise")
    settings = {k: v for k, v in data.items() if k in sections}
    loaded = ConfigFile(where, settings, profile, profiles)
    try:  # checked now, so a bad file fails before any work
        build_config(layers=[settings])
        for name in profiles:
            profile_settings(name, loaded)
    except ConfigError as exc:
        raise ConfigError(f"config file {where}: {exc}") from None
    return loaded


def profile_settings(spec: str, file: ConfigFile = ConfigFile()) -> dict[str, Any]:
    """The settings a profile stands for (nested, as ``--set`` pairs parse), from its name or
    ``NAME:MODEL@URL``; a profile of the config file's may extend a built-in one."""
    name, _, argument = spec.partition(":")
    name = name.strip()
    if name in file.profiles:
        own = dict(file.profiles[name])
        base = own.pop("extends", None)
        if argument:
            raise ConfigError(f"profile {name!r} is the config file's: it takes no MODEL@URL")
        if base is not None and (not isinstance(base, str) or base.partition(":")[0] in file.profiles):
            raise ConfigError(f"profile {name!r}: extends must name a built-in profile ({', '.join(PROFILES)})")
        return _merge(profile_settings(base) if base else {}, own)
    if name not in PROFILES:
        known = [*PROFILES, *file.profiles]
        raise ConfigError(f"unknown profile {name!r}; profiles: {', '.join(known)}")
    profile = PROFILES[name]
    pairs = list(profile.settings)
    if argument:
        if not profile.takes_model:
            raise ConfigError(f"profile {name!r} takes no MODEL@URL (only {', '.join(p for p in PROFILES if PROFILES[p].takes_model)} do)")
        model, at, url = argument.rpartition("@") if "@" in argument else (argument, "", "")
        if not model.strip():
            raise ConfigError(f"profile {spec!r}: write {name}:MODEL@URL, e.g. {name}:qwen2.5:7b@http://127.0.0.1:11434/v1")
        pairs += [f"models.filter={model.strip()}", f"models.writer={model.strip()}"]
        if at:
            if not url.strip().startswith(("http://", "https://")):
                raise ConfigError(f"profile {spec!r}: the server's URL must start with http:// or https://")
            pairs.append(f"models.openai_base_url={url.strip()}")
            if "api.openai.com" not in url:  # local servers accept any key
                pairs.append("models.openai_api_key_optional=true")
    return parse_overrides(pairs)


def _merge(base: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in more.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def resolve_config(*, variant: str | None = None, variant_settings: dict[str, Any] | None = None,
                   overrides: list[str] | tuple[str, ...] = (), profile: str | None = None,
                   config_file: str | Path | None = None, base: dict | None = None,
                   file: ConfigFile | None = None) -> PipelineConfig:
    """The config of a command: the defaults (or ``base``), then the config file, then the profile (the
    command's, else the file's), then the variant's switches (``variant_settings``), then ``--set``;
    validated once."""
    file = file if file is not None else load_config_file(config_file)
    chosen = profile or file.profile
    layers = [file.settings, profile_settings(chosen, file) if chosen else {}]
    return build_config(variant_settings, parse_overrides(list(overrides)), variant=variant, base=base, layers=layers)
