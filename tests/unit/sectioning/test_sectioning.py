"""Sectioning on small hand-written pages: structure, boilerplate, Markdown, bad input."""

from __future__ import annotations

import time

import pytest

import hifirag_core
from hifirag_core.config import SectioningConfig
from hifirag_core.records import SectionRecord
from hifirag_core.sectioning import ParsedPage, format_section_tree, parse_sections
from hifirag_core.sectioning.decoding import decode_html

URL = "https://example.org/docs/page.html"
CHROME = """
<header class="site-header"><a href="/">ExampleSite</a><nav><a href="/a">Alpha</a> <a href="/b">Beta</a></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. <button>Accept</button></div>
<aside class="sidebar"><h3>Related pages</h3><ul><li><a href="/x">Xylophone guide</a></li></ul></aside>
"""
FOOTER = """<footer><p>Copyright 2026 ExampleSite. <a href="/privacy">Privacy</a></p></footer>
<div class="nav-links"><a rel="prev" href="/p">Previous page</a> <a rel="next" href="/n">Next page</a></div>"""


def page(body: str, head: str = "<title>Example page</title>") -> bytes:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>".encode()


def parse(body: str, **kw) -> ParsedPage:
    return parse_sections(page(body), URL, **kw)


def test_imports_come_from_this_worktree() -> None:
    assert "hifirag_core" in hifirag_core.__file__


def test_heading_paths_levels_and_anchors() -> None:
    p = parse(CHROME + """<main><h1 id="top">Guide</h1><p>Intro text.</p>
        <h2 id="install">Install</h2><p>Run the installer.</p>
        <h3><a id="linux"></a>On Linux</h3><p>Use the package.</p>
        <h2>Usage</h2><span id="u"></span><p>Call it.</p></main>""" + FOOTER)
    assert p.status == "ok"
    got = [(s.heading_path, s.level, s.anchor) for s in p.sections]
    assert got == [
        (("Guide",), 1, "top"),
        (("Guide", "Install"), 2, "install"),
        (("Guide", "Install", "On Linux"), 3, "linux"),
        (("Guide", "Usage"), 2, None),
    ]
    assert [s.ord for s in p.sections] == [0, 1, 2, 3]
    assert p.sections[2].text == "Use the package."
    assert p.title == "Example page"


def test_boilerplate_never_reaches_a_section() -> None:
    p = parse(CHROME + "<main><h1>Guide</h1><p>Real content here.</p></main>" + FOOTER)
    text = " ".join(s.heading + " " + s.text for s in p.sections)
    for chrome in ("ExampleSite", "Alpha", "cookies", "Related pages", "Xylophone", "Copyright",
                   "Previous page", "Next page", "Accept"):
        assert chrome not in text
    assert "Real content here." in text


def test_structure_without_main_uses_text_mass_and_drops_header_headings() -> None:
    # the only h1 is the site name in the header; the article body is plain divs
    body = """<div id="hd"><h1><a href="/index.html">Site Docs 1.0</a></h1>
      <div class="menu"><a href="/a">Home</a> | <a href="/b">Index</a></div></div>
      <div id="bd"><div class="content"><h2>Real Title</h2>""" + "<p>Paragraph of content words.</p>" * 30 + """
      <h3>Detail</h3><p>More content.</p></div></div>"""
    p = parse(body)
    heads = [s.heading_path for s in p.sections]
    assert heads[0] == ("Real Title",)
    assert ("Real Title", "Detail") in heads
    assert all("Site Docs" not in h for path in heads for h in path)


def test_no_headings_gives_one_preamble_section() -> None:
    p = parse("<div><p>Just some text.</p><p>And more.</p></div>")
    assert [(s.heading_path, s.level, s.heading) for s in p.sections] == [((), 0, "")]
    assert p.sections[0].text == "Just some text.\n\nAnd more."


def test_headings_only_in_boilerplate_are_not_content() -> None:
    p = parse("""<nav><h2>Menu</h2><a href="/x">X</a></nav><aside class="sidebar"><h3>Tags</h3></aside>
        <div><p>The body has no heading of its own.</p></div>""")
    assert [s.heading for s in p.sections] == [""]
    assert "Menu" not in p.sections[0].text


def test_skipped_levels_keep_the_path_without_gaps() -> None:
    p = parse("<main><h1>Top</h1><p>a</p><h4>Deep</h4><p>b</p><h2>Next</h2><p>c</p></main>")
    got = [(s.heading_path, s.level) for s in p.sections]
    assert got == [(("Top",), 1), (("Top", "Deep"), 4), (("Top", "Next"), 2)]


def test_outline_starting_at_h2_is_shifted_and_h5_becomes_bold_text() -> None:
    p = parse("<main><h2>Title</h2><p>a</p><h3>Sub</h3><p>b</p><h4>Subsub</h4><p>c</p>"
              "<h5>Tiny</h5><p>d</p></main>")
    # h2..h5 read as levels 1..4: the h5 is a heading because the outline starts one level down
    assert [(s.heading_path, s.level) for s in p.sections][-1] == (("Title", "Sub", "Subsub", "Tiny"), 4)
    p = parse("<main><h1>T</h1><h2>A</h2><h3>B</h3><h4>C</h4><p>x</p><h5>Tiny</h5><p>d</p></main>")
    last = p.sections[-1]
    assert last.heading == "C" and "**Tiny**" in last.text and "d" in last.text


def test_pseudo_headings_div_class_and_role() -> None:
    p = parse("""<main><div class="h1">Manual</div><p>a</p><div class="h2">Setup</div><p>b</p>
        <div role="heading" aria-level="3">Details</div><p>c</p></main>""")
    assert [s.heading_path for s in p.sections] == [("Manual",), ("Manual", "Setup"), ("Manual", "Setup", "Details")]


def test_page_title_block_puts_real_headings_under_it() -> None:
    p = parse("""<div class="fancy"><div class="fancy_title">The Amalgamation</div>
        <h1>1. Summary</h1><p>a</p><h2>1.1 More</h2><p>b</p></div>""")
    assert [(s.heading_path, s.level) for s in p.sections] == [
        (("The Amalgamation", "1. Summary"), 2), (("The Amalgamation", "1. Summary", "1.1 More"), 3)]


def test_bold_lines_are_headings_only_on_pages_without_headings() -> None:
    p = parse("<div><p><strong>Installation</strong></p><p>Step one.</p>"
              "<p><b>Configuration</b></p><p>Edit the file.</p></div>")
    assert [(s.heading, s.text) for s in p.sections] == [("Installation", "Step one."),
                                                         ("Configuration", "Edit the file.")]
    p = parse("<main><h1>Real</h1><p><strong>Not a heading</strong></p><p>text</p></main>")
    assert [s.heading for s in p.sections] == ["Real"]
    assert "**Not a heading**" not in p.sections[0].text and "Not a heading" in p.sections[0].text


def test_markdown_rendering_of_lists_tables_code_and_links() -> None:
    p = parse("""<main><h1>R</h1>
      <p>See <a href="https://x.org">the docs</a> now.<br>Second line.</p>
      <ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul>
      <ol start="3"><li>three</li><li><p>four</p><p>more</p></li></ol>
      <table><thead><tr><th>Name</th><th>Value</th></tr></thead>
        <tbody><tr><td>a|b</td><td colspan="1">1</td></tr><tr><td>c</td></tr></tbody></table>
      <div class="highlight-python3"><pre>def f():
    return 1
</pre></div>
      <blockquote><p>Quoted</p></blockquote>
      <dl><dt>term</dt><dd>definition</dd></dl></main>""")
    text = p.sections[0].text
    assert "See the docs now.\nSecond line." in text and "https://x.org" not in text
    assert "- one\n- two\n  - nested" in text
    assert "3. three\n4. four\n   more" in text
    assert "| Name | Value |\n|---|---|\n| a\\|b | 1 |\n| c |  |" in text
    assert "```python3\ndef f():\n    return 1\n```" in text
    assert "> Quoted" in text
    assert "**term**\n\ndefinition" in text


def test_huge_section_is_split_at_paragraphs_with_the_path_repeated() -> None:
    paras = "".join(f"<p>Paragraph {i} " + "word " * 60 + "</p>" for i in range(40))
    p = parse(f"<main><h1>Big</h1>{paras}<h2>After</h2><p>tail</p></main>",
              config=SectioningConfig(max_section_chars=1000))
    big = [s for s in p.sections if s.heading == "Big"]
    assert len(big) > 5
    assert all(s.n_chars <= 1000 and s.heading_path == ("Big",) for s in big)
    assert all(s.text.startswith("Paragraph") for s in big)  # cut at paragraph boundaries
    assert len({s.section_id for s in p.sections}) == len(p.sections)
    assert p.sections[-1].heading_path == ("Big", "After")


def test_one_huge_paragraph_and_code_block_are_cut_too() -> None:
    sentence = "This is a sentence of moderate length. "
    code = "\n".join(f"line_{i} = {i}" for i in range(400))
    p = parse(f"<main><h1>H</h1><p>{sentence * 200}</p><pre>{code}</pre></main>",
              config=SectioningConfig(max_section_chars=800))
    assert all(s.n_chars <= 800 for s in p.sections)
    code_parts = [s.text for s in p.sections if "line_" in s.text]
    assert len(code_parts) > 3 and all(t.startswith("```") and t.endswith("```") for t in code_parts)


def test_ids_are_stable_and_depend_on_url_and_path() -> None:
    html = page("<main><h1>A</h1><p>x</p><h2>B</h2><p>y</p></main>")
    one, two = parse_sections(html, URL), parse_sections(html, URL)
    assert [s.section_id for s in one.sections] == [s.section_id for s in two.sections]
    other = parse_sections(html, URL + "?v=2")
    assert {s.section_id for s in one.sections}.isdisjoint(s.section_id for s in other.sections)
    # an edit in one section does not change the id of another
    edited = parse_sections(page("<main><h1>A</h1><p>changed</p><h2>B</h2><p>y</p></main>"), URL)
    assert edited.sections[1].section_id == one.sections[1].section_id


def test_sections_map_one_to_one_onto_the_warehouse_record() -> None:
    s = parse("<main><h1>A</h1><p>x y</p></main>").sections[0]
    rec = SectionRecord(url=URL, section_id=s.section_id, ord=s.ord, heading_path=list(s.heading_path),
                        heading=s.heading, level=s.level, anchor=s.anchor, text=s.text,
                        n_chars=s.n_chars, n_words=s.n_words)
    assert (rec.n_chars, rec.n_words) == (3, 2)


@pytest.mark.parametrize(
    ("data", "status"),
    [(b"", "empty"), (b"   \n\t ", "empty"), (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3 binary", "binary"),
     (bytes(range(256)) * 40, "binary"), (b"<html><body><script>x()</script></body></html>", "no_text")],
)
def test_unreadable_input_gives_a_status_not_an_exception(data: bytes, status: str) -> None:
    p = parse_sections(data, URL)
    assert (p.status, p.sections) == (status, ())
    assert p.error


def test_too_large_page_is_refused_quickly() -> None:
    data = b"<html><body>" + b"<p>x</p>" * (6_500_000) + b"</body></html>"  # ~52 MB
    t0 = time.process_time()
    p = parse_sections(data, URL)
    assert p.status == "too_large" and "max_html_bytes" in (p.error or "")
    assert time.process_time() - t0 < 1.0


def test_deep_nesting_and_broken_markup_parse() -> None:
    deep = "<div>" * 10_000 + "<h2>Deep</h2><p>bottom text</p>" + "</div>" * 10_000
    p = parse(deep)
    assert p.status == "ok" and any("bottom text" in s.text for s in p.sections)
    lists = "<ul><li>" * 3000 + "leaf" + "</li></ul>" * 3000
    assert parse(f"<main><h1>L</h1>{lists}</main>").status == "ok"
    broken = "<main><h1>Broken <p>para <b>bold <table><tr><td>cell</div></span><h2>Two</h1><p>end"
    p = parse(broken)
    assert p.status == "ok" and "end" in " ".join(s.text for s in p.sections)


def test_charset_declared_meta_and_wrong_one() -> None:
    text = "Café naïve Ünïcode"
    latin = page(f"<main><h1>T</h1><p>{text}</p></main>").decode().encode("latin-1")
    assert parse_sections(latin, URL, encoding="iso-8859-1").sections[0].text == text
    meta = page(f"<main><h1>T</h1><p>{text}</p></main>", head='<meta charset="windows-1252">').decode()
    assert parse_sections(meta.encode("cp1252"), URL).sections[0].text == text
    # a header that says UTF-8 over Latin-1 bytes: the strict decode fails and cp1252 reads it
    assert parse_sections(latin, URL, encoding="utf-8").sections[0].text == text
    # a header that says Latin-1 over UTF-8 bytes: valid UTF-8 wins over mojibake
    utf8 = page(f"<main><h1>T</h1><p>{text}</p></main>")
    assert parse_sections(utf8, URL, encoding="iso-8859-1").sections[0].text == text
    # an unknown charset name is ignored
    assert parse_sections(utf8, URL, encoding="x-no-such-charset").sections[0].text == text
    cyr = "<main><h1>T</h1><p>Привет мир</p></main>"
    assert parse_sections(page(cyr, '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">')
                          .decode().encode("cp1251"), URL).sections[0].text == "Привет мир"
    assert decode_html("hi".encode("utf-16")).text == "hi"  # the BOM says UTF-16


def test_edges_drop_link_lists_and_footer_lines_but_keep_content_links() -> None:
    p = parse("""<div><ul><li><a href="/1">One</a></li><li><a href="/2">Two</a></li></ul>
        <h2>Topic</h2><p>Text.</p><ul><li><a href="/opt1">-DOPTION_ONE</a></li><li><a href="/opt2">-DOPTION_TWO</a></li></ul>
        <p>Closing words of the article.</p>
        <p><small>This page last modified on 2022-08-10</small></p></div>""")
    text = " ".join(s.text for s in p.sections)
    assert "One" not in text and "last modified" not in text
    assert "-DOPTION_ONE" in text  # a list of links inside the content is content


def test_format_section_tree_shows_the_outline() -> None:
    p = parse("<main><h1 id='a'>A</h1><p>alpha text</p><h2>B</h2><p>beta</p></main>")
    tree = format_section_tree(p)
    lines = tree.splitlines()
    assert lines[0].startswith("Example page") and "status: ok, 2 sections" in lines[1]
    assert "h1 A #a" in tree and "  h2 B" in tree and "alpha text" in tree
    assert "status: empty" in format_section_tree(parse_sections(b"", URL))
    framed = format_section_tree(parse("<main><h1>Top</h1><h2>Mid</h2><h3>Leaf</h3><p>x</p></main>"))
    assert framed.splitlines()[2:5] == ["§ Top", "  § Mid", "    h3 Leaf  [1 words]"]


def test_short_page_content_beside_a_sidebar_survives() -> None:
    # the wrapper that held the sidebar keeps only a few words: it is the content, not residue
    p = parse("""<div class="document"><div class="sphinxsidebar" role="navigation"><h3>Navigation</h3>
        <ul><li><a href="/a">Alpha</a></li><li><a href="/b">Beta</a></li><li><a href="/c">Gamma</a></li></ul></div>
        <div class="body" role="main"><p>Availability: not WASI.</p></div></div>""")
    assert [s.text for s in p.sections] == ["Availability: not WASI."]
    p = parse("""<div class="wrap"><nav><a href="/a">Alpha</a> <a href="/b">Beta</a></nav>
        <p>Only a short note here.</p></div>""")
    assert [s.text for s in p.sections] == ["Only a short note here."]


def test_a_tagline_left_beside_a_removed_menu_goes_with_it() -> None:
    p = parse("""<div class="top"><img src="logo.png" alt="Logo"><div class="tagline">Small. Fast.</div>
        <div class="menu"><ul><li><a href="/">Home</a></li><li><a href="/d">Docs</a></li></ul></div></div>
        <h2>Topic</h2><p>Real words about the topic.</p>""")
    text = " ".join(s.heading + " " + s.text for s in p.sections)
    assert "Small. Fast." not in text and "Real words" in text


def test_element_matching_several_chrome_selectors_is_removed_once() -> None:
    # class + role + id all match the candidate query: lexbor returns the node once per selector
    body = ('<div class="sidebar nav" id="sidebar" role="navigation" hidden><p>chrome</p></div>'
            '<div class="body" role="main" id="main"><h1>T</h1><p>content</p></div>')
    for _ in range(50):  # a double free would show up as a crash or a corrupted tree
        p = parse(body)
        assert [(s.heading, s.text) for s in p.sections] == [("T", "content")]


def test_nesting_too_deep_to_parse_in_bounded_time_is_refused() -> None:
    deep = b"<html><body>" + b"<div>" * 40_000 + b"x" + b"</div>" * 40_000
    t0 = time.process_time()
    p = parse_sections(deep, URL)
    assert p.status == "too_deep" and "max_nesting_work" in (p.error or "")
    assert time.process_time() - t0 < 1.0
    many_unclosed_items = b"<html><body><ul>" + b"<li>item" * 30_000 + b"</ul>"
    assert parse_sections(many_unclosed_items, URL).status == "ok"  # <li> closes itself


def test_an_unclosed_list_that_swallowed_the_page_is_walked_as_structure() -> None:
    # an unclosed <li> holds a <dl> that holds the rest of the page's h2 sections
    p = parse("<h1>API</h1><ul><li>intro<dl><dt>x</dt><dd>y</dd><h2>First call</h2><p>one</p>"
              "<h2>Second call</h2><p>two</p></dl>")
    paths = [s.heading_path for s in p.sections]
    assert ("API", "First call") in paths and ("API", "Second call") in paths
    # an h3 label inside a definition stays a bold line in its section
    p = parse("<main><h2>Options</h2><dl><dt>-v</dt><dd><div><h3>Note</h3><p>careful</p></div></dd></dl></main>")
    assert [s.heading for s in p.sections] == ["Options"] and "**Note**" in p.sections[0].text


def test_headings_inside_unknown_elements_are_found() -> None:
    # "<language-id>" left unescaped in the text becomes an element wrapping the rest of the page
    p = parse("<main><h1>FTS</h1><p>use the <language-id> column</p><h2>Limits</h2><p>few</p></main>")
    assert ("FTS", "Limits") in [s.heading_path for s in p.sections]
