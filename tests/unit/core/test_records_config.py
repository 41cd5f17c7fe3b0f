from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from hifirag_core.config import ConfigError, build_config, parse_overrides
from hifirag_core.pipeline.variants import variant_overrides
from hifirag_core.records import (
    RECORD_TYPES,
    AnswerRecord,
    PageRecord,
    SectionRecord,
    arrow_schema,
    content_row,
    to_table,
)
from hifirag_core.records.tables import TABLES


def test_every_table_has_the_shared_columns_and_an_arrow_schema():
    expected = {"runs", "questions", "query_plans", "search_results", "url_decisions", "pages", "sections",
                "section_decisions", "drafts", "answers", "citations", "llm_calls", "scores", "stage_runs"}
    assert expected <= set(TABLES)
    for cls in RECORD_TYPES:
        names = arrow_schema(cls).names
        assert names[:6] == ["run_id", "question_id", "stage", "round", "status", "error"], cls


def test_arrow_types_follow_the_type_hints():
    schema = arrow_schema(SectionRecord)
    assert schema.field("heading_path").type == pa.list_(pa.string())
    assert schema.field("level").type == pa.int64()
    assert arrow_schema(PageRecord).field("fetched_at").type == pa.timestamp("us", tz="UTC")


def test_to_table_stamps_constants_without_changing_the_records():
    rec = AnswerRecord(text="x", cited_urls=["u1"])
    table = to_table([rec], AnswerRecord, run_id="r1", question_id="q1")
    assert table.column("run_id").to_pylist() == ["r1"]
    assert rec.run_id == "" and rec.question_id == ""


def test_content_row_ignores_when_and_where_a_row_was_made():
    a = PageRecord(url="u", content_sha256="abc", run_id="r1")
    b = dataclasses.replace(a, run_id="r2", fetched_at=None)
    assert content_row(a) == content_row(b)
    assert content_row(a) != content_row(dataclasses.replace(a, content_sha256="def"))


def test_overrides_parse_json_values_and_plain_strings():
    nested = parse_overrides(["url_filter.max_urls=4", "models.writer=gemini-2.5-flash", "citations.enabled=false",
                              'corpus.exclude=["a/*"]'])
    cfg = build_config(overrides=nested)
    assert cfg.url_filter.max_urls == 4
    assert cfg.models.writer == "gemini-2.5-flash"
    assert cfg.citations.enabled is False
    assert cfg.corpus.exclude == ("a/*",)


@pytest.mark.parametrize("pair, message", [
    ("url_filter.max_url=4", "url_filter.max_url"),
    ("url_filter.max_urls=many", "url_filter.max_urls"),
    ("nonsense", "key=value"),
])
def test_bad_overrides_name_the_field(pair, message):
    with pytest.raises(ConfigError, match=message):
        build_config(overrides=parse_overrides([pair]))


def test_config_slices_and_fingerprints():
    base = build_config()
    changed = build_config(overrides=parse_overrides(["section_rank.max_sections_total=3"]))
    assert base.slice("url_filter") == changed.slice("url_filter")
    assert base.slice("section_rank") != changed.slice("section_rank")
    assert base.fingerprint() == build_config().fingerprint() != changed.fingerprint()


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ConfigError, match="final"):
        variant_overrides("no-such-variant")
