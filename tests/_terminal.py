"""A command run in a pseudo-terminal (``capture``), and the screen it leaves at given moments
rendered to HTML (``\\r``, ``\\n``, ESC[K and SGR colours: ``page``), for a headless-chromium
screenshot of what a person sees (``tests/browser/test_progress_terminal.py``).

    python tests/_terminal.py capture.json out.html 6 12 end   # a saved capture
"""

from __future__ import annotations

import html
import json
import os
import pty
import re
import select
import struct
import sys
import time

SGR = re.compile(r"\x1b\[([0-9;]*)m")
COLOURS = {"31": "#f14c4c", "32": "#23d18b", "1": "bold", "2": "dim"}


def screen(chunks: list, until: float) -> list[list[tuple[str, str]]]:
    """Lines of (style, char) as a terminal shows them after ``until`` seconds."""
    lines: list[list[tuple[str, str]]] = [[]]
    col, style = 0, ""
    text = "".join(c for t, c in chunks if t <= until)
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\x1b":
            m = SGR.match(text, i)
            if m:
                style = "" if m.group(1) in ("", "0") else m.group(1)
                i = m.end()
                continue
            if text.startswith("\x1b[K", i):
                del lines[-1][col:]
                i += 3
                continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append([])
            col = 0
        else:
            row = lines[-1]
            cell = (style, ch)
            if col < len(row):
                row[col] = cell
            else:
                row.append(cell)
            col += 1
        i += 1
    return lines


def to_html(lines: list[list[tuple[str, str]]]) -> str:
    out = []
    for row in lines:
        parts = []
        for style, ch in row:
            c = html.escape(ch)
            if style == "1":
                c = f"<b>{c}</b>"
            elif style == "2":
                c = f'<span style="color:#888">{c}</span>'
            elif style in COLOURS:
                c = f'<span style="color:{COLOURS[style]}">{c}</span>'
            parts.append(c)
        out.append("".join(parts))
    return "\n".join(out)


def capture(argv: list[str], env: dict[str, str], columns: int = 110) -> dict:
    """Run ``argv`` in a pseudo-terminal of ``columns``; every chunk it writes with the second
    it arrived, and its exit code: ``{"rc", "chunks": [[seconds, text], ...]}``."""
    import fcntl
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execvpe(argv[0], argv, {**env, "TERM": "xterm-256color", "COLUMNS": str(columns)})
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    t0, chunks = time.time(), []
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    break
                chunks.append((time.time() - t0, data.decode(errors="replace")))
        except OSError:  # the child closed the terminal
            break
    _, status = os.waitpid(pid, 0)
    return {"rc": os.waitstatus_to_exitcode(status), "chunks": chunks}


def page(cap: dict, moments: list[str]) -> str:
    """An HTML page with the screen at each moment (seconds, or ``end``)."""
    chunks = cap["chunks"]
    end = chunks[-1][0] if chunks else 0.0
    panels = []
    for when in moments:
        t = end if when == "end" else float(when)
        title = f"privfair run (stderr is a terminal) at {t:.0f} s" + (
            " (finished)" if when == "end" else " (running)"
        )
        body = to_html(screen(chunks, t))
        panels.append(f"<h3>{html.escape(title)}</h3><pre>{body}</pre>")
    return (
        "<!doctype html><meta charset=utf-8><style>body{background:#1e1e1e;color:#ddd;"
        "font:13px 'DejaVu Sans Mono',monospace;margin:12px}h3{color:#9cdcfe;font:bold 13px "
        "sans-serif;margin:10px 0 4px}pre{margin:0;padding:8px;border:1px solid #444;"
        "white-space:pre}</style>" + "".join(panels)
    )


def main() -> None:
    with open(sys.argv[1]) as f:
        cap = json.load(f)
    with open(sys.argv[2], "w") as f:
        f.write(page(cap, sys.argv[3:]))


if __name__ == "__main__":
    main()
