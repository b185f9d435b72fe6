"""The time judgement of today's code on the model answers of recorded runs.

Each ``benchmarks/real_model.py`` judge run keeps every model call of each
scenario (the prompt's user message and the answer). This replays the
judgement (``PairJudge.verdict``) of each scenario's new memory against its
older memory and its unrelated ones, on the code of this checkout, answering
every call from the recording: a change to the rules of words is measured
on every scenario ever run, in seconds, with the model's own answers. A
call the recording lacks (a question today's code asks that the recorded
code did not) is answered "not said", or, with ``--live URL``, by an
OpenAI-compatible server at temperature 0 (``../shared/llm/local-llm``).

Each scenario is taken from its latest run (by the run's start time). The
figures are pair-level (no store, no candidates search): what the judgement
decides for each pair the benchmark showed it.

    python benchmarks/judge_replay.py --live http://127.0.0.1:8765/v1 \\
        --out docs/benchmarks/judge-replay.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.request
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted((ROOT / "docs" / "benchmarks").glob("real-model-judge*.json"))
SCENARIOS = ROOT / "benchmarks" / "data" / "real_model_judge.jsonl"
SAID = datetime(2024, 6, 1, tzinfo=UTC)

Ask = Callable[[str, str], Awaitable[str]]


def latest_rows(runs: list[Path]) -> dict[str, dict[str, Any]]:
    """Each scenario's row of the latest run that judged it."""
    loaded = [json.loads(path.read_text(encoding="utf-8")) for path in runs]
    rows: dict[str, dict[str, Any]] = {}
    for run in sorted(loaded, key=lambda run: run.get("started") or ""):
        for row in (run.get("judge") or {}).get("rows", []):
            rows[row["scenario"]] = row
    return rows


def live_model(url: str, model: str) -> Ask:
    """One call to an OpenAI-compatible server, temperature 0, in a thread."""

    def call(system: str, user: str) -> str:
        body = {
            "model": model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        request = urllib.request.Request(
            f"{url.rstrip('/')}/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            return str(json.load(response)["choices"][0]["message"]["content"])

    async def ask(system: str, user: str) -> str:
        return await asyncio.to_thread(call, system, user)

    return ask


async def replay(row: dict[str, Any], scenario: dict[str, Any], live: Ask | None) -> dict[str, Any]:
    """Today's verdicts for one recorded scenario."""
    from agentscope_mem0._write.judge_pairs import Fact, PairJudge, Relation

    # A recorded call keeps its system prompt's opening: a prompt and a message.
    recorded = {(call["system"], call["user"]): call["answer"] for call in row.get("calls", [])}
    unrecorded = 0

    async def ask(system: str, user: str) -> str:
        nonlocal unrecorded
        key = next(
            (
                (opening, user)
                for opening, u in recorded
                if u == user and system.startswith(opening)
            ),
            None,
        )
        if key is not None:
            return str(recorded[key])
        unrecorded += 1
        return await live(system, user) if live else "not said"

    async def changes(old: str) -> tuple[bool, str]:
        verdict = await PairJudge(ask).verdict(Fact("n", row["new"], said=SAID), Fact("o", old))
        return verdict.relation is Relation.CHANGES, verdict.reason

    old_changed, reason = await changes(row["old"])
    hidden = [other for other in scenario.get("others", []) if (await changes(other))[0]]
    return {
        "scenario": row["scenario"],
        "split": row["split"],
        "kind": row["kind"],
        "old": row["old"],
        "new": row["new"],
        "old_superseded": old_changed,
        "recorded_old_superseded": row["old_superseded"],
        "reason": reason,
        "unrelated_hidden": hidden,
        "unrecorded_calls": unrecorded,
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    changes = [r for r in rows if r["kind"] == "change"]
    others = [r for r in rows if r["kind"] != "change"]
    return {
        "scenarios": len(rows),
        "changes_caught": sum(r["old_superseded"] for r in changes),
        "changes": len(changes),
        "recorded_changes_caught": sum(r["recorded_old_superseded"] for r in changes),
        "lookalikes_hidden": sum(r["old_superseded"] for r in others),
        "lookalikes": len(others),
        "unrelated_hidden": sum(len(r["unrelated_hidden"]) for r in rows),
        "unrecorded_calls": sum(r["unrecorded_calls"] for r in rows),
        "flipped": [
            r["scenario"] for r in rows if r["old_superseded"] != r["recorded_old_superseded"]
        ],
    }


async def replay_all(args: argparse.Namespace) -> dict[str, Any]:
    scenarios = {
        s["id"]: s for s in map(json.loads, SCENARIOS.read_text(encoding="utf-8").splitlines()) if s
    }
    rows = list(latest_rows(args.runs).values())
    if args.limit:
        rows = rows[: args.limit]
    live = live_model(args.live, args.model) if args.live else None
    replayed = [await replay(row, scenarios.get(row["scenario"], {}), live) for row in rows]
    splits = sorted({r["split"] for r in replayed})
    return {
        "command": "python benchmarks/judge_replay.py "
        + (f"--live {args.live} " if args.live else "")
        + (f"--limit {args.limit} " if args.limit else ""),
        "runs": [path.name for path in args.runs],
        "live": args.live,
        "summary": summary(replayed),
        "by_split": {s: summary([r for r in replayed if r["split"] == s]) for s in splits},
        "rows": replayed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", type=Path, default=RUNS, help="recorded runs")
    parser.add_argument("--live", help="OpenAI-compatible URL for calls the runs lack")
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--limit", type=int, help="replay only the first N scenarios")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    report = asyncio.run(replay_all(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report["summary"], indent=1))


if __name__ == "__main__":
    main()
