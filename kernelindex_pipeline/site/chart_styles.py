"""How the charts draw each implementation: one line style per provider over every chart of the site (a
colour, then a dash pattern and a marker shape), its markers and its legend sample, as inline SVG."""

from __future__ import annotations

from dataclasses import dataclass

LIGER_ORANGE, BASELINE_BLUE = "#d9480f", "#1c64c8"
# Line styles: Liger's own provider ("liger") orange, solid, with round markers, as on the group pages; the
# others, in name order over every chart of the site, a colour each, then a dash pattern and marker shape
# each, so an implementation looks the same in every chart and a line lying on another shows its own markers.
PALETTE = (BASELINE_BLUE, "#2b8a3e", "#862e9c", "#0b7285", "#c2255c", "#8d5a1a", "#495057", "#e0a100", "#5f3dc4")
DASHES = ("", "7 4", "2 3")
MARKERS = ("circle", "square", "triangle", "diamond")


@dataclass(frozen=True)
class LineStyle:
    colour: str
    dash: str
    marker: str


def provider_styles(providers) -> dict[str, LineStyle]:
    """Each provider's line style (see PALETTE), the same wherever it is drawn."""
    providers = set(providers)
    others = sorted(p for p in providers if p != "liger")
    styles = {p: LineStyle(PALETTE[i % len(PALETTE)], DASHES[(i // len(PALETTE)) % len(DASHES)],
                           MARKERS[1 + i % (len(MARKERS) - 1)]) for i, p in enumerate(others)}
    return styles | ({"liger": LineStyle(LIGER_ORANGE, "", MARKERS[0])} if "liger" in providers else {})


def marker(shape: str, x: float, y: float, r: float, colour: str, extra: str = "") -> str:
    """A point's marker of `shape`, centred on (x, y), about 2r across."""
    if shape == "circle":
        return f"<circle cx=\"{x:.1f}\" cy=\"{y:.1f}\" r=\"{r:.1f}\" fill=\"{colour}\"{extra}/>"
    if shape == "square":
        return (f"<rect x=\"{x - r * 0.85:.1f}\" y=\"{y - r * 0.85:.1f}\" width=\"{r * 1.7:.1f}\" height=\"{r * 1.7:.1f}\" "
                f"fill=\"{colour}\"{extra}/>")
    corners = ((0, -1.2), (1.1, 0.8), (-1.1, 0.8)) if shape == "triangle" else ((0, -1.25), (1.25, 0), (0, 1.25), (-1.25, 0))
    points = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in corners)
    return f"<polygon points=\"{points}\" fill=\"{colour}\"{extra}/>"


def swatch(style: LineStyle) -> str:
    """A legend's sample of a line style: a stroke with its dash and marker."""
    dash = f" stroke-dasharray=\"{style.dash}\"" if style.dash else ""
    return (f"<svg class=\"swatch\" viewBox=\"0 0 28 12\" width=\"28\" height=\"12\" aria-hidden=\"true\">"
            f"<line x1=\"1\" y1=\"6\" x2=\"27\" y2=\"6\" stroke=\"{style.colour}\" stroke-width=\"2.5\"{dash}/>"
            f"{marker(style.marker, 14, 6, 4, style.colour)}</svg>")
