"""Every secret the pipeline reads, in one place, and a value type that will not leak.

Secrets come only from environment variables. A :class:`Secret` never prints, formats, pickles,
copies into JSON or hashes its value; code that must send it calls :meth:`Secret.reveal` at the
last moment. Values that were read are remembered so that :func:`redact` can scrub them from
error messages (an HTTP error's URL can carry an API key in its query string), and
:func:`install_log_redaction` adds the same scrubbing to the loggers of the HTTP libraries.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from hifirag_core.backend_registry import all_keys
from hifirag_core.errors import MissingSecretError

REDACTED = "****"


@dataclass(frozen=True)
class SecretSpec:
    """One credential: the variables that may hold it (first set wins) and what it is for."""

    name: str
    env: tuple[str, ...]
    purpose: str


# The conventional names: the Gemini SDK reads GEMINI_API_KEY (or GOOGLE_API_KEY), the openai
# client OPENAI_API_KEY; the search and fetch backends' keys (the Scrapingdog SDK's SCRAPINGDOG_API_KEY,
# the Custom Search key under its own name because GOOGLE_API_KEY already means the Gemini key here)
# are in their rows of the backends table.
SECRETS: dict[str, SecretSpec] = {
    s.name: s
    for s in (
        SecretSpec("gemini_api_key", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "Gemini API (filter/writer models)"),
        SecretSpec("openai_api_key", ("OPENAI_API_KEY",), "OpenAI-compatible chat completions"),
        SecretSpec("reddit_client_id", ("REDDIT_CLIENT_ID",), "Reddit OAuth app (script or web) id"),
        SecretSpec("reddit_client_secret", ("REDDIT_CLIENT_SECRET",), "Reddit OAuth app secret"),
        SecretSpec("service_token", ("HIFIRAG_SERVICE_TOKEN",),
                   "the token `hifirag serve` requires beyond loopback (docs/serving.md)"),
    )
}
# The search and fetch backends declare their own keys in their rows (hifirag_core.backend_registry).
for _key in all_keys():
    SECRETS.setdefault(_key.name, SecretSpec(_key.name, _key.env, _key.purpose))
# Not secret, but read from the environment next to the Reddit credentials.
REDDIT_USER_AGENT_ENV = "REDDIT_USER_AGENT"

_seen_lock = threading.Lock()
_seen_values: set[str] = set()


class Secret:
    """A credential value that refuses to be printed, serialized or pickled."""

    __slots__ = ("_name", "_value")

    def __init__(self, name: str, value: str):
        if not value:
            raise ValueError(f"secret {name} is empty")
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_value", value)
        # Short values would make redaction replace ordinary text; real keys are long.
        if len(value) >= 6:
            with _seen_lock:
                _seen_values.add(value)

    @property
    def name(self) -> str:
        """The environment variable the value came from."""
        return self._name

    def reveal(self) -> str:
        """The raw value, for the one call that sends it."""
        return self._value

    def __setattr__(self, key: str, value: Any) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def __repr__(self) -> str:
        return f"Secret({self._name}={REDACTED})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")

    def __getstate__(self) -> NoReturn:
        raise TypeError("a Secret cannot be serialized")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self._name == other._name and self._value == other._value

    def __hash__(self) -> int:
        # The value never enters a hash (hashes end up in cache keys and logs).
        return hash(("Secret", self._name))

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> NoReturn:
        raise TypeError("a Secret has no length")


def get_secret(name: str, env: Mapping[str, str] | None = None) -> Secret:
    """The named secret from the environment; ``MissingSecretError`` names the variable to set."""
    spec = SECRETS[name]
    environ = os.environ if env is None else env
    for var in spec.env:
        value = environ.get(var, "").strip()
        if value:
            return Secret(var, value)
    names = " or ".join(spec.env)
    raise MissingSecretError(f"{spec.purpose}: set the environment variable {names}")


def optional_secret(name: str, env: Mapping[str, str] | None = None) -> Secret | None:
    """The named secret, or None when no variable holds it."""
    try:
        return get_secret(name, env)
    except MissingSecretError:
        return None


def redact(text: str | None) -> str | None:
    """``text`` with every secret value read so far replaced by ``****``."""
    if not text:
        return text
    with _seen_lock:
        values = sorted(_seen_values, key=len, reverse=True)
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """Scrubs secret values from a log record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not fit its format: leave it to logging
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


# httpx logs every request URL at INFO; the Custom Search and Scrapingdog APIs take their key in
# the query string, so without this an INFO log level would print keys.
_REDACTED_LOGGERS = ("httpx", "httpcore", "httpx2", "openai", "google_genai", "prawcore", "praw", "urllib3", "requests",
                     "tavily", "exa_py", "ddgs", "primp")
_installed = False


def install_log_redaction() -> None:
    """Add :class:`RedactingFilter` to the HTTP client loggers (idempotent)."""
    global _installed
    with _seen_lock:
        if _installed:
            return
        _installed = True
    for name in _REDACTED_LOGGERS:
        logging.getLogger(name).addFilter(RedactingFilter())
