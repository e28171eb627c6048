"""The pieces of a self-contained HTML page with Plotly figures, shared by the
report (report/html.py) and the validation page (validate/page.py).

A page is the HTML of its sections plus one JSON document in a <script
type="application/json" id="ccbench-data"> element: {title, eager: [figure
ids drawn at once], lazy: {section id: [figure ids drawn when that
<details class="run" data-run=...> section opens or is linked to]},
figures: {id: {data, layout}}, flags}. plotly.js is inlined, so the file
needs no network; tests and scripts read exactly what is drawn.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any, Sequence

import numpy as np

from ccbench.errors import UsageError

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def sig(a: np.ndarray, digits: int = 4) -> list:
    """Round to ``digits`` significant digits; NaN → None (keeps the JSON small)."""
    a = np.asarray(a, dtype=float)
    out = a.copy()
    finite = np.isfinite(a) & (a != 0)
    mag = np.floor(np.log10(np.abs(a[finite])))
    scale = 10.0 ** (digits - 1 - mag)
    out[finite] = np.round(a[finite] * scale) / scale
    return [None if not math.isfinite(x) else x for x in out.tolist()]


def downsample(t: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ~max_points points: per bucket the first, min and max points, in time order."""
    n = len(t)
    if n <= max_points:
        return t, y
    buckets = max(1, max_points // 3)
    keep: list[int] = []
    for idx in np.array_split(np.arange(n), buckets):
        seg = y[idx]
        cand = {int(idx[0])}
        if np.isfinite(seg).any():
            cand |= {int(idx[int(np.nanargmin(seg))]), int(idx[int(np.nanargmax(seg))])}
        keep.extend(sorted(cand))
    k = np.asarray(keep)
    return t[k], y[k]


def layout(title: str, xtitle: str, ytitle: str, **kw: Any) -> dict:
    lay = {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": {"title": {"text": xtitle}, "zeroline": False},
        "yaxis": {"title": {"text": ytitle}, "rangemode": "tozero"},
        "hovermode": "closest", "height": 380, "margin": {"l": 70, "r": 20, "t": 50, "b": 50},
        "legend": {"orientation": "h", "y": -0.2},
    }
    lay.update(kw)
    return lay


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1400px;padding:0 20px 60px;color:#222}
h1{margin-top:24px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:36px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f6f6f6}td.l,th.l{text-align:left}table.summary td{white-space:nowrap}tr.first td{border-top:2px solid #ccc}
pre{background:#f7f7f7;padding:10px;overflow:auto;font-size:12px}.muted{color:#777}.flag{color:#b00}
details.run{border:1px solid #ddd;border-radius:4px;margin:6px 0;padding:4px 10px}details.run[open]{background:#fcfcfc}
details.run summary{cursor:pointer}.plot{min-height:200px}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(640px,1fr));gap:10px}
nav a{margin-right:14px}.badge{display:inline-block;background:#b00;color:#fff;border-radius:3px;padding:0 5px;font-size:12px;margin-left:6px}
.badge.sus{background:#c80}
"""

JS = r"""
(function(){
  window.ccbenchErrors = [];
  window.addEventListener('error', function(e){ window.ccbenchErrors.push(String(e.message)); });
  window.addEventListener('unhandledrejection', function(e){ window.ccbenchErrors.push('rejection: ' + e.reason); });
  var doc = JSON.parse(document.getElementById('ccbench-data').textContent);
  var cfg = {responsive: true, displaylogo: false};
  var drawn = {};
  function draw(id){
    if (drawn[id]) return;
    var fig = doc.figures[id], el = document.getElementById(id);
    if (!fig || !el) return;
    drawn[id] = true;
    try {
      Plotly.newPlot(el, fig.data, fig.layout, cfg).then(function(){ el.setAttribute('data-drawn', '1'); });
    }
    catch (err) { window.ccbenchErrors.push('plot ' + id + ': ' + err); throw err; }
  }
  doc.eager.forEach(draw);
  document.querySelectorAll('details.run').forEach(function(d){
    d.addEventListener('toggle', function(){ if (d.open) (doc.lazy[d.dataset.run] || []).forEach(draw); });
  });
  function openHash(){
    var h = decodeURIComponent(location.hash.slice(1));
    var el = h && document.getElementById(h);
    if (el && el.tagName === 'DETAILS') { el.open = true; (doc.lazy[el.dataset.run] || []).forEach(draw); el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openHash);
  openHash();
  window.ccbenchReady = true;
})();
"""


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1, first_rows: Sequence[int] = (),
           cls: str = "") -> str:
    out = [f'<table class="{cls}"><thead><tr>']
    out += [f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(headers)]
    out.append("</tr></thead><tbody>")
    for r_i, r in enumerate(rows):
        cls = ' class="first"' if r_i in first_rows else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def nan_free(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: nan_free(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [nan_free(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        x = x.item()
    return _clean(x)


def page(title: str, sections: Sequence[str], figures: dict, eager: Sequence[str] = (),
         lazy: dict | None = None, flags: Sequence[dict] = (), extra: dict | None = None) -> tuple[str, dict]:
    """The page's HTML text and its data document (module docstring; ``extra``
    adds keys to the document)."""
    doc = {"title": title, "eager": list(eager), "lazy": dict(lazy or {}), "figures": figures, "flags": list(flags),
           **(extra or {})}
    payload = json.dumps(nan_free(doc), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    text = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style>"
            f"<script>{plotly_js()}</script></head><body>" + "".join(sections)
            + f'<script type="application/json" id="ccbench-data">{payload}</script>'
            + f"<script>{JS}</script></body></html>\n")
    return text, doc


def check_target(out: Any) -> Any:
    """``out`` as a Path a file can be written to: not a directory, in one
    that exists (UsageError naming it otherwise)."""
    from pathlib import Path

    out = Path(out)
    if out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name")
    if not out.parent.is_dir():
        raise UsageError(f"{out}: no directory {out.parent} to write it in")
    return out


def write_whole(out: Any, save: Any) -> Any:
    """Write a file atomically: ``save(path)`` writes a .part file, renamed
    into place, so the file is whole or as it was and no .part is left.
    UsageError naming ``out`` and the cause otherwise."""
    out = check_target(out)
    tmp = out.with_name(out.name + ".part")
    try:
        save(tmp)
        tmp.replace(out)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise UsageError(f"{out}: cannot write it ({e.strerror or e}); nothing was written") from None
    return out


def write(text: str, out: Any) -> Any:
    """Write a page atomically (write_whole)."""
    return write_whole(out, lambda p: p.write_text(text, encoding="utf-8"))
