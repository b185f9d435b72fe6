"""The figure of docs/benchmarks/edge-scaling.md: search cost by store size and with many users.

Drawn from the results in one folder: ``edge-scaling.json`` (``edge_scaling.py``:
latency and throughput by store size) and ``edge-tenants.json``
(``edge_tenants.py``: latency per user size with 10,000 users), whichever
are there, into ``edge-scaling.png``. Each benchmark redraws it after its run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["render"]

_STYLES = {
    "edge": ("tab:blue", "o", "Qdrant Edge (default, exact)"),
    "edge-hnsw": ("tab:green", "s", "Qdrant Edge after HNSW"),
    "qdrant-local": ("tab:red", "^", "qdrant-client local mode (0.1's store)"),
}


def _growth(scaling: dict[str, Any], latency: Any, throughput: Any) -> None:
    rows = [r for r in scaling["results"] if "search_ms_p50" in r]
    for engine, (color, marker, label) in _STYLES.items():
        mine = sorted((r for r in rows if r["engine"] == engine), key=lambda r: r["size"])
        if not mine:
            continue
        sizes = [r["size"] for r in mine]
        p95 = [r["search_ms_p95"] for r in mine]
        p50 = [r["search_ms_p50"] for r in mine]
        latency.plot(sizes, p95, marker=marker, color=color, label=f"{label} p95")
        latency.plot(
            sizes, p50, marker=marker, color=color, linestyle="--", alpha=0.6, label=f"{label} p50"
        )
        throughput.plot(
            sizes,
            [r["searches_per_s_8_in_flight"] for r in mine],
            marker=marker,
            color=color,
            label=label,
        )
    latency.axhline(15, color="grey", linestyle=":", label="goal: p95 15 ms")
    for ax in (latency, throughput):
        ax.set_xscale("log")
        ax.set_xlabel("memories in the store")
        ax.grid(alpha=0.3)
    latency.set_yscale("log")
    latency.set_ylabel("mem0 search latency (ms)")
    latency.set_title("search through mem0, one of 10 users, top 5")
    throughput.set_ylabel("searches per second, 8 in flight")
    throughput.set_title("throughput")
    latency.legend(fontsize=7)
    throughput.legend(fontsize=7)


_WAYS = {  # way of reading payloads: (legend, colour)
    "kept": ("payloads read for the kept hits", "tab:blue"),
    "every": ("every candidate's payload read", "tab:gray"),
}


def _tenants(tenants: dict[str, Any], ax: Any) -> None:
    groups = [
        (mix, group)
        for mix in tenants["mixes"]
        for group in ("small", "big")
        if f"kept/{group}/mem0" in mix["latency_ms"]
    ]
    labels = []
    for x, (mix, group) in enumerate(groups):
        size = max(mix["user_sizes"]) if group == "big" else min(mix["user_sizes"])
        labels.append(f"{mix['mix']}\n{mix['memories']:,}, user of {size:,}")
        for offset, (way, (legend, color)) in enumerate(_WAYS.items()):
            mem0 = mix["latency_ms"][f"{way}/{group}/mem0"]
            store = mix["latency_ms"][f"{way}/{group}/store"]
            pos = x + (offset - 0.5) * 0.38
            first = x == 0
            ax.bar(pos, mem0["p95"], width=0.36, color=color, alpha=0.4)
            ax.bar(pos, mem0["p50"], width=0.36, color=color)
            ax.plot(pos, store["p95"], "k_", markersize=14)
            if first:  # one legend entry per way
                ax.bar(pos, 0, color=color, label=f"{legend}: p50 (dark), p95")
    ax.plot([], [], "k_", markersize=14, label="p95 at the store (no mem0)")
    ax.axhline(10, color="grey", linestyle=":", label="goal: p95 10 ms")
    ax.set_xticks(range(len(groups)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("mem0 search latency (ms)")
    users = max(mix["users"] for mix in tenants["mixes"])
    ax.set_title(f"many users (up to {users:,}), no HNSW")
    ax.legend(fontsize=7)


def render(out_dir: Path) -> Path | None:
    """Redraw ``out_dir/edge-scaling.png`` from the results there; ``None`` if there are none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = {
        name: json.loads(path.read_text())
        for name in ("edge-scaling", "edge-tenants")
        if (path := out_dir / f"{name}.json").is_file()
    }
    panels = 2 * ("edge-scaling" in found) + ("edge-tenants" in found)
    if not panels:
        return None
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.4))
    axes = list(axes) if panels > 1 else [axes]
    if "edge-scaling" in found:
        _growth(found["edge-scaling"], axes.pop(0), axes.pop(0))
    if "edge-tenants" in found:
        _tenants(found["edge-tenants"], axes.pop(0))
    fig.tight_layout()
    path = out_dir / "edge-scaling.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
