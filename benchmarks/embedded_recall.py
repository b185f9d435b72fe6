"""Recall of the embedded default and of the server path on LoCoMo, settings chosen by CV.

Every turn of each conversation of the LoCoMo development half is stored
through mem0 (``Mem0Backend.add(..., infer=False)``, one ``user_id`` per
conversation, ``"<speaker>: <text>"``, said at its session's date) with the
offline e5 model, whose vectors are cached on disk (see ``_locomo.py``), in
four stores side by side:

* **edge**: the embedded default (Qdrant Edge, the engine's BM25 keyword vectors);
* **edge, 0.2 keywords**: the same with release 0.2's own keyword encoder
  (read from this repository's history at the 0.2 commit, not kept in the package);
* **server**: the package's Qdrant server provider, on qdrant-client's local
  mode (it speaks the server's Query API; no Qdrant server runs here);
* **server, 0.2**: mem0's own Qdrant provider (what a server got before),
  with release 0.2's encoder installed so that mem0 adds its keyword score.

Each question is asked through the middleware's search path
(``Mem0Backend.search(question, Scope(user), top_k=10)``, mem0's default
threshold); recall@k is the share of its evidence turns among the first k,
averaged over questions; categories 1-4 (5 is adversarial).

Search settings are chosen by cross-validation inside the half: fit on three
conversations, report on the other two, over all ten splits (``_recall_cv.py``).
A family of settings is kept only if choosing within it does better out of
sample than choosing among fusion settings alone. The default is then the
setting chosen on all five conversations within the kept families; the report
gives its in-sample figure and the cross-validated one.

Run from the repository root (LoCoMo is read in place, never copied)::

    python benchmarks/embedded_recall.py
    python benchmarks/embedded_recall.py --limit-conversations 2 --quick

Results go to ``docs/benchmarks/embedded-recall.{md,json,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _locomo import CachedE5Embedding, load_conversations
from _recall_cv import cross_validate, in_sample
from _recall_report import plot, render
from _recall_score import TOP_K, categories_of, choose, recalls, summary
from _recall_stores import build_stores, keyword_only, rank_all, said_at, store_turns
from _recall_variants import (
    RELEASE_02_DEFAULT,
    configured,
    configured_server,
    package_defaults,
    variant_grid,
)

from agentscope_mem0.local import close_shared_clients

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
OUT_DIR = ROOT / "docs" / "benchmarks"

logger = logging.getLogger("embedded_recall")


# --- the variants ------------------------------------------------------------


# --- the run -----------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    conversations = load_conversations(args.data, args.limit_conversations)
    for conv in conversations:
        for position, turn in enumerate(conv["turns"]):
            turn["said_at"] = said_at(turn["date"], position)
    latest = {c["id"]: max(t["said_at"] for t in c["turns"]) for c in conversations}
    ids = [c["id"] for c in conversations]
    model = CachedE5Embedding()
    model.prepare([q["question"] for c in conversations for q in c["questions"]], query=True)
    model.prepare([t["text"] for c in conversations for t in c["turns"]], query=False)

    folder = Path(tempfile.mkdtemp(prefix="embedded-recall-"))
    stores = build_stores(folder, model)
    to_turn: dict[str, dict[str, str]] = {}
    fill_s: dict[str, float] = {}
    for name, memory in stores.items():
        to_turn[name], fill_s[name] = await store_turns(memory, conversations)
        logger.info("stored every turn in %s in %.0f s", name, fill_s[name])

    grid = variant_grid(args.quick)
    edge = stores["edge"].vector_store
    rankings: dict[str, dict[str, list[list[str]]]] = {}
    ms: dict[str, float] = {}
    for name, settings in grid.items():
        with configured(edge, settings, latest):
            rankings[name], seconds = await rank_all(stores["edge"], to_turn["edge"], conversations)
        ms[name] = round(seconds * 1000, 2)
        logger.info("%s: %s", name, summary(rankings[name], conversations)["recall@10"])
    per_variant = {name: recalls(r, conversations, TOP_K) for name, r in rankings.items()}
    fit = max(1, len(ids) * 3 // 5)
    chosen = choose(grid, per_variant, categories_of(conversations), fit)
    default = chosen["final"]["in_sample_choice"]

    # Release 0.2's encoder, over the fusion family, in the same run.
    old_edge = stores["edge-0.2"].vector_store
    old_rankings: dict[str, dict[str, list[list[str]]]] = {}
    for name, settings in grid.items():
        if settings["family"] != "fusion":
            continue
        with configured(old_edge, settings, latest):
            old_rankings[name], _ = await rank_all(
                stores["edge-0.2"], to_turn["edge-0.2"], conversations
            )
    old_per_variant = {n: recalls(r, conversations, TOP_K) for n, r in old_rankings.items()}
    fusion_names = list(old_rankings)
    old_folds = cross_validate(old_per_variant, fusion_names, ids, fit)
    encoders = {
        "engine BM25 (now)": chosen["fusion"],
        "release 0.2 encoder": {
            "cv_recall@10": round(sum(f.held_out_recall for f in old_folds) / len(old_folds), 4),
            "in_sample_choice": in_sample(old_per_variant, fusion_names, ids)[0],
            "in_sample_recall@10": round(in_sample(old_per_variant, fusion_names, ids)[1], 4),
        },
    }

    # The rows of the report: each store with the chosen default and with 0.2's default.
    rows: dict[str, Any] = {}
    rows["edge, default"] = summary(rankings[default], conversations)
    release_02_name = "rrf-k5-w1.0"
    rows["edge, 0.2 settings"] = summary(rankings[release_02_name], conversations)
    rows["edge with 0.2 keywords, 0.2 settings"] = summary(
        old_rankings[release_02_name], conversations
    )
    for label, settings in (("default", grid[default]), ("0.2 settings", RELEASE_02_DEFAULT)):
        store = stores["server"].vector_store
        with configured_server(store, settings):
            server_rankings, seconds = await rank_all(
                stores["server"], to_turn["server"], conversations
            )
        rows[f"server, {label}"] = summary(server_rankings, conversations)
        ms[f"server, {label}"] = round(seconds * 1000, 2)
    before, seconds = await rank_all(stores["server-0.2"], to_turn["server-0.2"], conversations)
    rows["server before (mem0's provider, 0.2 keywords)"] = summary(before, conversations)
    ms["server before"] = round(seconds * 1000, 2)
    old_server = stores["server-0.2"].vector_store
    old_server._bm25_encoder = False  # mem0's provider without fastembed: meaning only
    semantic, _ = await rank_all(stores["server-0.2"], to_turn["server-0.2"], conversations)
    rows["semantic only (mem0's provider without fastembed)"] = summary(semantic, conversations)
    rows["keyword only (engine BM25)"] = summary(
        keyword_only(stores["edge"], to_turn["edge"], conversations), conversations
    )

    close_shared_clients()
    shutil.rmtree(folder, ignore_errors=True)
    model.save()

    import mem0

    questions = [q for c in conversations for q in c["questions"]]
    return {
        "command": " ".join(["python", "benchmarks/embedded_recall.py", *sys.argv[1:]]),
        "conversations": ids,
        "turns": sum(len(c["turns"]) for c in conversations),
        "questions": len(questions),
        "questions_by_category": dict(
            sorted(Counter(str(q["category"]) for q in questions).items())
        ),
        "fit_on": fit,
        "default": default,
        "default_settings": grid[default],
        "package_defaults": package_defaults(),
        "choice": chosen,
        "encoders": encoders,
        "rows": rows,
        "variants": {n: {**grid[n], **summary(r, conversations)} for n, r in rankings.items()},
        "ms_per_search": ms,
        "fill_seconds": {k: round(v, 1) for k, v in fill_s.items()},
        "embedding_cache": {"file": str(model.file), "hits": model.hits, "misses": model.misses},
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "mem0ai": getattr(mem0, "__version__", "?"),
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="a small grid (a smoke run)")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--render", type=Path, default=None, help="only rewrite the report")
    args = parser.parse_args(argv)
    if args.limit_conversations is not None and args.limit_conversations < 2:
        parser.error("--limit-conversations: cross-validation needs at least 2 conversations")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("mem0", "httpx", "as", "agentscope_mem0"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    if args.render:
        result = json.loads(args.render.read_text())
        # The check is of the code as it is now against the recorded choice.
        result["package_defaults"] = package_defaults()
        args.render.write_text(json.dumps(result, indent=2) + "\n")
    else:
        result = asyncio.run(run(args))
        partial = args.limit_conversations or args.quick
        stem = "embedded-recall-partial" if partial else "embedded-recall"
        args.render = args.out_dir / f"{stem}.json"
        args.out_dir.mkdir(parents=True, exist_ok=True)
        args.render.write_text(json.dumps(result, indent=2) + "\n")
    args.render.with_suffix(".md").write_text(render(result))
    plot(result, args.render.with_suffix(".png"))
    logger.info("default %s: %s", result["default"], result["rows"]["edge, default"])


if __name__ == "__main__":
    main()
