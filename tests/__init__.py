"""HiFi-RAG's tests: offline, deterministic, with fakes of every external service on 127.0.0.1."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout the tests run from
SUPPORT = PROJECT_ROOT / "tests" / "support"  # the fakes, fixtures and helpers the tests share
