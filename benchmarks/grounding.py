"""What gets stored, with a real model: junk, ungrounded, bent and lost facts,
before and after the grounding check, side by side in one run.

Each exchange of ``data/grounding.jsonl`` (no-fact exchanges of 15 kinds and
fact exchanges, English and Chinese, split into ``dev`` and ``held-out``) is
written once, for a user of its own, on the embedded default (Qdrant Edge in
a temporary folder, the offline e5 embedder) with an OpenAI-compatible chat
model (``--base-url``; by default the local Qwen2.5-Coder-1.5B-Instruct of
``/work/shared/llm/local-llm``), temperature 0, one attempt per write.

Each side runs in a process of its own: ``after`` on this checkout's
package, ``before`` on the sources ``--before-src`` names (release 0.3:
``git worktree add /tmp/v03 v0.3 && --before-src /tmp/v03/src``).

What is counted, per exchange and style (``--styles``; ``compact`` by default):

* **junk**: any memory stored from an exchange that tells nothing about the user;
* **ungrounded**: a memory naming a capitalised word or a number the exchange
  never says (a date resolved against the day is allowed);
* **found**: a fact exchange's expected facts, each found when one memory holds
  all its keywords; **bent** when that memory puts it in someone else's mouth
  ("was recommended", "should", the case's ``wrong`` words, unless the user
  said them);
* **language**: a memory of a Chinese exchange written without a Chinese character;
* tokens and seconds per write.

``--sweep`` reads the dev half's proposals (what the extraction answered,
before any check) against the word thresholds of
``agentscope_mem0._text.grounding`` and prints how each pair of thresholds
decides them, to choose them on dev and report held-out.

    python benchmarks/grounding.py --before-src /tmp/v03/src \\
        --out docs/benchmarks/grounding.json --plot docs/benchmarks/grounding.png

``--scripted`` runs the same pipeline with the package's ``ScriptedChatModel``
(a smoke run: its figures measure no model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "grounding.jsonl"
SRC = HERE.parent / "src"
DEFAULT_URL = "http://127.0.0.1:8765/v1"
SAID = datetime(2026, 11, 20, 10, tzinfo=UTC)

_ENTITY = re.compile(r"\b(?:[A-Z][a-zA-Z'’-]+|\d[\d.,]*)")
_CJK = re.compile(r"[\u3400-\u9fff]")
_BENT = re.compile(r"recommend|suggest|should|advis|was told|assistant", re.I)
_CALENDAR = " ".join(
    [*(datetime(2024, m, 1).strftime("%B") for m in range(1, 13))]
    + [*(datetime(2024, 1, d).strftime("%A") for d in range(1, 8))]
    + [str(SAID.year + d) for d in (-1, 0, 1)]
).lower()


def load(splits: list[str], data: Path = DATA) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line]
    return [row for row in rows if "all" in splits or row["split"] in splits]


def _bent(memory: str, user: str) -> bool:
    """Whether ``memory`` puts the fact in someone else's mouth ("was recommended"),
    in words the user did not use ("no meat suggestions please" is the user's)."""
    return any(m.group(0).lower() not in user.lower() for m in _BENT.finditer(memory))


def ungrounded(memory: str, exchange: str) -> bool:
    """Whether ``memory`` names a capitalised word or a number the exchange never says."""
    said = f"{exchange} {_CALENDAR}".lower()
    names = [w for w in _ENTITY.findall(memory) if w.lower() not in ("user", "user's", "the")]
    return any(name.lower().rstrip("'’s.,") not in said for name in names)


# -- one side: write every exchange ----------------------------------------------------


def _model(args: argparse.Namespace) -> Any:
    """The chat model as real_model.py builds it (the package's scripted one with --scripted)."""
    from real_model import chat_model, scripted_model

    return scripted_model() if args.scripted else chat_model(args.base_url, args.model, "none")


def _middleware(user: str, model: Any, folder: Path, style: str) -> Any:
    """A middleware as each release spells it (0.4: ``Parameters``; 0.3: keywords)."""
    from agentscope_mem0 import Mem0Middleware

    fields = getattr(getattr(Mem0Middleware, "Parameters", None), "model_fields", {})
    options: dict[str, Any] = {"judge": False, "extraction": style}
    if "extraction" in fields:
        options = {"parameters": Mem0Middleware.Parameters(**options)}
    return Mem0Middleware.local(
        user_id=user, chat_model=model, folder=folder, mode="static_control", **options
    )


class _Proposals:
    """Records what the extraction answered (before any check) for the write under way."""

    def __init__(self, model: Any) -> None:
        self.answers: list[str] = []
        original = model._call_api
        from agentscope_mem0.testing import is_extraction_request

        async def call(model_name: str, messages: list[Any], **kwargs: Any) -> Any:
            response = await original(model_name, messages, **kwargs)
            if is_extraction_request(messages):
                blocks = response.content or []
                self.answers.append("".join(getattr(b, "text", "") or "" for b in blocks))
            return response

        model._call_api = call

    def texts(self) -> list[str]:
        out: list[str] = []
        for answer in self.answers:
            try:  # the outermost braces: what a fenced or chatty answer holds
                parsed = json.loads(answer[answer.index("{") : answer.rindex("}") + 1])
            except ValueError:
                continue
            for item in parsed.get("memory") or [] if isinstance(parsed, dict) else []:
                text = item.get("text") if isinstance(item, dict) else item
                if isinstance(text, str) and text.strip():
                    out.append(text.strip())
        return out


async def write_case(
    case: dict[str, Any],
    style: str,
    model: Any,
    proposals: _Proposals,
    folder: Path,
    timeout: float,
) -> dict[str, Any]:
    """One write of one exchange: what was proposed, what was stored, what it cost."""
    from agentscope_mem0 import RetryPolicy, Scope, WriteQueue

    user = f"u-{case['id']}-{style}"
    mw = _middleware(user, model, folder, style)
    state = mw.client_state
    queue = WriteQueue(
        state.backend,
        outbox_dir=":memory:",
        retry=RetryPolicy(max_attempts=1),
        write_timeout=timeout,
    )
    scope = Scope(user, "helper")
    proposals.answers.clear()
    messages = [
        {"role": "user", "content": case["user"]},
        {"role": "assistant", "content": case["assistant"]},
    ]
    before = state.meter.stats()
    started = time.perf_counter()
    await queue.submit(scope, messages, wait=True, said_at=SAID)
    seconds = time.perf_counter() - started
    after = state.meter.stats()
    failed = queue.stats()["writes_failed"]
    await queue.aclose()
    memories = [hit.memory for hit in await state.backend.get_all(scope, limit=50)]
    checks = getattr(state.backend, "extraction_counts", {}).get("grounding_model_checks", 0)
    await mw.aclose()
    return {
        "case": case["id"],
        "split": case["split"],
        "lang": case["lang"],
        "kind": case["kind"],
        "style": style,
        "proposed": proposals.texts(),
        "memories": memories,
        "failed": bool(failed),
        "seconds": round(seconds, 2),
        "model_checks": checks,
        "tokens_in": after["tokens_in_extraction"] - before["tokens_in_extraction"],
        "tokens_out": after["tokens_out_extraction"] - before["tokens_out_extraction"],
    }


async def run_side(args: argparse.Namespace) -> list[dict[str, Any]]:
    model = _model(args)
    proposals = _Proposals(model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="grounding-") as tmp:
        for style in args.styles:
            for case in load(args.splits, args.data)[: args.limit]:
                row = await write_case(case, style, model, proposals, Path(tmp), args.timeout)
                print(f"{case['id']:<22} {style:<8} {row['seconds']:>6}s {row['memories']}")
                rows.append(row)
    return rows


# -- both sides: run, score, report ----------------------------------------------------


def score(row: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """What one stored exchange counts for."""
    exchange = f"{case['user']}\n{case['assistant']}"
    memories = row["memories"]
    wrong = re.compile("|".join(map(re.escape, case.get("wrong", []))) or r"\A\b\Z", re.I)
    found = bent = 0
    for keys in case["facts"]:
        holders = [m for m in memories if all(k.lower() in m.lower() for k in keys)]
        if holders:
            found += 1
            bent += all(_bent(m, case["user"]) or wrong.search(m) for m in holders)
    return {
        **row,
        "facts": len(case["facts"]),
        "junk": 0 if case["facts"] else len(memories),
        "ungrounded": [m for m in memories if ungrounded(m, exchange)],
        "found": found,
        "bent": bent,
        "language": [m for m in memories if case["lang"] == "zh" and not _CJK.search(m)],
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    no_fact = [r for r in rows if not r["facts"]]
    fact = [r for r in rows if r["facts"]]
    n = len(rows) or 1
    return {
        "exchanges": len(rows),
        "no_fact_exchanges": len(no_fact),
        "junk_memories": sum(r["junk"] for r in no_fact),
        "junk_per_14_no_fact": round(14 * sum(r["junk"] for r in no_fact) / (len(no_fact) or 1), 2),
        "no_fact_exchanges_with_junk": sum(bool(r["junk"]) for r in no_fact),
        "ungrounded_memories": sum(len(r["ungrounded"]) for r in rows),
        "facts": sum(r["facts"] for r in fact),
        "facts_found": sum(r["found"] for r in fact),
        "facts_bent": sum(r["bent"] for r in fact),
        "memories_wrong_language": sum(len(r["language"]) for r in rows),
        "failed_writes": sum(r["failed"] for r in rows),
        "seconds_per_write": round(sum(r["seconds"] for r in rows) / n, 2),
        "tokens_in_per_write": round(sum(r["tokens_in"] for r in rows) / n, 1),
        "tokens_out_per_write": round(sum(r["tokens_out"] for r in rows) / n, 1),
        "model_checks": sum(r["model_checks"] for r in rows),
    }


def side(name: str, src: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run one side in a process of its own on the package at ``src``."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    command = [sys.executable, __file__, "--side", str(path), "--timeout", str(args.timeout)]
    command += ["--splits", *args.splits, "--styles", *args.styles, "--limit", str(args.limit)]
    command += ["--base-url", args.base_url, "--model", args.model, "--data", str(args.data)]
    command += ["--scripted"] if args.scripted else []
    env = {**os.environ, "PYTHONPATH": str(src)}
    print(f"== {name}: {src}", flush=True)
    subprocess.run(command, env=env, check=True)
    rows = json.loads(path.read_text(encoding="utf-8"))
    path.unlink()
    return rows


def report(sides: dict[str, list[dict[str, Any]]], data: Path) -> dict[str, Any]:
    cases = {case["id"]: case for case in load(["all"], data)}
    out: dict[str, Any] = {"sides": {}}
    for name, rows in sides.items():
        scored = [score(row, cases[row["case"]]) for row in rows]
        out["sides"][name] = {
            "summary": {
                f"{style}/{split}": summary(
                    [r for r in scored if r["style"] == style and r["split"] == split]
                )
                for style in sorted({r["style"] for r in scored})
                for split in sorted({r["split"] for r in scored})
            },
            "rows": scored,
        }
    return out


def sweep(rows: list[dict[str, Any]], data: Path) -> list[dict[str, Any]]:
    """How each pair of word thresholds decides the dev half's proposals.

    A proposal should be kept when its exchange tells a fact and it holds one
    of the expected facts' keywords (and no ``wrong`` word), dropped otherwise.
    """
    sys.path.insert(0, str(SRC))  # this checkout's thresholds, whatever is installed
    from agentscope_mem0._text import grounding as g

    cases = {case["id"]: case for case in load(["all"], data)}
    labelled = []
    for row in rows:
        if row["split"] != "dev":
            continue
        case = cases[row["case"]]
        said = g.Grounding(case["user"], case["assistant"])
        for text in row["proposed"]:
            keep = any(all(k.lower() in text.lower() for k in keys) for keys in case["facts"])
            keep = keep and not _bent(text, case["user"])
            labelled.append((text, said, keep))
    results = []
    for keep_share in (0.4, 0.5, 0.6, 0.7, 0.8):
        for drop_share in (0.1, 0.2, 0.25, 0.3, 0.4):
            if drop_share >= keep_share:
                continue
            g.KEEP_SHARE, g.DROP_SHARE = keep_share, drop_share
            kept_wrong = dropped_right = asked = right = 0
            for text, said, keep in labelled:
                reading = g.read_grounding(text, said)
                if reading == "unsure":
                    asked += 1
                    continue
                if (reading == "grounded") == keep:
                    right += 1
                elif keep:
                    dropped_right += 1
                else:
                    kept_wrong += 1
            results.append(
                {
                    "keep_share": keep_share,
                    "drop_share": drop_share,
                    "proposals": len(labelled),
                    "decided_right": right,
                    "kept_wrongly": kept_wrong,
                    "dropped_wrongly": dropped_right,
                    "asked": asked,
                }
            )
    return results


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [
        ("junk_per_14_no_fact", "junk per 14 no-fact exchanges"),
        ("ungrounded_memories", "ungrounded memories"),
        ("facts_found", "facts kept"),
        ("facts_bent", "facts bent"),
        ("memories_wrong_language", "wrong language"),
    ]
    names = list(result["sides"])
    keys = [k for k in result["sides"][names[0]]["summary"] if not k.endswith("/dev")]
    fig, axes = plt.subplots(1, len(keys), figsize=(7 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            values = [result["sides"][name]["summary"][key][m] for m, _ in metrics]
            xs = [x + i * width for x in range(len(metrics))]
            ax.bar(xs, values, width, label=name)
        ax.set_xticks([x + width / 2 for x in range(len(metrics))], [t for _, t in metrics])
        ax.tick_params(axis="x", labelrotation=20)
        ax.set_title(key)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=DEFAULT_URL)
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--scripted", action="store_true", help="no server: a smoke run")
    parser.add_argument("--data", type=Path, default=DATA, help="the exchanges (JSON lines)")
    parser.add_argument("--splits", nargs="+", default=["all"])
    parser.add_argument("--styles", nargs="+", default=["compact"], choices=["compact", "mem0"])
    parser.add_argument("--limit", type=int, default=1000, help="exchanges per style at most")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per write")
    parser.add_argument("--before-src", type=Path, help="the sources of the release compared")
    parser.add_argument("--sweep", action="store_true", help="print the thresholds on dev")
    parser.add_argument(
        "--rescore", type=Path, help="score the rows of an earlier --out again (no model)"
    )
    parser.add_argument("--side", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if args.side:
        args.side.write_text(json.dumps(asyncio.run(run_side(args)), ensure_ascii=False))
        return
    sides = {}
    if args.rescore:
        earlier = json.loads(args.rescore.read_text(encoding="utf-8"))
        sides = {name: side["rows"] for name, side in earlier["sides"].items()}
    elif args.before_src:
        sides["before"] = side("before", args.before_src.resolve(), args)
    if not args.rescore:
        sides["after"] = side("after", SRC, args)
    result = report(sides, args.data)
    result["command"] = " ".join(["python benchmarks/grounding.py", *sys.argv[1:]])
    result["model"] = "scripted" if args.scripted else f"{args.model} at {args.base_url}"
    if args.sweep:
        result["sweep"] = sweep(result["sides"]["after"]["rows"], args.data)
        for line in result["sweep"]:
            print(line)
    for name, data in result["sides"].items():
        for key, values in data["summary"].items():
            print(name, key, json.dumps(values))
    for path in (args.out, args.plot):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
