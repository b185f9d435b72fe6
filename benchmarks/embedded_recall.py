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
import contextlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _locomo import CachedE5Embedding, load_conversations
from _recall_cv import cross_validate, in_sample, mean_recall
from _recall_report import plot, render

from agentscope_mem0 import build_local_memory, build_mem0_config
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0.local import close_shared_clients, install_keyword_encoder
from agentscope_mem0.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
OUT_DIR = ROOT / "docs" / "benchmarks"
RELEASE_02 = "30d9697"  # the commit of release 0.2
KS = (5, 10)
TOP_K = max(KS)

logger = logging.getLogger("embedded_recall")


# --- the variants ------------------------------------------------------------


def variant_grid(quick: bool) -> dict[str, dict[str, Any]]:
    """Name -> settings. ``family`` says which question a variant answers."""
    grid: dict[str, dict[str, Any]] = {}
    ks = (3, 5, 10) if quick else (2, 3, 5, 10, 20, 60)
    weights = (0.7, 1.0, 1.5) if quick else (0.5, 0.7, 1.0, 1.5, 2.0)
    for k in ks:
        for w in weights:
            grid[f"rrf-k{k}-w{w}"] = {"family": "fusion", "rrf_k": k, "dense_weight": w}
    grid["dbsf"] = {"family": "fusion", "fusion": "dbsf"}
    docs = (2, 3) if quick else (2, 3, 5)
    gammas = (1.0,) if quick else (0.5, 1.0, 2.0)
    fb_ks = (5,) if quick else (3, 5, 10)
    fb_weights = (1.0,) if quick else (0.7, 1.0, 1.5)
    for m in docs:
        for g in gammas:
            for k in fb_ks:
                for w in fb_weights:
                    grid[f"feedback-m{m}-g{g}-k{k}-w{w}"] = {
                        "family": "feedback",
                        "rrf_k": k,
                        "dense_weight": w,
                        "feedback_docs": m,
                        "feedback_weight": g,
                    }
    for lam in (0.5, 0.7, 0.9):
        grid[f"mmr-{lam}"] = {"family": "mmr", "rrf_k": 5, "mmr": lam}
    for w in (0.1, 0.3, 1.0):
        grid[f"recency-{w}"] = {"family": "recency", "rrf_k": 5, "recency": w}
    for k in (3, 5, 10):
        grid[f"idf-user-k{k}"] = {"family": "idf-user", "rrf_k": k, "idf_user": True}
    return grid


PROVIDER_FIELDS = ("fusion", "rrf_k", "dense_weight", "feedback_docs", "feedback_weight")
BASE = {
    "fusion": "rrf",
    "rrf_k": 5,
    "dense_weight": 1.0,
    "feedback_docs": 0,
    "feedback_weight": 1.0,
}
RELEASE_02_DEFAULT = {"fusion": "rrf", "rrf_k": 5, "dense_weight": 1.0}


@contextlib.contextmanager
def configured(store: Any, settings: dict[str, Any], latest: dict[str, str]) -> Iterator[None]:
    """The Edge store searching with ``settings``; experiments patch its engine query."""
    saved = {name: getattr(store, name) for name in PROVIDER_FIELDS}
    for name in PROVIDER_FIELDS:
        setattr(store, name, {**BASE, **settings}.get(name, BASE[name]))
    patches = {k: settings[k] for k in ("mmr", "recency", "idf_user") if k in settings}
    if patches:
        store.search = types.MethodType(_experimental_search(patches, latest), store)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(store, name, value)
        store.__dict__.pop("search", None)


def _experimental_search(patches: dict[str, Any], latest: dict[str, str]) -> Any:
    """A search whose final engine query adds MMR, a recency formula or per-user IDF."""
    from qdrant_edge import (
        DecayKind,
        Expression,
        Formula,
        Fusion,
        IdfParams,
        Mmr,
        Prefetch,
        Query,
        QueryRequest,
        SearchParams,
    )

    from agentscope_mem0._recall.fusion import rrf_weights
    from agentscope_mem0.local._edge import SPARSE

    def fused(self: Any, dense: Any, sparse: Any, condition: Any, depth: int, limit: int, **_: Any):
        params = SearchParams(idf=IdfParams(corpus=condition)) if patches.get("idf_user") else None
        inner = [
            Prefetch(limit=depth, query=Query.Nearest(dense), filter=condition),
            Prefetch(
                limit=depth,
                query=Query.Nearest(sparse, using=SPARSE),
                filter=condition,
                params=params,
            ),
        ]
        rrf = Fusion.Rrf(k=self.rrf_k, weights=rrf_weights(self.dense_weight))
        if "mmr" in patches:
            outer = [Prefetch(limit=depth, prefetches=inner, query=rrf, filter=condition)]
            query: Any = Mmr(dense, patches["mmr"], depth)
        elif "recency" in patches:
            outer = [Prefetch(limit=depth, prefetches=inner, query=rrf, filter=condition)]
            # score x (1 + w * exp-decay of the time since it was said, half-life 30 days)
            decay = Expression.Decay(
                DecayKind.Exp,
                Expression.DatetimeKey("said_at"),
                target=Expression.Datetime(self._now),
                midpoint=0.5,
                scale=30 * 86400.0,
            )
            boost = Expression.Sum(
                [
                    Expression.Constant(1.0),
                    Expression.Mult([Expression.Constant(patches["recency"]), decay]),
                ]
            )
            query = Formula(Expression.Mult([Expression.Variable("$score"), boost]))
        else:
            outer, query = inner, rrf
        request = QueryRequest(
            limit=limit, prefetches=outer, query=query, filter=condition, with_payload=True
        )
        return self.shard.call("experiment", lambda s: s.query(request))

    def search(self: Any, query: Any, vectors: Any, top_k: int = 5, filters: Any = None) -> Any:
        self._now = latest.get((filters or {}).get("user_id"), datetime.now(UTC).isoformat())
        self._fused = types.MethodType(fused, self)
        try:
            return type(self).search(self, query, vectors, top_k, filters)
        finally:
            del self._fused

    return search


# --- the stores --------------------------------------------------------------


def release_02_encoder() -> Any:
    """Release 0.2's keyword encoder, loaded from this repository's history."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{RELEASE_02}:src/agentscope_mem0/local/_keyword.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("release_02_keyword")
    exec(compile(source, "release_02_keyword.py", "exec"), module.__dict__)
    return module.KeywordEncoder()


def said_at(date: str, position: int) -> str:
    """A turn's time: its session's date (LoCoMo's "1:56 pm on 8 May, 2023") plus its place."""
    try:
        start = datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        start = datetime(2023, 1, 1, tzinfo=UTC)
    return (start + timedelta(seconds=position)).isoformat()


def build_stores(folder: Path, model: Any) -> dict[str, Any]:
    """The four mem0 clients, empty."""
    chat = ScriptedChatModel()
    edge = build_local_memory(chat, embedding_model=model, folder=folder / "edge")
    old_edge = build_local_memory(chat, embedding_model=model, folder=folder / "edge-0.2")
    old_edge.vector_store._bm25_encoder = release_02_encoder()

    def server(provider: str, name: str) -> Any:
        from mem0 import AsyncMemory

        fields = {
            "vector_store": {
                "provider": provider,
                "config": {
                    "collection_name": "locomo",
                    "embedding_model_dims": model.dimensions,
                    "path": str(folder / name),
                },
            },
            "history_db_path": str(folder / f"{name}-history.db"),
        }
        config = build_mem0_config(chat_model=chat, embedding_model=model, mem0_config=fields)
        return AsyncMemory(config=config)

    new_server = server("agentscope_qdrant", "server")
    old_server = server("qdrant", "server-0.2")
    install_keyword_encoder(old_server, release_02_encoder())
    return {"edge": edge, "edge-0.2": old_edge, "server": new_server, "server-0.2": old_server}


async def store_turns(
    memory: Any, conversations: list[dict[str, Any]]
) -> tuple[dict[str, str], float]:
    """Every turn, one ``add`` each; returns memory id -> turn id, and the seconds taken."""
    backend = Mem0Backend(memory)
    to_turn: dict[str, str] = {}
    started = time.perf_counter()
    for conv in conversations:
        scope = Scope(user_id=conv["id"])
        for turn in conv["turns"]:
            message = {"role": "user", "content": turn["text"], "said_at": turn["said_at"]}
            results = await backend.add(
                [message], scope, infer=False, metadata={"dia_id": turn["dia_id"]}
            )
            for result in results:
                to_turn[str(result["id"])] = turn["dia_id"]
    return to_turn, time.perf_counter() - started


async def rank_all(
    memory: Any, to_turn: dict[str, str], conversations: list[dict[str, Any]]
) -> tuple[dict[str, list[list[str]]], float]:
    """Conversation -> the turn ids found for each of its questions; and seconds per search."""
    backend = Mem0Backend(memory)
    out: dict[str, list[list[str]]] = {}
    started = time.perf_counter()
    count = 0
    for conv in conversations:
        scope = Scope(user_id=conv["id"])
        rows = []
        for q in conv["questions"]:
            hits = await backend.search(q["question"], scope, top_k=TOP_K)
            rows.append([to_turn.get(str(h.id), "?") for h in hits])
            count += 1
        out[conv["id"]] = rows
    return out, (time.perf_counter() - started) / max(count, 1)


def keyword_only(memory: Any, to_turn: dict[str, str], conversations: list[dict[str, Any]]) -> Any:
    """The engine's BM25 alone (the store's keyword ranking, not a mem0 path)."""
    out = {}
    for conv in conversations:
        rows = []
        for q in conv["questions"]:
            hits = memory.vector_store.keyword_hits(
                q["question"], top_k=TOP_K, filters={"user_id": conv["id"]}
            )
            rows.append([to_turn.get(str(h.id), "?") for h in hits])
        out[conv["id"]] = rows
    return out


# --- scoring -----------------------------------------------------------------


def recalls(
    rankings: dict[str, list[list[str]]], conversations: list[dict[str, Any]], k: int
) -> dict[str, list[float]]:
    """Conversation -> recall@k of each answerable (category 1-4) question."""
    out: dict[str, list[float]] = {}
    for conv in conversations:
        values = []
        for ranking, q in zip(rankings[conv["id"]], conv["questions"], strict=True):
            if q["category"] != 5:
                values.append(len(set(ranking[:k]) & set(q["evidence"])) / len(q["evidence"]))
        out[conv["id"]] = values
    return out


def summary(rankings: dict[str, list[list[str]]], conversations: list[dict[str, Any]]) -> dict:
    ids = [c["id"] for c in conversations]
    row: dict[str, Any] = {}
    for k in KS:
        per_conv = recalls(rankings, conversations, k)
        row[f"recall@{k}"] = round(mean_recall(per_conv, ids), 4)
        row[f"recall@{k}_by_conversation"] = {c: round(mean_recall(per_conv, [c]), 4) for c in ids}
    by_cat: dict[str, list[float]] = {}
    for conv in conversations:
        for ranking, q in zip(rankings[conv["id"]], conv["questions"], strict=True):
            if q["category"] != 5:
                hit = len(set(ranking[:TOP_K]) & set(q["evidence"])) / len(q["evidence"])
                by_cat.setdefault(str(q["category"]), []).append(hit)
    row["recall@10_by_category"] = {c: round(sum(v) / len(v), 4) for c, v in sorted(by_cat.items())}
    return row


def choose(
    grid: dict[str, dict[str, Any]],
    per_variant: dict[str, dict[str, list[float]]],
    conversations: list[str],
    fit: int,
) -> dict[str, Any]:
    """Cross-validated choice within each family, and within the families kept."""
    families = sorted({v["family"] for v in grid.values()} - {"fusion"})
    fusion = [n for n, v in grid.items() if v["family"] == "fusion"]

    def evaluate(candidates: list[str]) -> dict[str, Any]:
        folds = cross_validate(per_variant, candidates, conversations, fit)
        name, score = in_sample(per_variant, candidates, conversations)
        return {
            "cv_recall@10": round(sum(f.held_out_recall for f in folds) / len(folds), 4),
            "in_sample_choice": name,
            "in_sample_recall@10": round(score, 4),
            "folds": [
                {
                    "fit": list(f.fit),
                    "held_out": list(f.held_out),
                    "chosen": f.chosen,
                    "fit_recall@10": round(f.fit_recall, 4),
                    "held_out_recall@10": round(f.held_out_recall, 4),
                }
                for f in folds
            ],
        }

    out: dict[str, Any] = {"fusion": evaluate(fusion)}
    kept = []
    for family in families:
        members = [n for n, v in grid.items() if v["family"] == family]
        out[f"fusion+{family}"] = evaluate(fusion + members)
        if out[f"fusion+{family}"]["cv_recall@10"] > out["fusion"]["cv_recall@10"]:
            kept.append(family)
    final = fusion + [n for n, v in grid.items() if v["family"] in kept]
    out["kept_families"] = kept
    out["final"] = evaluate(final)
    return out


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
    chosen = choose(grid, per_variant, ids, fit)
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


def package_defaults() -> dict[str, Any]:
    """The search settings the providers ship with (to compare with the chosen ones)."""
    from agentscope_mem0._recall.fusion import FusionSettings

    return FusionSettings().model_dump()


@contextlib.contextmanager
def configured_server(store: Any, settings: dict[str, Any]) -> Iterator[None]:
    saved = {name: getattr(store, name) for name in PROVIDER_FIELDS}
    for name in PROVIDER_FIELDS:
        setattr(store, name, {**BASE, **settings}.get(name, BASE[name]))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(store, name, value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="a small grid (a smoke run)")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--render", type=Path, default=None, help="only rewrite the report")
    args = parser.parse_args(argv)
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
