"""Tiny dependency-free charts for release reports, as inline SVG strings (shared by every
family's figures and the report page).

The shapes: ``bar_chart`` (vertical bars over categories), ``hbar_chart`` (horizontal bars, for
many long labels), ``grouped_bar_chart`` (before/after per category), ``histogram`` (counts of
values in equal bins, with marked reference values and bands) and ``scatter_chart`` (a
trade-off: points per series).

Every chart is a complete ``<svg>`` element with a ``viewBox`` and explicit width/height, a
``<title>`` and an ``aria-label``. All text is XML-escaped; numbers are formatted with fixed
rules, and no ids, randomness or timestamps are used, so the same input gives byte-identical SVG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
INK = "#222222"
MUTED = "#555555"
GRID = "#dddddd"
AXIS = "#888888"

TITLE_SIZE = 14
LABEL_SIZE = 12
TICK_SIZE = 11


def esc(value: object) -> str:
    """XML/HTML-escape any value's text (quotes included, so it is safe in attributes too)."""
    return escape(str(value), quote=True)


def fmt_num(value: float | int | None) -> str:
    """Short, stable number text: integers as such, otherwise up to 3 significant digits."""
    if value is None:
        return "–"
    v = float(value)
    if not math.isfinite(v):
        return "–" if math.isnan(v) else ("∞" if v > 0 else "−∞")
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}" if abs(v) >= 10000 else str(int(v))
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


def _c(x: float) -> str:
    """Coordinate text: 2 decimals, trailing zeros dropped (stable and compact)."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        hi = lo + (abs(lo) if lo else 1.0)
    span = hi - lo
    mag = 10 ** math.floor(math.log10(span / max(n, 1)))
    step = mag
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if span / step <= n + 1e-9:
            break
    start = math.floor(lo / step + 1e-9) * step
    stop = math.ceil(hi / step - 1e-9) * step
    count = round((stop - start) / step)
    return [round(start + i * step, 12) for i in range(count + 1)]


def _text_width(s: str, size: float) -> float:
    """Rough rendered width of ``s`` in a sans-serif font (for layout only)."""
    return 0.6 * size * len(s)


def _text(
    x: float,
    y: float,
    s: str,
    *,
    size: int = LABEL_SIZE,
    anchor: str = "start",
    fill: str = INK,
    weight: str | None = None,
    rotate: float | None = None,
    baseline: str | None = None,
) -> str:
    attrs = [f'x="{_c(x)}"', f'y="{_c(y)}"', f'font-size="{size}"', f'fill="{fill}"']
    if anchor != "start":
        attrs.append(f'text-anchor="{anchor}"')
    if weight:
        attrs.append(f'font-weight="{weight}"')
    if baseline:
        attrs.append(f'dominant-baseline="{baseline}"')
    if rotate is not None:
        attrs.append(f'transform="rotate({_c(rotate)} {_c(x)} {_c(y)})"')
    return f"<text {' '.join(attrs)}>{esc(s)}</text>"


def _rect(
    x: float, y: float, w: float, h: float, fill: str, *, title: str | None = None, extra: str = ""
) -> str:
    body = f"<title>{esc(title)}</title>" if title else ""
    attrs = f'x="{_c(x)}" y="{_c(y)}" width="{_c(max(w, 0.0))}" height="{_c(max(h, 0.0))}" fill="{fill}"'
    if extra:
        attrs += " " + extra
    return f"<rect {attrs}>{body}</rect>" if body else f"<rect {attrs}/>"


def _line(
    x1: float, y1: float, x2: float, y2: float, stroke: str, *, width: float = 1, dash: str = ""
) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{_c(x1)}" y1="{_c(y1)}" x2="{_c(x2)}" y2="{_c(y2)}" '
        f'stroke="{stroke}" stroke-width="{_c(width)}"{d}/>'
    )


def _svg(width: float, height: float, title: str, parts: list[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="{_c(width)}" height="{_c(height)}" viewBox="0 0 {_c(width)} {_c(height)}" '
        f'font-family="{FONT}" aria-label="{esc(title)}">'
    )
    return "\n".join([head, f"<title>{esc(title)}</title>", *parts, "</svg>"])


def _legend(items: Sequence[tuple[str, str, str]], x: float, y: float, max_x: float) -> list[str]:
    """Legend swatches left to right from (x, y), wrapping at ``max_x``. Items: (kind, colour,
    text) with kind 'box' (filled square), 'line' (solid) or 'dash' (dashed line)."""
    out, cx, cy = [], x, y
    for kind, colour, text in items:
        w = 18 + _text_width(text, LABEL_SIZE) + 16
        if cx + w > max_x and cx > x:
            cx, cy = x, cy + 18
        if kind == "box":
            out.append(_rect(cx, cy - 10, 12, 12, colour))
        elif kind == "band":
            out.append(_rect(cx, cy - 10, 12, 12, colour, extra='fill-opacity="0.25"'))
        else:
            out.append(
                _line(
                    cx,
                    cy - 4,
                    cx + 12,
                    cy - 4,
                    colour,
                    width=2,
                    dash="4 3" if kind == "dash" else "",
                )
            )
        out.append(_text(cx + 18, cy, text, size=LABEL_SIZE))
        cx += w
    return out


def _legend_height(items: Sequence[tuple[str, str, str]], x: float, max_x: float) -> float:
    rows, cx = 1, x
    for _, _, text in items:
        w = 18 + _text_width(text, LABEL_SIZE) + 16
        if cx + w > max_x and cx > x:
            rows, cx = rows + 1, x
        cx += w
    return rows * 18.0


def _y_axis(
    ticks: list[float],
    scale: Callable[[float], float],
    left: float,
    right: float,
    label: str,
    top: float,
    bottom: float,
    fmt: Callable[[float], str],
) -> list[str]:
    out = []
    for t in ticks:
        y = scale(t)
        out.append(_line(left, y, right, y, GRID))
        out.append(_text(left - 6, y + 4, fmt(t), size=TICK_SIZE, anchor="end", fill=MUTED))
    out.append(_line(left, top, left, bottom, AXIS))
    if label:
        mid = (top + bottom) / 2
        out.append(_text(16, mid, label, size=LABEL_SIZE, anchor="middle", rotate=-90))
    return out


def bar_chart(
    categories: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 300,
    color: str = PALETTE[0],
    value_fmt: Callable[[float], str] = fmt_num,
) -> str:
    """Vertical bars, one per category, each labelled with its value. Category labels are thinned
    to at most ~24 so they stay readable."""
    cats = [str(c) for c in categories]
    vals = [float(v) for v in values]
    if len(cats) != len(vals):
        raise ValueError("bar_chart: categories and values differ in length")
    left, right, top = 64.0, width - 16.0, 40.0
    bottom = height - (48.0 if x_label else 30.0)
    vmax = max([0.0, *[v for v in vals if math.isfinite(v)]]) or 1.0
    ticks = nice_ticks(0.0, vmax)
    ymax = ticks[-1]

    def sy(v: float) -> float:
        y = bottom - (bottom - top) * (v / ymax)
        return min(y, bottom - 2.0) if v > 0 else y  # a non-zero bar stays visible

    parts = [_text(width / 2, 22, title, size=TITLE_SIZE, anchor="middle", weight="bold")]
    parts += _y_axis(ticks, sy, left, right, y_label, top, bottom, fmt_num)
    n = max(len(cats), 1)
    slot = (right - left) / n
    bw = min(max(slot * 0.7, 1.0), 96.0)
    every = max(1, math.ceil(n / 24))
    show_values = slot >= 18
    for i, (c, v) in enumerate(zip(cats, vals, strict=True)):
        x = left + i * slot + (slot - bw) / 2
        vv = v if math.isfinite(v) else 0.0
        parts.append(_rect(x, sy(vv), bw, bottom - sy(vv), color, title=f"{c}: {value_fmt(v)}"))
        if show_values and vv > 0:
            parts.append(
                _text(x + bw / 2, sy(vv) - 4, value_fmt(v), size=TICK_SIZE, anchor="middle")
            )
        if i % every == 0:
            parts.append(
                _text(x + bw / 2, bottom + 16, c, size=TICK_SIZE, anchor="middle", fill=MUTED)
            )
    parts.append(_line(left, bottom, right, bottom, AXIS))
    if x_label:
        parts.append(_text((left + right) / 2, height - 10, x_label, anchor="middle"))
    return _svg(width, height, title, parts)


def scatter_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float, str]]]],
    *,
    title: str,
    x_label: str = "",
    y_label: str = "",
    width: int = 640,
    height: int = 360,
    annotate: bool = False,
) -> str:
    """Points (x, y, label) per named series, one colour each, with a legend: a trade-off plot
    (e.g. dPar on x, accuracy on y, one point per grid setting and classifier). Each label is
    the point's tooltip and, with ``annotate``, also written beside it."""
    pts = [(x, y) for _, ps in series for x, y, _ in ps if math.isfinite(x) and math.isfinite(y)]
    if not pts:
        pts = [(0.0, 0.0)]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xt = nice_ticks(min(0.0, min(xs)), max(xs) or 1.0)
    yt = nice_ticks(min(ys), max(ys)) if max(ys) > min(ys) else nice_ticks(0.0, max(ys) or 1.0)
    legend = [("box", PALETTE[i % len(PALETTE)], name) for i, (name, _) in enumerate(series)]
    left, right, top = 64.0, width - 16.0, 40.0 + _legend_height(legend, 64.0, width - 16.0)
    bottom = height - 48.0

    def sx(v: float) -> float:
        return left + (right - left) * (v - xt[0]) / ((xt[-1] - xt[0]) or 1.0)

    def sy(v: float) -> float:
        return bottom - (bottom - top) * (v - yt[0]) / ((yt[-1] - yt[0]) or 1.0)

    parts = [_text(width / 2, 22, title, size=TITLE_SIZE, anchor="middle", weight="bold")]
    parts += _legend(legend, left, 34.0, right)
    parts += _y_axis(yt, sy, left, right, y_label, top, bottom, fmt_num)
    for t in xt:
        parts.append(_line(sx(t), bottom, sx(t), bottom + 4, AXIS))
        parts.append(
            _text(sx(t), bottom + 16, fmt_num(t), size=TICK_SIZE, anchor="middle", fill=MUTED)
        )
    parts.append(_line(left, bottom, right, bottom, AXIS))
    for i, (_name, ps) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        for x, y, label in ps:
            if math.isfinite(x) and math.isfinite(y):
                parts.append(
                    f'<circle cx="{_c(sx(x))}" cy="{_c(sy(y))}" r="4.5" fill="{colour}">'
                    f"<title>{escape(label)}: {fmt_num(x)}, {fmt_num(y)}</title></circle>"
                )
                if annotate and label:
                    # a label that would run past the plot's right edge goes left of its point
                    if sx(x) + 7 + _text_width(label, TICK_SIZE) > width:
                        parts.append(
                            _text(
                                sx(x) - 7,
                                sy(y) - 6,
                                label,
                                size=TICK_SIZE,
                                fill=MUTED,
                                anchor="end",
                            )
                        )
                    else:
                        parts.append(_text(sx(x) + 7, sy(y) - 6, label, size=TICK_SIZE, fill=MUTED))
    if x_label:
        parts.append(_text((left + right) / 2, height - 10, x_label, anchor="middle"))
    return _svg(width, height, title, parts)


def hbar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    x_label: str = "",
    width: int = 640,
    bar_height: int = 18,
    gap: int = 6,
    color: str = PALETTE[0],
    value_fmt: Callable[[float], str] = fmt_num,
) -> str:
    """Horizontal bars (one per label, in the given order), values written at the bar ends."""
    labs = [str(s) for s in labels]
    vals = [float(v) for v in values]
    if len(labs) != len(vals):
        raise ValueError("hbar_chart: labels and values differ in length")
    longest = max([_text_width(s, LABEL_SIZE) for s in labs] or [0.0])
    left = min(max(longest + 14.0, 60.0), width * 0.45)
    right, top = width - 56.0, 40.0
    bottom = top + max(len(labs), 1) * (bar_height + gap)
    height = bottom + (48.0 if x_label else 30.0)
    vmax = max([0.0, *[v for v in vals if math.isfinite(v)]]) or 1.0
    ticks = nice_ticks(0.0, vmax)
    xmax = ticks[-1]

    def sx(v: float) -> float:
        return left + (right - left) * (v / xmax)

    parts = [_text(width / 2, 22, title, size=TITLE_SIZE, anchor="middle", weight="bold")]
    for t in ticks:
        parts.append(_line(sx(t), top, sx(t), bottom, GRID))
        parts.append(
            _text(sx(t), bottom + 16, fmt_num(t), size=TICK_SIZE, anchor="middle", fill=MUTED)
        )
    for i, (s, v) in enumerate(zip(labs, vals, strict=True)):
        y = top + i * (bar_height + gap) + gap / 2
        vv = v if math.isfinite(v) else 0.0
        shown = (
            s
            if _text_width(s, LABEL_SIZE) <= left - 10
            else s[: max(int((left - 10) / (0.6 * LABEL_SIZE)) - 1, 1)] + "…"
        )
        parts.append(_text(left - 8, y + bar_height / 2 + 4, shown, anchor="end"))
        parts.append(_rect(left, y, sx(vv) - left, bar_height, color, title=f"{s}: {value_fmt(v)}"))
        parts.append(_text(sx(vv) + 4, y + bar_height / 2 + 4, value_fmt(v), size=TICK_SIZE))
    parts.append(_line(left, top, left, bottom, AXIS))
    if x_label:
        parts.append(_text((left + right) / 2, height - 10, x_label, anchor="middle"))
    return _svg(width, height, title, parts)


def grouped_bar_chart(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    y_label: str = "",
    width: int = 640,
    height: int = 320,
    y_max: float | None = None,
    value_fmt: Callable[[float], str] = fmt_num,
) -> str:
    """One cluster of bars per category, one bar per series (e.g. before / after), with a legend."""
    cats = [str(c) for c in categories]
    ser = [(str(name), [float(v) for v in vals]) for name, vals in series]
    for name, vals in ser:
        if len(vals) != len(cats):
            raise ValueError(
                f"grouped_bar_chart: series '{name}' has {len(vals)} values for {len(cats)} categories"
            )
    left, right = 64.0, width - 16.0
    legend = [("box", PALETTE[i % len(PALETTE)], name) for i, (name, _) in enumerate(ser)]
    top = 40.0 + _legend_height(legend, left, right) + 8
    bottom = height - 34.0
    finite = [v for _, vals in ser for v in vals if math.isfinite(v)]
    ticks = nice_ticks(0.0, y_max if y_max is not None else (max([0.0, *finite]) or 1.0))
    ymax = ticks[-1]

    def sy(v: float) -> float:
        return bottom - (bottom - top) * (min(max(v, 0.0), ymax) / ymax)

    parts = [_text(width / 2, 22, title, size=TITLE_SIZE, anchor="middle", weight="bold")]
    parts += _legend(legend, left, 44.0, right)
    parts += _y_axis(ticks, sy, left, right, y_label, top, bottom, fmt_num)
    n = max(len(cats), 1)
    slot = (right - left) / n
    inner = slot * 0.75
    bw = inner / max(len(ser), 1)
    for i, c in enumerate(cats):
        x0 = left + i * slot + (slot - inner) / 2
        for j, (name, vals) in enumerate(ser):
            v = vals[i]
            vv = v if math.isfinite(v) else 0.0
            x = x0 + j * bw
            colour = PALETTE[j % len(PALETTE)]
            parts.append(
                _rect(
                    x + 1,
                    sy(vv),
                    bw - 2,
                    bottom - sy(vv),
                    colour,
                    title=f"{c}, {name}: {value_fmt(v)}",
                )
            )
            parts.append(
                _text(x + bw / 2, sy(vv) - 4, value_fmt(v), size=TICK_SIZE, anchor="middle")
            )
        parts.append(_text(left + i * slot + slot / 2, bottom + 18, c, anchor="middle"))
    parts.append(_line(left, bottom, right, bottom, AXIS))
    return _svg(width, height, title, parts)


def histogram(
    values: Sequence[float],
    *,
    title: str,
    lo: float,
    hi: float,
    bins: int = 20,
    x_label: str = "",
    y_label: str = "count",
    width: int = 640,
    height: int = 320,
    markers: Sequence[tuple[float, str]] = (),
    band: tuple[float, float, str] | None = None,
    color: str = PALETTE[0],
) -> str:
    """Counts of ``values`` in ``bins`` equal bins over [lo, hi] (values outside are clamped into
    the end bins). ``markers``: (x, label) dashed vertical lines; ``band``: (x0, x1, label) a
    shaded interval. Marker and band labels go into the legend so they never overlap."""
    if hi <= lo:
        raise ValueError("histogram: hi must exceed lo")
    bins = max(int(bins), 1)
    counts = [0] * bins
    width_bin = (hi - lo) / bins
    for v in values:
        v = float(v)
        if not math.isfinite(v):
            continue
        i = math.floor((v - lo) / width_bin + 1e-9)
        counts[min(max(i, 0), bins - 1)] += 1
    left, right = 64.0, width - 16.0
    mark_colours = [PALETTE[(i + 1) % len(PALETTE)] for i in range(len(markers))]
    legend: list[tuple[str, str, str]] = [("box", color, y_label or "count")]
    if band is not None:
        legend.append(("band", PALETTE[2], band[2]))
    legend += [("dash", c, lab) for c, (_, lab) in zip(mark_colours, markers, strict=True)]
    top = 40.0 + _legend_height(legend, left, right) + 8
    bottom = height - (48.0 if x_label else 30.0)
    ticks = nice_ticks(0.0, max(counts) or 1)
    ticks = [t for t in ticks if float(t).is_integer()] or [0.0, 1.0]
    ymax = ticks[-1]

    def sx(x: float) -> float:
        return left + (right - left) * ((min(max(x, lo), hi) - lo) / (hi - lo))

    def sy(v: float) -> float:
        y = bottom - (bottom - top) * (v / ymax)
        return min(y, bottom - 2.0) if v > 0 else y  # a non-zero bar stays visible

    parts = [_text(width / 2, 22, title, size=TITLE_SIZE, anchor="middle", weight="bold")]
    parts += _legend(legend, left, 44.0, right)
    parts += _y_axis(ticks, sy, left, right, y_label, top, bottom, fmt_num)
    if band is not None:
        x0, x1 = sx(min(band[0], band[1])), sx(max(band[0], band[1]))
        parts.append(
            _rect(
                x0,
                top,
                max(x1 - x0, 1.0),
                bottom - top,
                PALETTE[2],
                title=band[2],
                extra='fill-opacity="0.18"',
            )
        )
    for i, n in enumerate(counts):
        if n == 0:
            continue
        a, b = lo + i * width_bin, lo + (i + 1) * width_bin
        x0, x1 = sx(a), sx(b)
        parts.append(
            _rect(
                x0 + 0.5,
                sy(n),
                x1 - x0 - 1,
                bottom - sy(n),
                color,
                title=f"[{fmt_num(a)}, {fmt_num(b)}): {n}",
            )
        )
        parts.append(_text((x0 + x1) / 2, sy(n) - 4, str(n), size=TICK_SIZE, anchor="middle"))
    for t in nice_ticks(lo, hi, 10):
        if lo - 1e-12 <= t <= hi + 1e-12:
            parts.append(_line(sx(t), bottom, sx(t), bottom + 4, AXIS))
            parts.append(
                _text(sx(t), bottom + 16, fmt_num(t), size=TICK_SIZE, anchor="middle", fill=MUTED)
            )
    for c, (x, lab) in zip(mark_colours, markers, strict=True):
        parts.append(
            f"<g>{_line(sx(x), top, sx(x), bottom, c, width=2, dash='6 4')}<title>{esc(lab)}</title></g>"
        )
    parts.append(_line(left, bottom, right, bottom, AXIS))
    if x_label:
        parts.append(_text((left + right) / 2, height - 10, x_label, anchor="middle"))
    return _svg(width, height, title, parts)


MAX_LIST = 8


def fmt_value(v: Any) -> str:
    """Plain text for an observed/expected value (escaped later by the caller)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return fmt_num(v)
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    if isinstance(v, Mapping):
        return "; ".join(f"{k} = {fmt_value(v[k])}" for k in sorted(v, key=str))
    if isinstance(v, list | tuple):
        shown = ", ".join(fmt_value(x) for x in v[:MAX_LIST])
        more = f", … (+{len(v) - MAX_LIST} more)" if len(v) > MAX_LIST else ""
        return f"[{shown}{more}]"
    return str(v)
