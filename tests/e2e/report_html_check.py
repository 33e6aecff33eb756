#!/usr/bin/env python3
"""report_html_check.py - check one page of `fsdpscope report --html`.

  report_html_check.py --page PAGE.html --json REPORT.json [--dom DOM.html]
                       [--png SHOT.png] [--expect-text TEXT]...

PAGE is the file fsdpscope wrote, REPORT the same trace's `report --json`,
DOM what headless Chromium dumped of PAGE (--dump-dom), SHOT its screenshot.
It asserts, and says what failed:
  * PAGE is valid UTF-8, and nothing in it can make a request: no src, href,
    srcset, action, formaction or xlink:href attribute, no url( or @import,
    no http: or https: anywhere;
  * the DOM holds no element that runs or loads anything (script, img,
    iframe, object, embed, a, link, form, input, base, meta refresh) and no
    on* attribute: names from the job stayed text; each --expect-text is
    in the DOM's text (the hostile names, as text);
  * the verdict and the top finding's rule id come before the first chart,
    and the what-if table is there (with a row per REPORT's whatif entry
    once the analysis makes them, else "what-if: not computed");
  * the gathers chart has a bar per gather of REPORT's representative step,
    the ranks chart a lane (or, past 64 ranks, a heat cell) per rank of
    REPORT's per_rank, each lane with its step and kernels drawn in it;
  * the screenshot is not one colour (its pixel bytes, inflated with zlib,
    take more than a handful of values).
"""
import argparse
import html.parser
import json
import struct
import sys
import zlib

FORBIDDEN_TAGS = {"script", "img", "iframe", "object", "embed", "a", "link", "form", "input", "base",
                  "frame", "frameset", "video", "audio", "source", "image", "use", "foreignobject"}
FORBIDDEN_ATTRS = {"src", "href", "srcset", "action", "formaction", "xlink:href", "background", "poster"}


class Page(html.parser.HTMLParser):
    """The tags, attributes and text of a document, in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []   # (tag, attrs dict, text offset)
        self.text = []
        self.style = []
        self.in_style = False
        self.lane_rects = []  # rects inside each <g class="lane">, in order
        self.in_lane = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs), sum(len(t) for t in self.text)))
        self.in_style = tag == "style"
        if tag == "g" and "lane" in (dict(attrs).get("class") or "").split():
            self.in_lane = True
            self.lane_rects.append(0)
        elif tag == "rect" and self.in_lane:
            self.lane_rects[-1] += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.in_style = False

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False
        if tag == "g":
            self.in_lane = False

    def handle_data(self, data):
        (self.style if self.in_style else self.text).append(data)


def parse(text):
    p = Page()
    p.feed(text)
    p.close()
    p.all_text = "".join(p.text)
    return p


def check_requests(raw, page, fail):
    low = raw.lower()
    for word in ("http:", "https:"):
        if word in low:
            fail(f"the page holds '{word}'")
    for tag, attrs, _ in page.tags:
        for name, value in attrs.items():
            if name in FORBIDDEN_ATTRS:
                fail(f"<{tag}> has a {name} attribute ({value!r})")
            if name == "style" and value and "url(" in value.lower():
                fail(f"<{tag}> style has url(")
    style = "".join(page.style).lower()
    if "url(" in style or "@import" in style:
        fail("the style sheet has url( or @import")


def check_dom(dom, report, expect, fail):
    rules = [f["rule"] if "rule" in f else f.get("id") for f in report.get("findings", [])]
    for tag, attrs, _ in dom.tags:
        if tag in FORBIDDEN_TAGS:
            fail(f"the DOM has a <{tag}> element: {attrs}")
        for name in attrs:
            if name.startswith("on"):
                fail(f"the DOM's <{tag}> has an event attribute {name}")
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "refresh":
            fail("the DOM has a meta refresh")
    for text in expect:
        if text not in dom.all_text:
            fail(f"the DOM's text does not hold {text!r}")
    first_svg = next((off for tag, _, off in dom.tags if tag == "svg"), None)
    head = dom.all_text[:first_svg] if first_svg is not None else dom.all_text
    if "verdict" not in head or "1. Verdict" not in head:
        fail("no verdict before the first chart")
    if rules and rules[0] and not any(r and r in head for r in rules):
        fail(f"no finding's rule id ({rules}) before the first chart")
    if not any(tag == "table" and "whatif" in attrs.get("class", "") for tag, attrs, _ in dom.tags):
        fail("no what-if table")
    rows = report.get("whatif")
    if rows:
        got = sum(1 for tag, attrs, _ in dom.tags if tag == "tr" and "whatif-row" in attrs.get("class", ""))
        if got != len(rows):
            fail(f"what-if rows: {got} in the page, {len(rows)} in the report")
    elif "what-if: not computed" not in dom.all_text:
        fail("no what-if rows and no 'what-if: not computed'")


def count(dom, tag, cls):
    return sum(1 for t, attrs, _ in dom.tags if t == tag and cls in attrs.get("class", "").split())


def check_charts(dom, report, fail):
    gathers = report.get("exposure", {}).get("gathers") or []
    measured = report.get("exposure", {}).get("source") not in (None, "none")
    bars = count(dom, "g", "gather")
    if measured and bars != len(gathers):
        fail(f"gather bars: {bars}, the report's representative step has {len(gathers)} gathers")
    ranks = len(report.get("per_rank") or [])
    lanes, heat = count(dom, "g", "lane"), count(dom, "rect", "heat")
    if ranks > 64:
        if heat != ranks or lanes:
            fail(f"{ranks} ranks: {heat} heat cells and {lanes} lanes (want {ranks} and 0)")
        if "Slowest ranks" not in dom.all_text:
            fail("the heat strip lists no slowest ranks")
    else:
        if lanes != ranks:
            fail(f"rank lanes: {lanes}, the report has {ranks} ranks")
        for r in report.get("per_rank") or []:
            if f"rank {r['rank']}" not in dom.all_text:
                fail(f"no lane named 'rank {r['rank']}'")
        # a lane of kernels: its step, and compute and communication drawn in it
        thin = [n for n in dom.lane_rects if n < 3]
        if thin:
            fail(f"{len(thin)} lanes with fewer than 3 rects (no kernels drawn): {dom.lane_rects}")
    print(f"  bars {bars} (gathers {len(gathers)}), lanes {lanes}, heat cells {heat} (ranks {ranks})")


def png_values(path):
    """The distinct byte values of the PNG's inflated image data."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--page", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--dom")
    ap.add_argument("--png")
    ap.add_argument("--expect-text", action="append", default=[])
    args = ap.parse_args()
    failures = []

    def fail(msg):
        failures.append(msg)

    raw_bytes = open(args.page, "rb").read()
    try:
        raw = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        print(f"FAIL: {args.page}: not valid UTF-8: {e}")
        return 1
    report = json.load(open(args.json))
    check_requests(raw, parse(raw), fail)
    if args.dom:
        dom = parse(open(args.dom, encoding="utf-8", errors="strict").read())
        check_dom(dom, report, args.expect_text, fail)
        check_charts(dom, report, fail)
    if args.png:
        values = png_values(args.png)
        print(f"  screenshot: {values} distinct byte values")
        if values <= 8:
            fail(f"the screenshot is blank ({values} distinct byte values)")
    for f in failures:
        print(f"FAIL: {args.page}: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
