"""The prose of a section's Markdown: what an extractive answer may quote as sentences."""

from __future__ import annotations

from hifirag_core.text import is_dependent, is_prose_sentence, markdown_blocks, prose_units

SECTION = """Tidewater keeps a journal of every sync. This can be a file path or a callable.

| Race | Pole position | Most laps led |
|---|---|---|
| 001 | Advan | Kobayashi |

```python
journal = open("sync.log")

journal.write("done")
```
This prints nothing.

- [Home](index.html)
- Install
- The --max-rate option limits the bandwidth a sync uses.
  It takes a rate such as 2M.

**tidewater.sync(source, target, *, max_rate=None)**

To rotate the journal, use the following command:

However, rotating is rarely needed.
The journal grows by one line per file. Race Pole position Most laps led Winning driver Manufacturer Report 001 ! Advan
"""


def test_blocks_keep_tables_code_lists_and_signatures_apart_from_paragraphs():
    kinds = [b.kind for b in markdown_blocks(SECTION)]
    assert kinds == ["paragraph", "table", "code", "paragraph", "list_item", "list_item", "list_item", "term",
                     "paragraph", "paragraph"]
    code = markdown_blocks(SECTION)[2].text
    assert code.startswith("```python") and 'journal.write("done")' in code  # a blank line inside stays inside


def test_an_unclosed_fence_runs_to_the_end_as_code():
    blocks = markdown_blocks("A real sentence is here.\n\n```\nx = 1\n\nSo this is code too.")
    assert [b.kind for b in blocks] == ["paragraph", "code"]


def test_prose_units_skip_tables_code_navigation_and_keep_dependent_sentences_with_their_antecedent():
    units = prose_units(SECTION)
    # a dependent sentence comes only with its antecedent; the antecedent may be taken alone too
    assert units == [
        ("Tidewater keeps a journal of every sync.",),
        ("Tidewater keeps a journal of every sync.", "This can be a file path or a callable."),
        ("The --max-rate option limits the bandwidth a sync uses.",),
        ("The --max-rate option limits the bandwidth a sync uses.", "It takes a rate such as 2M."),
        ("The journal grows by one line per file.",),
    ]
    flat = " ".join(s for unit in units for s in unit)
    for never in ("Pole position", "journal.write", "Home", "tidewater.sync(", "This prints nothing",
                  "use the following command", "However, rotating"):
        assert never not in flat, never


def test_prose_sentences_and_dependent_openings():
    assert is_prose_sentence("The journal grows by one line per file.")
    assert not is_prose_sentence("Race Pole position Most laps led Winning driver Manufacturer Report 001 !")
    assert not is_prose_sentence("os.path.join(a, *p) -> str.")
    assert not is_prose_sentence("Use the following command:")
    assert not is_prose_sentence("Too short.")
    for sentence in ("This can be a value or a callable.", "However, it is slow.", "For example, pass 2M.",
                     "It returns None.", "In this case the file is kept."):
        assert is_dependent(sentence), sentence
    for sentence in ("There are three modes.", "Tidewater keeps a journal.", "Italy is a country.",
                     "Thistle is a plant.", "It’s probably best to cite a book.", "It is possible to sync twice."):
        assert not is_dependent(sentence), sentence


def test_an_introducing_sentence_brings_its_short_list_or_quote_along():
    text = """For Win32, OSX and Linux, use this package:

> https://pypi.org/project/pyserial/

Tidewater supports three backends for its journal:

- sqlite: the default, one file per folder.
- postgres: a shared server.

These are the options you can set in a config file:

- one
- two
- three
- four
- five
- six
- seven
- eight
- nine
"""
    assert prose_units(text) == [
        ("For Win32, OSX and Linux, use this package:", "> https://pypi.org/project/pyserial/"),
        ("Tidewater supports three backends for its journal:",
         "- sqlite: the default, one file per folder.\n- postgres: a shared server."),
    ]  # a list of nine items is too long to quote: its introduction goes with it


def test_short_and_e_g_introductions_bring_their_code_and_are_never_sentences_alone():
    text = """In Python you write a single constructor with default arguments. For example:

```python
def __init__(self, i=None): ...
```

You could also try a variable-length argument list, e.g.

```python
def __init__(self, *args): ...
```

Or use several factory functions, e.g.
"""
    assert prose_units(text) == [
        ("In Python you write a single constructor with default arguments.",),
        ("In Python you write a single constructor with default arguments.", "For example:",
         "```python\ndef __init__(self, i=None): ...\n```"),
        ("You could also try a variable-length argument list, e.g.", "```python\ndef __init__(self, *args): ...\n```"),
    ]
