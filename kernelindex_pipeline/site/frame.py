"""The frame every page of the site is drawn in (doctype, head, header, stylesheet link) and its stylesheet,
with ``escape``, the one way a page puts a value into HTML."""

from __future__ import annotations

import html


def escape(value) -> str:
    """HTML-escaped text of a value; None is empty."""
    return html.escape("" if value is None else str(value))


_e = escape


def page(title: str, body: str, depth: int, head: str = "") -> str:
    up = "../" * depth
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}<title>{_e(title)}</title>"
        f"<link rel=\"stylesheet\" href=\"{up}style.css\"></head>\n<body>\n"
        f"<header><a href=\"{up}index.html\">KernelIndex</a></header>\n<main>\n{body}\n</main>\n</body></html>\n"
    )


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1b1f24; background: #fff; }
header { padding: 10px 24px; border-bottom: 1px solid #d8dee4; font-weight: 600; }
header a { color: #1b1f24; text-decoration: none; }
main { max-width: 900px; padding: 8px 24px 40px; overflow-wrap: break-word; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; border-bottom: 1px solid #eaeef2; }
.muted { color: #57606a; font-weight: normal; }
.flag { color: #9a3412; font-weight: 600; }
.primary .value { font-size: 2.6rem; font-weight: 700; } .primary .stat { margin-left: .4rem; color: #57606a; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dt { color: #57606a; } dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; font-size: 12px; }
.cite { background: #f6f8fa; padding: 10px; font-size: 13px; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 14px; display: block; max-width: 100%; overflow-x: auto; }
td, th { padding: 3px 10px 3px 0; text-align: left; vertical-align: top; overflow-wrap: normal; }
td.n { text-align: right; } .nw { white-space: nowrap; }
@media (max-width: 600px) { table { font-size: 12px; } td, th { padding-right: 6px; } }
.status { background: #fff4e6; border-left: 4px solid #d9480f; padding: 8px 12px; }
.warning { color: #b3261e; }
#search-results { margin: 4px 0 12px; padding-left: 18px; overflow-wrap: anywhere; }
#filters input { max-width: 9rem; }
dl.glossary { grid-template-columns: minmax(7rem, max-content) 1fr; }
footer { margin-top: 2rem; color: #57606a; font-size: 14px; }
svg { max-width: 100%; height: auto; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 400px), 1fr)); gap: 20px; }
figure.chart { margin: 0; min-width: 0; } figcaption { font-size: 14px; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 2px 14px; padding: 0; margin: 2px 0; font-size: 13px; }
.swatch { display: inline-block; width: 28px; height: 12px; margin-right: 5px; vertical-align: middle; }
"""
