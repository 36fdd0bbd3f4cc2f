#!/usr/bin/env python3
"""Reads the screenshots run.sh took and prints docs/contrast.md.

Where each style is drawn comes from map.txt (the same screen captured by
tmux with its escapes, the light palette named): each cell's 256-colour
foreground and background name its pair. For each case and pair, the cells
of that pair are cut out of the screenshot (the xterm window is at 0,0 with
no border, 120x40 cells); in each cell the most common colour is the
background and every other pixel is the glyph's. "Drawn" is the pixel of
most contrast with the background over all the pair's glyphs (a bold
stroke's full coverage: the colour the terminal drew), "thinnest glyph" the
most contrasting pixel of the glyph whose best pixel contrasts least (a
thin stroke that never covers a whole pixel), "median" the median contrast
of all the glyphs' pixels, which anti-aliasing pulls down. "Met" compares
the drawn colour with the goal. Contrast is WCAG 2.2's.
"""

import re
import statistics
import sys
from collections import Counter
from pathlib import Path

COLS, ROWS = 120, 40
# The light palette's indices (src/console/theme.rs), as drawn in map.txt.
PAIRS = {
    ("fg", None): "body text (terminal's own colours)",
    ("reverse", None): "active tab (terminal's own, reversed)",
    ("fg", 22): "green: confirmed",
    ("fg", 88): "red: a difference",
    ("fg", 90): "amber: unknown, warnings",
    ("fg", 20): "accent: headings, keys, prepared",
    ("fg", 55): "magenta: not_applied",
    ("fg", 239): "grey: lines between panels",
    ("bg", 117): "title bar and reviewer badge",
    ("bg", 153): "cursor row",
}
# The amber of each palette, which tells which palette a screenshot shows.
AMBER = {(0x87, 0x00, 0x87): "light", (0xFF, 0x87, 0xFF): "dark", (0xD7, 0x00, 0xAF): "unknown"}
GOAL = {"light": 7.0, "dark": 7.0, "unknown": 4.5}
CASES = [
    ("white-xterm-answered", "xterm, white, OSC 11 answered"),
    ("white-xterm-unknown", "xterm, white, no answer (allowColorOps false)"),
    ("white-tmux-answered", "xterm + tmux, white, tmux answers (window-style bg=#ffffff)"),
    ("white-tmux-unknown", "xterm + tmux, white, no answer (tmux does not pass it on)"),
    ("black-xterm-answered", "xterm, black, OSC 11 answered"),
    ("black-xterm-unknown", "xterm, black, no answer (allowColorOps false)"),
    ("black-tmux-answered", "xterm + tmux, black, tmux answers (window-style bg=#000000)"),
    ("black-tmux-unknown", "xterm + tmux, black, no answer (tmux does not pass it on)"),
    ("white-tmux-ansi", "xterm + tmux, tmux answers (window-style bg=white, ANSI 7)"),
]


def luminance(rgb):
    def linear(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def cells(path):
    """map.txt as ROWS rows of (char, fg, bg, reverse) per cell."""
    fg = bg = None
    reverse = False
    grid = []
    for line in path.read_text(encoding="utf-8").split("\n")[:ROWS]:
        row = []
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            if part.startswith("\x1b["):
                codes = [int(c) if c else 0 for c in part[2:-1].split(";")]
                i = 0
                while i < len(codes):
                    c = codes[i]
                    if c == 0:
                        fg = bg = None
                        reverse = False
                    elif c == 7:
                        reverse = True
                    elif c == 27:
                        reverse = False
                    elif c == 39:
                        fg = None
                    elif c == 49:
                        bg = None
                    elif c in (38, 48) and codes[i + 1 : i + 2] == [5]:
                        if c == 38:
                            fg = codes[i + 2]
                        else:
                            bg = codes[i + 2]
                        i += 2
                    i += 1
            else:
                row.extend((ch, fg, bg, reverse) for ch in part)
        grid.append(row + [(" ", None, None, False)] * (COLS - len(row)))
    return grid


def pair_of(fg, bg, reverse):
    if bg is not None:
        return ("bg", bg)
    if reverse:
        return ("reverse", None)
    return ("fg", fg)


def read_ppm(path):
    """A binary PPM (P6, 8 bits): width, height and the RGB bytes."""
    data = path.read_bytes()
    fields, at = [], 0
    while len(fields) < 4:
        while data[at : at + 1].isspace():
            at += 1
        if data[at : at + 1] == b"#":
            at = data.index(b"\n", at) + 1
            continue
        end = at
        while not data[end : end + 1].isspace():
            end += 1
        fields.append(data[at:end])
        at = end
    assert fields[0] == b"P6" and fields[3] == b"255", path
    return int(fields[1]), int(fields[2]), data[at + 1 :]


def measure(out, name, grid):
    width, _, pixels = read_ppm(out / f"{name}.ppm")
    window = (out / f"{name}.window").read_text()
    w, h = (int(v) for v in re.search(r"(\d+)x(\d+)\+0\+0", window).groups())
    cw, ch = w // COLS, h // ROWS

    def cell_pixels(col, row):
        for y in range(row * ch, (row + 1) * ch):
            for x in range(col * cw, (col + 1) * cw):
                at = 3 * (y * width + x)
                yield tuple(pixels[at : at + 3])

    found = {}
    for row, line in enumerate(grid):
        for col, (char, fg, bg, reverse) in enumerate(line):
            key = pair_of(fg, bg, reverse)
            if key not in PAIRS or not char.strip():
                continue
            # Letters and digits for text, the line drawing for the lines.
            if key != ("fg", 239) and not char.isalnum():
                continue
            seen = Counter(cell_pixels(col, row))
            paper = seen.most_common(1)[0][0]
            glyph = [p for p in seen.elements() if p != paper]
            if not glyph:
                continue
            ink = max(set(glyph), key=lambda p: contrast(p, paper))
            found.setdefault(key, []).append((ink, paper, [contrast(p, paper) for p in glyph]))
    return found


def hexed(rgb):
    return "#%02x%02x%02x" % rgb


def main():
    out = Path(sys.argv[1])
    grid = cells(out / "map.txt")
    print("# Contrast measured on a real xterm\n")
    print("[Back to the console](console.md)\n")
    print(__doc__.strip().replace("\n\n", "\n\n"))
    print(
        "\nGenerated by `docs/contrast/run.sh` (xterm with DejaVu Sans Mono 11, "
        "TERM=xterm-256color; tmux 3.x with default-terminal tmux-256color and no "
        "status line; `recon` on `recon demo`'s workspace at 120x40, the `all` filter, "
        "op-1007 selected). The goal is 7:1 where a palette for a known background "
        "is drawn and 4.5:1 where the background is unknown; \"palette\" is the one "
        "the screenshot shows, told by its amber.\n"
    )
    print(
        "| pair | terminal setup | palette | drawn on background | drawn | "
        "thinnest glyph | median pixel | goal | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, setup in CASES:
        found = measure(out, name, grid)
        ambers = Counter(ink for ink, _, _ in found.get(("fg", 90), []))
        palette = AMBER.get(ambers.most_common(1)[0][0], "?") if ambers else "?"
        goal = GOAL.get(palette, 7.0)
        for key, label in PAIRS.items():
            samples = found.get(key, [])[:40]
            if not samples:
                print(f"| {label} | {setup} | {palette} | not on screen | | | | | |")
                continue
            drawn = max(samples, key=lambda s: contrast(s[0], s[1]))
            ratio = contrast(drawn[0], drawn[1])
            thinnest = min(contrast(ink, paper) for ink, paper, _ in samples)
            median = statistics.median(r for _, _, rs in samples for r in rs)
            met = "yes" if ratio >= goal else "**no**"
            print(
                f"| {label} | {setup} | {palette} | {hexed(drawn[0])} on {hexed(drawn[1])} "
                f"| {ratio:.2f} | {thinnest:.2f} | {median:.2f} | {goal} | {met} |"
            )


main()
