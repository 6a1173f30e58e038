"""A report as a list of blocks, rendered twice: Markdown (figures beside it) and one HTML page
(figures embedded as base64 PNG). Text is plain, with `code` spans; both renderers escape it.

Numbers are formatted here, once, with fixed rules (`num`, `ci`, `csv_frame`), so the same
tables give the same bytes on every machine.
"""
from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Figure:
    name: str  # file name under figures/, e.g. "accuracy.png"
    caption: str


Block = Heading | Para | Code | Table | Figure


# ------------------------------------------------------------------------------------ numbers

def num(x, spec: str = ".3f") -> str:
    """A float in a fixed format; '-' for None or NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec)


def ci(v, lo, hi, spec: str = ".3f") -> str:
    """'0.512 [0.480, 0.540]', or the value alone when the interval is missing."""
    if num(v, spec) == "-":
        return "-"
    if num(lo, spec) == "-":
        return num(v, spec)
    return f"{num(v, spec)} [{num(lo, spec)}, {num(hi, spec)}]"


def table(df: pl.DataFrame, columns: dict[str, callable]) -> Table:
    """Rows of df formatted by {header: row -> str}."""
    rows = tuple(tuple(f(r) for f in columns.values()) for r in df.iter_rows(named=True))
    return Table(tuple(columns), rows)


def csv_frame(df: pl.DataFrame) -> str:
    """CSV with floats as `format(x, '.6g')`, NaN and None as empty fields: stable across platforms."""
    def fmt(x) -> str:
        s = num(x, ".6g")
        return "" if s == "-" else s

    floats = [c for c, t in df.schema.items() if t.is_float()]
    out = df.with_columns([pl.col(c).map_elements(fmt, return_dtype=pl.String).fill_null("") for c in floats])
    return out.write_csv(line_terminator="\n")


# ------------------------------------------------------------------------------------ Markdown

def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("*", "\\*").replace("\n", " ")


def markdown(title: str, blocks: list[Block]) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Code):
            out += ["```", b.text, "```", ""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            out.append("|" + "|".join("---" for _ in b.header) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows]
            out.append("")
        elif isinstance(b, Figure):
            out += [f"![{b.caption}](figures/{b.name})", "", f"*{b.caption}*", ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------------ HTML

_CODE = re.compile(r"`([^`]+)`")

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1250px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.88em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr:nth-child(even) td { background: #fafafa; }
code, pre { background: #f4f4f4; border-radius: 3px; font-size: 0.9em; }
code { padding: 1px 4px; }
pre { padding: .6em; overflow-x: auto; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
nav { font-size: 0.9em; }
"""


def _inline(text: str) -> str:
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text, quote=False))


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def html_page(title: str, blocks: list[Block], figures: dict[str, bytes]) -> str:
    """One self-contained page: styles inline, figures as data: URIs, a table of contents."""
    toc = [b for b in blocks if isinstance(b, Heading) and b.level == 2]
    body = [f"<h1>{html.escape(title)}</h1>",
            "<nav><b>Contents:</b> " + " · ".join(f'<a href="#{_anchor(h.text)}">{html.escape(h.text)}</a>'
                                                   for h in toc) + "</nav>"]
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f'<h{b.level} id="{_anchor(b.text)}">{html.escape(b.text)}</h{b.level}>')
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Code):
            body.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Figure):
            data = base64.b64encode(figures[b.name]).decode("ascii")
            body.append(f'<figure><img alt="{html.escape(b.caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{_inline(b.caption)}</figcaption></figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
