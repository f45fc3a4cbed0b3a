"""The viewer's pure renderers: the safe Markdown subset and the SVG charts."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from hypothesis import given
from hypothesis import strategies as st

from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.analytics.charts import _UNWRITABLE, Chart, chart_svg, render_chart
from pentrace.service.web.markdown import render_markdown

_TAG = re.compile(r"<(/?)([a-z0-9]+)([^>]*)>")
_ALLOWED = {"p", "br", "pre", "code", "strong", "em", "a", "ul", "ol", "li", "h3", "h4", "h5"}


def test_markdown_draws_the_subset() -> None:
    html = render_markdown("# Title\n\nSome **bold**, *em* and `x < y`.\n\n- one\n- two\n\n1. a")
    assert "<h3>Title</h3>" in html
    assert "<strong>bold</strong>" in html
    assert "<em>em</em>" in html
    assert "<code>x &lt; y</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<ol><li>a</li></ol>" in html


def test_markdown_keeps_code_fences_verbatim_and_escaped() -> None:
    html = render_markdown("```\n<b>**not bold**</b>\n```")
    assert html == "<pre><code>&lt;b&gt;**not bold**&lt;/b&gt;</code></pre>"


def test_markdown_links_only_to_http_and_https() -> None:
    assert 'href="https://example.org/a?b=1&amp;c=2"' in render_markdown(
        "[site](https://example.org/a?b=1&c=2)"
    )
    shown = render_markdown("[x](javascript:alert(1)) [y](data:text/html,hi)")
    assert "href" not in shown
    assert "javascript:alert(1)" in shown


def test_markdown_shows_raw_html_as_text() -> None:
    html = render_markdown('<img src=x onerror="alert(1)"><script>alert(2)</script>')
    assert "<img" not in html
    assert "<script" not in html
    assert "&lt;script&gt;" in html


@given(st.text(alphabet=st.sampled_from(list("ab <>\"'&*`[]()#-1.\n:/hjtps=")), max_size=200))
def test_markdown_never_writes_a_tag_or_attribute_outside_the_subset(text: str) -> None:
    for closing, name, attributes in _TAG.findall(render_markdown(text)):
        assert name in _ALLOWED, name
        if attributes:
            assert not closing
            assert name == "a"
            assert re.fullmatch(r' href="https?://[^"<>\s]+" rel="noreferrer noopener"', attributes)


def test_a_rate_without_a_value_is_not_drawn_as_zero() -> None:
    chart = Chart(
        "requests",
        ["d1", "d2", "d3"],
        [("requests", [4.0, 0.0, 2.0])],
        line=("completed", [0.5, None, 1.0]),
        line_is_rate=True,
    )
    svg = render_chart(chart)
    points = re.findall(r"<title>(d\d): completed ([^<]+)</title>", svg)
    assert points == [("d1", "50.0%"), ("d3", "100.0%")]


def test_skipped_buckets_get_a_break_mark_and_the_line_stops_there() -> None:
    chart = Chart(
        "tokens",
        ["2026-11-01", "2026-11-02", "2026-11-20"],
        [("input", [1.0, 2.0, 3.0])],
        breaks=[False, False, True],
        line=("rate", [0.1, 0.2, 0.3]),
        line_is_rate=True,
    )
    svg = render_chart(chart)
    assert svg.count('<g class="break">') == 1
    assert "skipped buckets" in svg
    lines = re.findall(r'<polyline class="line" points="([^"]+)"', svg)
    assert len(lines) == 1  # d1-d2 joined; d3 stands alone after the break
    assert len(lines[0].split()) == 2


def test_axis_steps_are_round_numbers() -> None:
    svg = render_chart(Chart("t", ["a"], [("x", [7300.0])]))
    ticks = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert ticks == ["0", "2k", "4k", "6k", "8k"]


_HOSTILE = st.text(
    alphabet=st.one_of(st.sampled_from(list("<>&\"'/ =\n\x00\x07\ud800\ufffe")), st.characters()),
    max_size=40,
)


@given(
    title=_HOSTILE,
    labels=st.lists(_HOSTILE, min_size=1, max_size=5),
    names=st.lists(_HOSTILE, min_size=1, max_size=3),
    horizontal=st.booleans(),
)
def test_no_text_of_a_chart_becomes_markup_and_the_svg_file_is_well_formed(
    title: str, labels: list[str], names: list[str], horizontal: bool
) -> None:
    chart = Chart(
        title,
        labels,
        [(name, [float(n + 1) for n in range(len(labels))]) for name in names],
        x_title=title,
        y_title=names[0],
        horizontal=horizontal,
        value_labels=labels if horizontal else None,
    )
    # Well-formed XML: no stray tag, no character a document may not hold.
    document = ElementTree.fromstring(chart_svg(chart))  # noqa: S314  # the engine's own output
    drawn = {"svg", "style", "rect", "line", "text", "title", "g", "path"}
    assert {element.tag.rpartition("}")[2] for element in document.iter()} <= drawn
    texts = ["".join(element.itertext()) for element in document.iter() if element.text]
    # The x-axis title is the title, whole: every character kept (XML reads \r as \n).
    clean = _UNWRITABLE.sub("\ufffd", escape_surrogates(title))
    clean = clean.replace("\r\n", "\n").replace("\r", "\n")
    assert clean in texts or not clean
    figure = str(render_chart(chart))
    tags = {name for _closing, name, _attributes in _TAG.findall(figure)}
    assert tags <= {"figure", "figcaption", "svg", "rect", "line", "text", "title", "g", "path",
                    "ul", "li", "span"}  # fmt: skip
    assert "<script" not in figure
    figure.encode("utf-8")  # nothing a page cannot carry


def test_a_standalone_picture_names_its_axes_and_keeps_its_text_as_text() -> None:
    svg = chart_svg(
        Chart("Tokens\n(top 2)", ["a", "b"], [("x", [1.0, 2.0])], x_title="day", y_title="n")
    )
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert texts[:2] == ["Tokens", "(top 2)"]
    assert {"day", "n", "x"} <= set(texts)
    assert 'xmlns="http://www.w3.org/2000/svg"' in svg
