"""The figure of bench/nuts.py: steady time per call against the number of chains, one line per system.

matplotlib (installed into .bench-site by `make bench-nuts`) is imported only when a figure is drawn,
with the non-interactive Agg backend, so the benchmark's tables need no plotting library.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence

# One (marker, line style) per system, so the lines stay apart in grey print too.
_STYLES = {
    "abir JAX": ("o", "-"),
    "BlackJAX": ("s", "-"),
    "hand-vectorized JAX": ("^", "--"),
    "abir NumPy": ("D", ":"),
    "plain Python": ("v", ":"),
}


def plot_steady_times(
    series: Mapping[str, Sequence[tuple[int, float]]], path: str | pathlib.Path, title: str
) -> pathlib.Path:
    """Draw `series` (system name -> [(chains, steady seconds), ...]) on log-log axes into the PNG
    `path` (its folder is created) and return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.5, 5.0), layout="constrained")
    batches: set[int] = set()
    for name, points in series.items():
        if not points:
            continue
        xs, ys = zip(*sorted(points), strict=True)
        batches.update(xs)
        marker, style = _STYLES.get(name, (".", "-"))
        ax.plot(xs, ys, marker=marker, linestyle=style, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(batches), [str(b) for b in sorted(batches)])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("chains (batch size)")
    ax.set_ylabel("steady time per call [s]")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
