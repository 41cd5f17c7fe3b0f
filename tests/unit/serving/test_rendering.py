"""Answers rendered as people read them, safely: the Markdown renderer of the pages and the rendered stream."""

from __future__ import annotations

import json
import re

import pytest

from hifirag_core.pipeline.runner import question_depth
from hifirag_core.questions import Question
from hifirag_core.serving.contract import (
    BadRequest,
    EvaluateRequest,
    RunRequest,
    StreamMessage,
    check_messages,
    parse_request,
)
from hifirag_core.serving.rendering import LedgerSentence, render_answer, render_markdown, sanitise, with_html
from hifirag_core.text import split_sentences

URLS = [
    "https://docs.python.org/3/howto/sorting.html",
    "https://docs.python.org/3/tutorial/datastructures.html",
]
ANSWER = """Sort the list in place with `mylist.sort()`, then take its last item.

```python3
if mylist:
    mylist.sort()
    last = mylist[-1]
```

> An empty list has no last item.

- Use `sorted(mylist)` to keep the original order.
- See [the sorting HOWTO](https://docs.python.org/3/howto/sorting.html) for keys."""
REPORT = (
    ANSWER.replace("its last item.", "its last item. [1]").replace("no last item.", "no last item. [2]")
    + "\n\n**Sources**\n\n"
    + "\n".join(f"{k}. <{u}>" for k, u in enumerate(URLS, 1))
)

# Markdown-borne payloads, each of which would run or load something if it became markup.
HOSTILE = {
    "javascript link": "[x](javascript:window.__pwned='md')",
    "javascript link, entity-encoded": "[x](&#106;avascript:window.__pwned='md')",
    "javascript link, mixed case": "[x](JaVaScRiPt:window.__pwned='md')",
    "data link": "[x](data:text/html,<script>window.__pwned='data'</script>)",
    "raw img onerror": "<img src=x onerror=\"window.__pwned='img'\">",
    "raw script": "<script>window.__pwned='script'</script>",
    "javascript autolink": "<javascript:window.__pwned='auto'>",
    "entities": "&lt;img src=x onerror=alert(1)&gt; &#60;script&#62;",
    "image": "![tracker](https://evil.example/pixel.png)",
    "link with attribute soup": '[q](https://a.example "t" onmouseover=alert(1))',
    "forged sentence link": "\u2e200\u2e21forged\u2e220\u2e23",
    "vbscript link": "[x](vbscript:msgbox(1))",
    "file link": "[x](file:///etc/passwd)",
    "javascript link, hex entity": "[x](&#x6A;avascript:window.__pwned='hex')",
    "javascript link, entity inside the scheme": "[x](javas&#99;ript:window.__pwned='mid')",
    "javascript reference link": "[x][evil]\n\n[evil]: javascript:window.__pwned='ref'",
    "raw html link": "<a href=\"javascript:window.__pwned='a'\">x</a>",
    "raw svg onload": "<svg onload=\"window.__pwned='svg'\"></svg>",
    "raw iframe": "<iframe src=\"https://evil.example/\"></iframe>",
    "http autolink": "<https://evil.example/x?a=1&b=2>",
    "quote breaking out of a link": '[x](https://a.example/"onmouseover="alert(1))',
    "raw html in link text": "[<img src=x onerror=alert(1)>](https://ok.example/)",
    "script in a code span": "`<script>window.__pwned='code'</script>`",
}


def _tags(html: str) -> list[str]:
    return re.findall(r"<\s*([a-zA-Z0-9]+)", html)


def test_a_report_renders_paragraphs_code_quotes_lists_and_links_with_its_markers_linked():
    html = render_markdown(REPORT, URLS)
    assert (
        '<pre><code class="language-python3">if mylist:\n    mylist.sort()\n    last = mylist[-1]\n</code></pre>'
        in html
    )
    assert "<blockquote>" in html and "<ul>" in html and "<ol>" in html and "<strong>Sources</strong>" in html
    assert "<code>mylist.sort()</code>" in html
    assert f'<a class="cite" href="{URLS[0]}"' in html and f'<a class="cite" href="{URLS[1]}"' in html
    assert f'<a href="{URLS[0]}" rel="noopener noreferrer nofollow">the sorting HOWTO</a>' in html
    assert "mylist[-1]" in html and 'href="-1"' not in html  # "[-1]" in code is code, not a marker
    # before the citations are known (a partial answer of the stream) a marker is shown, not linked
    partial = render_markdown(REPORT.split("**Sources**")[0])
    assert '<span class="cite">[1]</span>' in partial and 'class="cite" href' not in partial


@pytest.mark.parametrize("name", list(HOSTILE))
def test_markdown_borne_payloads_become_text(name):
    html = render_markdown(f"Before. {HOSTILE[name]} After. [1]", URLS)
    low = html.lower()
    assert "javascript:" not in re.sub(r">[^<]*<", "><", low), html  # never inside a tag (an href)
    assert "data:" not in re.sub(r">[^<]*<", "><", low), html
    assert set(_tags(html)) <= {"p", "a", "code"}, html
    assert not re.search(r"<[^>]*\son\w+\s*=", html), html  # no event attribute
    assert "<img" not in low and "<script" not in low
    assert "\u2e20" not in html and "\u2e22" not in html
    assert "Before." in html and "After." in html


def test_what_each_payload_becomes():
    became = {
        name: render_markdown(p).removeprefix("<p>").removesuffix("</p>\n") for name, p in HOSTILE.items()
    }
    assert became["javascript link"] == "[x](javascript:window.__pwned='md')"
    assert became["raw img onerror"] == "&lt;img src=x onerror=\"window.__pwned='img'\"&gt;"
    assert became["javascript autolink"] == "&lt;javascript:window.__pwned='auto'&gt;"
    assert became["entities"] == "&lt;img src=x onerror=alert(1)&gt; &lt;script&gt;"
    assert (
        became["image"]
        == '!<a href="https://evil.example/pixel.png" rel="noopener noreferrer nofollow">tracker</a>'
    )
    assert became["forged sentence link"] == "0forged0"
    assert became["vbscript link"] == "[x](vbscript:msgbox(1))" and became["file link"] == "[x](file:///etc/passwd)"
    assert became["javascript link, hex entity"] == "[x](javascript:window.__pwned='hex')"  # text, not a link
    assert became["javascript reference link"] == "[x][evil]</p>\n<p>[evil]: javascript:window.__pwned='ref'"
    assert became["raw html link"] == "&lt;a href=\"javascript:window.__pwned='a'\"&gt;x&lt;/a&gt;"
    assert became["raw iframe"] == '&lt;iframe src="https://evil.example/"&gt;&lt;/iframe&gt;'
    assert became["http autolink"] == ('<a href="https://evil.example/x?a=1&amp;b=2" rel="noopener noreferrer '
                                       'nofollow">https://evil.example/x?a=1&amp;b=2</a>')
    assert became["quote breaking out of a link"] == (
        '<a href="https://a.example/%22onmouseover=%22alert(1)" rel="noopener noreferrer nofollow">x</a>')
    assert became["raw html in link text"] == (
        '<a href="https://ok.example/" rel="noopener noreferrer nofollow">&lt;img src=x onerror=alert(1)&gt;</a>')
    assert became["script in a code span"] == "<code>&lt;script&gt;window.__pwned='code'&lt;/script&gt;</code>"


def test_a_fence_and_a_citation_url_carry_no_markup():
    fence = render_markdown('```js" onmouseover="alert(1)\n<script>alert(1)</script>\n```')
    assert fence == '<pre><code class="language-js&quot;">&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>\n'
    # a cited URL is linked only when it is http(s), and escaped in the attribute
    cited = render_markdown("A fact. [1] [2]", ["javascript:alert(1)", 'https://a.example/"><script>'])
    assert '<span class="cite">[1]</span>' in cited and "<script" not in cited
    assert 'href="https://a.example/&quot;&gt;&lt;script&gt;"' in cited


def test_the_allow_list_holds_whatever_reaches_it():
    # the second line of defence, were the renderer ever to let markup through
    dirty = (
        '<p onclick="x()">a<script>bad()</script><img src=x onerror=y()><a href="javascript:z()">l</a>'
        '<a href="https://ok.example/" onmouseover="w()" style="color:red">ok</a><iframe src="//e"></iframe></p>'
    )
    clean = sanitise(dirty)
    assert clean == (
        '<p>a<a rel="noopener noreferrer nofollow">l</a>'
        '<a href="https://ok.example/" rel="noopener noreferrer nofollow">ok</a></p>'
    )


def _ledger(text: str, cited: tuple[int, ...] = (0, 1)) -> list[LedgerSentence]:
    return [LedgerSentence(i, s, (1,) if i in cited else ()) for i, s in enumerate(split_sentences(text))]


def test_the_inspector_links_each_sentence_of_the_rendered_answer_and_keeps_code_lines():
    ledger = _ledger(ANSWER)
    assert any(s.text.startswith("```python3 if mylist:") for s in ledger)  # the ledger flattens the block
    rendered = render_answer(ANSWER, ledger, selected=1, cited={0, 1})
    html = rendered.html
    assert rendered.missing == []
    for s in ledger:
        assert f'id="sentence-{s.index}" href="?s={s.index}#evidence"' in html, s
    code = re.search(r"<pre>(.*?)</pre>", html, re.S).group(1)
    assert code.startswith('<a class="sentence code selected" id="sentence-1"')
    assert "if mylist:\n    mylist.sort()\n    last = mylist[-1]\n" in code  # its lines kept
    assert '<sup class="marker">[1]</sup></a>' in code
    assert re.search(
        r'<a class="sentence" id="sentence-0" href="\?s=0#evidence"[^>]*>Sort the list in place with '
        r"<code>mylist.sort\(\)</code>, then take its last item.<sup class=\"marker\">\[1\]</sup></a>",
        html,
    )
    assert '<a class="sentence uncited" id="sentence-2"' in html and "<blockquote>" in html
    # a link inside a sentence is shown as its text (a link cannot hold a link), its URL as the title
    assert f'<span class="link" title="{URLS[0]}">the sorting HOWTO</span>' in html
    assert html.count("<a ") == len(ledger)
    # the selected sentence as the answer writes it (the evidence panel's claim): the code block with its lines
    assert rendered.selected_html == (
        '<pre><code class="language-python3">if mylist:\n    mylist.sort()\n    last = mylist[-1]\n</code></pre>\n')
    assert render_answer(ANSWER, ledger, selected=0).selected_html == (
        "<p>Sort the list in place with <code>mylist.sort()</code>, then take its last item.</p>\n")
    assert render_answer(ANSWER, ledger).selected_html is None


def test_a_code_block_in_a_list_item_keeps_its_lines_when_selected():
    text = "1. Sort it, then scan from the end:\n   ```python3\n   if a:\n       a.sort()\n   ```\n"
    # as the citation stage splits such an answer (the real run's ledger of "How do you remove duplicates from a list?")
    ledger = [LedgerSentence(0, "Sort it, then scan from the end:", (1,)),
              LedgerSentence(1, "```python3 if a: a.sort() ```", (1,))]
    rendered = render_answer(text, ledger, selected=1)
    assert rendered.missing == []
    assert rendered.selected_html == '<pre><code class="language-python3">if a:\n    a.sort()\n</code></pre>\n'


def test_a_sentence_not_in_the_text_is_returned_apart():
    ledger = [*_ledger("First sentence here. Second one there."), LedgerSentence(2, "Never written at all.")]
    rendered = render_answer("First sentence here. Second one there.", ledger)
    assert rendered.missing == [2] and rendered.html.count('class="sentence') == 2


def test_the_rendered_stream_adds_html_beside_the_contracts_fields():
    message = StreamMessage(
        "**Query plan**: 2 searches|||---|||**Draft** (writing): 3 words so far.\n\n`a` <b>",
        REPORT,
        False,
        True,
        tuple(URLS),
    )
    out = with_html(message.sse())
    assert out.startswith(b"data: ") and out.endswith(b"\n\n")
    data = json.loads(out[6:])
    assert {k: data[k] for k in message.to_dict()} == message.to_dict()  # the contract's fields unchanged
    assert (
        check_messages([{**data, "is_intermediate": True, "complete": False, "final_report": None}, data])
        == []
    )
    assert data["steps_html"][0] == "<p><strong>Query plan</strong>: 2 searches</p>\n"
    assert "&lt;b&gt;" in data["steps_html"][1] and "<code>a</code>" in data["steps_html"][1]
    assert data["final_report_html"] == render_markdown(REPORT, URLS)


def test_depth_is_checked_by_the_contract_and_by_the_service():
    body = {"question": "q?", "depth": 1, "render": "html", "sites": "docs.python.org, sqlite.org"}
    parsed = parse_request(json.dumps(body).encode(), RunRequest, max_depth=2)
    assert (
        parsed.steering() == {"sites": ["docs.python.org", "sqlite.org"], "depth": 1}
        and parsed.render == "html"
    )
    for bad, says in [
        (-1, "from 0 to 5"),
        (9, "from 0 to 5"),
        ("2", "valid integer"),
        (True, "valid integer"),
        (1.5, "valid integer"),
    ]:
        with pytest.raises(BadRequest) as exc:
            parse_request(json.dumps({"question": "q?", "depth": bad}).encode(), RunRequest)
        assert exc.value.problems[0].startswith("depth: ") and says in exc.value.problems[0], (
            exc.value.problems
        )
    with pytest.raises(BadRequest, match=r"depth: 3 follow-up rounds asked, this service runs at most 2"):
        parse_request(b'{"query": "q?", "iid": "a", "depth": 3}', EvaluateRequest, max_depth=2)
    # one message for every wrong depth, naming this service's most (not the most any configuration allows)
    for bad in (9, -1):
        with pytest.raises(BadRequest) as exc:
            parse_request(json.dumps({"question": "q?", "depth": bad}).encode(), RunRequest, max_depth=2)
        assert exc.value.problems == [exc.value.problems[0]] and "from 0 to 2, or leave depth out" in str(exc.value)
    # with the other problems of the body, not instead of them
    with pytest.raises(BadRequest) as exc:
        parse_request(b'{"question": "q?", "depth": 7, "length": "huge"}', RunRequest, max_depth=2)
    assert [p.split(":")[0] for p in exc.value.problems] == ["length", "depth"]
    # a check of several fields names them, with no "body:" before it
    with pytest.raises(BadRequest) as exc:
        parse_request(b'{"question": "q?", "after": "2024-05-01", "before": "2024-01-01"}', RunRequest)
    assert exc.value.problems == ["after 2024-05-01 is later than before 2024-01-01: no page can be in that window"]
    with pytest.raises(BadRequest, match=r"at most 0 \(its variant never looks again\)"):
        parse_request(b'{"question": "q?", "depth": 1}', RunRequest, max_depth=0)
    with pytest.raises(BadRequest, match=r"render: "):
        parse_request(b'{"question": "q?", "render": "pdf"}', RunRequest)


def test_a_questions_depth_caps_the_configs_rounds():
    assert question_depth(Question("a", "q?", None, 1, {"depth": 1}), 2) == 1
    assert question_depth(Question("a", "q?", None, 1, {"depth": 0}), 2) == 0
    assert question_depth(Question("a", "q?", None, 1, {"depth": 4}), 2) == 2
    assert question_depth(Question("a", "q?", None, 1, {}), 2) == 2


def test_the_answer_and_run_views_say_what_steered_a_question(tmp_path):
    from hifirag_core.records import AnswerRecord, QuestionRecord
    from hifirag_core.serving.inspect import answer_view, run_view
    from hifirag_core.store.warehouse import Warehouse

    w = Warehouse(tmp_path)
    meta = {"endpoint": "/run", "sites": ["docs.python.org"], "length": "short", "depth": 1, "iid": "x"}
    w.write(
        "questions",
        [
            QuestionRecord(
                query="q?", reference=None, dataset="service", line_no=1, meta_json=json.dumps(meta)
            )
        ],
        run_id="r",
        stage="input",
        question_id="q1",
    )
    w.write("answers", [AnswerRecord(text="An answer.")], run_id="r", stage="answer", question_id="q1")
    expected = {"sites": ["docs.python.org"], "length": "short", "depth": 1}
    assert answer_view(w, "r", "q1").steering == expected
    assert run_view(w, "r").questions[0]["steering"] == expected
    assert answer_view(w, "r", "q1").run_steering == {} and run_view(w, "r").steering == {}
    # the run's own steering (`--set steer.*`, a config file) steers every question that does not replace it
    from hifirag_core.config import build_config
    from hifirag_core.records import RunRecord

    cfg = build_config(overrides={"steer": {"length": "long", "exclude_sites": ["pinterest.com"]}})
    w.write("runs", [RunRecord(config_json=cfg.to_json())], run_id="r", stage="run")
    assert run_view(w, "r").steering == {"exclude_sites": ["pinterest.com"], "length": "long"}
    view = answer_view(w, "r", "q1")
    assert view.steering == expected and view.run_steering == {"exclude_sites": ["pinterest.com"]}  # length: its own


def test_the_supporting_sentence_is_marked_in_the_sections_own_lines():
    from hifirag_core.serving.inspect import Support

    section = "Sort it first:\n\n```python3\nif mylist:\n    mylist.sort()\n```\n\nThen scan it."
    support = Support(1, URLS[0], "s1", [], "```python3 if mylist: mylist.sort() ```", 1.0, "offline check",
                      "offline+marker", None, None, None, section)
    assert support.highlighted() == ("Sort it first:\n\n", "```python3\nif mylist:\n    mylist.sort()\n```",
                                     "\n\nThen scan it.")
    exact = Support(1, URLS[0], "s1", [], "Then scan it.", 1.0, None, None, None, None, None, section)
    assert exact.highlighted()[1] == "Then scan it."
    absent = Support(1, URLS[0], "s1", [], "Not in the section.", 1.0, None, None, None, None, None, section)
    assert absent.highlighted() == (section, "", "")
