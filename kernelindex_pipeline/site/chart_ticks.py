"""Which x tick labels a chart prints: those that fit side by side without touching."""

from __future__ import annotations

# A tick label's extent along the axis in viewBox units (the SVG scales as a whole, so labels apart here are
# apart at every width): its characters at 13 px, digits and lower case at most 0.62 em wide in the sans
# fonts pages fall back to, or its line height when it stands upright; and the space kept between two.
TICK_FONT, TICK_EM, TICK_GAP = 13, 0.62, 6


def legible(labels: list[tuple], at: dict, upright: bool) -> list[tuple]:
    """The tick labels (value, text), in axis order, that fit side by side without touching: the first, the
    last where it fits beside it, and between them each label that fits beside its kept neighbours (a log
    axis's crowded largest values keep one in a few). `at`: each value's x in viewBox units."""
    def extent(text: str) -> float:
        return TICK_FONT * 1.2 if upright else len(text) * TICK_FONT * TICK_EM

    def apart(left: tuple, right: tuple) -> bool:
        return at[right[0]] - at[left[0]] >= (extent(left[1]) + extent(right[1])) / 2 + TICK_GAP

    kept = labels[:1]
    for label in labels[1:-1]:
        if apart(kept[-1], label) and apart(label, labels[-1]):
            kept.append(label)
    return kept + labels[-1:] if len(labels) > 1 and apart(kept[-1], labels[-1]) else kept
