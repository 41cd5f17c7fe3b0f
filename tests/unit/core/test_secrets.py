"""Secrets: one place, never printed or serialized, missing ones named."""

from __future__ import annotations

import copy
import json
import logging
import pickle

import pytest

from hifirag_core.backends.factory import check_secrets, required_secrets
from hifirag_core.config import build_config
from hifirag_core.errors import MissingSecretError
from hifirag_core.hashing import stable_hash
from hifirag_core.secrets import SECRETS, RedactingFilter, Secret, get_secret, optional_secret, redact

KEY = "AIzaSy-test-secret-value-123"


def test_secret_never_shows_its_value() -> None:
    s = Secret("GEMINI_API_KEY", KEY)
    percent = "%s" % (s,)  # noqa: UP031  (old-style formatting must not leak either)
    for text in (repr(s), str(s), f"{s}", f"{s!r:>40}", percent, str([s]), str({"k": s})):
        assert KEY not in text and "****" in text
    assert s.reveal() == KEY and s.name == "GEMINI_API_KEY"


def test_secret_refuses_to_serialize() -> None:
    s = Secret("GEMINI_API_KEY", KEY)
    with pytest.raises(TypeError):
        pickle.dumps(s)
    with pytest.raises(TypeError):
        json.dumps({"key": s})
    with pytest.raises(TypeError):
        stable_hash({"key": s})  # cache keys cannot swallow a secret either
    with pytest.raises(AttributeError):
        s._value = "other"  # type: ignore[misc]
    assert copy.deepcopy(s) is s
    assert KEY not in str(hash(s))


def test_lookup_and_missing_variable_is_named() -> None:
    env = {"GOOGLE_API_KEY": KEY}
    assert get_secret("gemini_api_key", env).name == "GOOGLE_API_KEY"
    assert get_secret("gemini_api_key", {"GEMINI_API_KEY": "a" * 10, "GOOGLE_API_KEY": KEY}).name == "GEMINI_API_KEY"
    with pytest.raises(MissingSecretError, match="SCRAPINGDOG_API_KEY"):
        get_secret("scrapingdog_api_key", {"SCRAPINGDOG_API_KEY": "   "})
    assert optional_secret("openai_api_key", {}) is None


def test_one_place_names_every_variable() -> None:
    from hifirag_core.backend_registry import BACKENDS

    names = {v for spec in SECRETS.values() for v in spec.env}
    # the backends' rows bring their own keys: a new provider's key is registered by its row alone
    row_keys = {v for b in BACKENDS for k in b.keys for v in k.env}
    assert row_keys >= {"BRAVE_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "CLUEWEB_API_KEY", "GOOGLE_CSE_KEY"}
    assert names == row_keys | {"GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "REDDIT_CLIENT_ID",
                                "REDDIT_CLIENT_SECRET", "HIFIRAG_SERVICE_TOKEN"}


def test_check_secrets_lists_every_missing_variable_for_the_selected_backends() -> None:
    cfg = build_config(overrides={"backends": {"filter_llm": "gemini", "writer_llm": "openai", "search": "google",
                                               "fetch": "scrapingdog", "reddit": "praw"}})
    assert required_secrets(cfg) == ["gemini_api_key", "openai_api_key", "google_cse_key", "google_cse_id",
                                     "scrapingdog_api_key", "reddit_client_id", "reddit_client_secret"]
    with pytest.raises(MissingSecretError) as info:
        check_secrets(cfg, {"GEMINI_API_KEY": KEY})
    message = str(info.value)
    for var in ("OPENAI_API_KEY", "GOOGLE_CSE_KEY", "GOOGLE_CSE_ID", "SCRAPINGDOG_API_KEY", "REDDIT_CLIENT_ID"):
        assert var in message
    assert "GEMINI_API_KEY or" not in message
    check_secrets(build_config(), {})  # the offline default needs nothing


def test_redact_scrubs_values_that_were_read() -> None:
    secret = get_secret("google_cse_key", {"GOOGLE_CSE_KEY": "cse-key-0123456789"})
    url = f"https://www.googleapis.com/customsearch/v1?key={secret.reveal()}&q=x"
    assert redact(url) == "https://www.googleapis.com/customsearch/v1?key=****&q=x"
    assert redact(None) is None


def test_log_filter_scrubs_http_client_records(caplog: pytest.LogCaptureFixture) -> None:
    secret = get_secret("scrapingdog_api_key", {"SCRAPINGDOG_API_KEY": "sd-key-abcdef123456"})
    logger = logging.getLogger("test.redaction")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logger.info('HTTP Request: GET %s "HTTP/1.1 200 OK"', f"https://api.scrapingdog.com/scrape?api_key={secret.reveal()}")
    assert secret.reveal() not in caplog.text and "api_key=****" in caplog.text
