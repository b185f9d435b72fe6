"""Nothing true hidden, nothing distinct merged: the judgement on the sets of issue #37.

Two sets, written before the code they measure, each row in a ``dev`` or a
``held-out`` half (tune on dev, quote held-out); the pairs also have a
``fresh`` part, written after the held-out half had been looked at and before
the repeat rules it suggested:

* ``data/distinct_pairs.jsonl``: pairs of memories that look alike and state
  two facts (who did what to whom, dates and number order, signs, currencies,
  prepositions, roles, stems, look-alikes, another person; English, Chinese,
  German), and pairs that state one fact (true repeats). Per pair a scope
  holds the first memory (said 30 days before); the second is added and
  :class:`TimeJudge` runs on it as the background pass after a write does.
  Counted: distinct pairs merged, distinct pairs where one memory hid the
  other (superseded), repeats merged.
* ``data/change_scenarios.jsonl``: real changes told apart (``change``), in one
  message (``one-message``: one write of both facts) and in two quick turns
  (``quick-turns``: the queue joins turns waiting behind a busy scope into one
  mem0 call, so their facts are one write in turn order); and false changes
  (an ending word that names something else, an addition, another person, a
  past habit). Unrelated memories (``others``) sit in the same scope. Counted:
  changes caught (the older memory superseded by the newer one), and true
  memories hidden (any memory hidden but the older one of a real change).

Judges (``--judges``), scripted but the last (no model runs for them):

* ``none``: ``judge=False``, the embedded default without a model: the words,
  and e5's cosine for the pairs the words leave open;
* ``not-said``: a model that reads "not said" for every question (what a
  small model does with most pairs: the adversarial case for changes);
* ``same``: a model that reads every pair as one fact (the adversarial case
  for merges: only the words' vetoes keep two facts apart);
* ``ends``: "not said" for every question, and "no" whenever asked whether
  an older memory still holds (the question words that end something
  propose): the adversarial case for that question, where only the words
  that earn it keep a true memory current; changes only;
* ``reader``: a model that reads the change where the set has one and
  nothing elsewhere (scripted from the set: the older and the newer memory
  of a change answer one question with two answers); changes only;
* ``rule``: the shipped ``RuleJudge`` (English patterns);
* ``local``: the real local model (``--live URL``, an OpenAI-compatible server
  such as ``../shared/llm/local-llm``), built as ``real_model.py`` builds it;
  not among the default judges.

Run from the repository root::

    python benchmarks/judgement_sets.py --out docs/benchmarks/judgement-sets.json
    python benchmarks/judgement_sets.py --judges local --live http://127.0.0.1:8765/v1 \
        --splits held-out fresh --out docs/benchmarks/judgement-sets-local.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "benchmarks" / "data" / "distinct_pairs.jsonl"
CHANGES = ROOT / "benchmarks" / "data" / "change_scenarios.jsonl"
OUT = ROOT / "docs" / "benchmarks" / "judgement-sets.json"
SAID = datetime(2024, 3, 10, 10, tzinfo=UTC)
EARLIER = SAID - timedelta(days=30)
USER = "alice"
SPLITS = ("dev", "held-out", "fresh")
LIVE_JUDGE = "local"
PAIR_JUDGES = ("none", "not-said", "same", "rule", LIVE_JUDGE)
CHANGE_JUDGES = ("not-said", "ends", "reader", "rule", LIVE_JUDGE)
REAL_CHANGES = ("change", "one-message", "quick-turns")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the scripted judges -------------------------------------------------------------


def _memory_and_question(prompt: str) -> tuple[str, str | None]:
    memory, asked, question = prompt.partition("\nQuestion: ")
    return memory.removeprefix("Memory: ").strip(), question.strip() if asked else None


def not_said(prompt: str) -> str:
    """Each memory's question is about itself; every reading is "not said"."""
    memory, question = _memory_and_question(prompt)
    if question is None:
        return json.dumps({"question": f"What does the user say in: {memory}?", "answer": memory})
    return "not said"


def ends(prompt: str) -> str:
    """Every reading "not said"; every older memory no longer true."""
    return "no" if "\nStatement: " in prompt else not_said(prompt)


def same(prompt: str) -> str:
    """Every memory answers every question alike: every pair reads as one fact."""
    _, question = _memory_and_question(prompt)
    if question is None:
        return json.dumps({"question": "Is this so for the user?", "answer": "yes"})
    return "yes"


class Reader:
    """Reads a change where a scenario has one: the older and the newer memory of a
    real change answer one question, each with its own answer; every other memory
    answers only a question of its own."""

    _ASKED = re.compile(r"fact number (\d+)")

    def __init__(self, scenarios: list[dict[str, Any]]) -> None:
        self._keys: dict[str, tuple[int, str]] = {}
        for row in scenarios:
            if row["kind"] in REAL_CHANGES:
                key = self._key(row["old"])
                self._keys[row["old"]] = (key, f"{row['id']} before")
                self._keys[row["new"]] = (key, f"{row['id']} after")
            else:
                for text in (row["old"], row["new"]):
                    self._keys[text] = (self._key(text), "yes")
            for text in row["others"]:
                self._keys[text] = (self._key(text), "yes")

    def _key(self, text: str) -> int:
        return self._keys[text][0] if text in self._keys else len(self._keys) + 1

    def __call__(self, prompt: str) -> str:
        memory, question = _memory_and_question(prompt)
        key, answer = self._keys.get(memory, (0, "yes"))
        if question is None:
            return json.dumps(
                {"question": f"What is the user's fact number {key}?", "answer": answer}
            )
        asked = self._ASKED.search(question)
        return answer if asked and key and int(asked.group(1)) == key else "not said"


def judge_model(judge: str, scenarios: list[dict[str, Any]], live: str | None) -> Any:
    """The chat model a judge answers through (``None``: no model)."""
    from agentscope_mem0.testing import RuleJudge, ScriptedChatModel

    if judge == LIVE_JUDGE:
        from real_model import chat_model

        assert live is not None  # checked with the arguments
        return chat_model(live, "qwen", "none")
    answer: Any = {
        "none": None,
        "not-said": not_said,
        "ends": ends,
        "same": same,
        "reader": Reader(scenarios),
        "rule": RuleJudge(),
    }[judge]
    return None if answer is None else ScriptedChatModel(judge=answer)


# -- one scope per row ------------------------------------------------------------------


class Store:
    """The embedded store (e5, Qdrant Edge) in a folder of its own."""

    def __init__(self, folder: Path) -> None:
        from agentscope_mem0 import Mem0Backend, build_local_memory
        from agentscope_mem0.testing import ScriptedChatModel

        self.client = build_local_memory(ScriptedChatModel(), folder=folder / "data")
        self.backend = Mem0Backend(self.client)
        self._scopes = 0

    def scope(self, tag: str) -> Any:
        from agentscope_mem0 import Scope

        self._scopes += 1
        return Scope(USER, f"{tag}-{self._scopes}")

    async def write(self, scope: Any, texts: list[str], said: datetime) -> list[dict[str, Any]]:
        """One write of ``texts`` (verbatim, in order): one mem0 call, as one message
        or a joined batch is."""
        messages = [{"role": "user", "content": text} for text in texts]
        return await self.backend.add(messages, scope, infer=False, said_at=said)

    async def metadata(self, scope: Any) -> dict[str, dict[str, Any]]:
        """Each memory of ``scope`` by its text (superseded and repeats too): its id
        and metadata."""
        found = await self.backend.get_all_raw(scope, limit=100)
        out = {}
        for item in found:
            out[item["memory"]] = {**(item.get("metadata") or {}), "id": item["id"]}
        return out

    def close(self) -> None:
        from agentscope_mem0._mem0.clients import close_memory

        close_memory(self.client)


async def judged(store: Store, judge: str, model: Any, scope: Any, results: list[Any]) -> Any:
    """Run the time judgement on one write, as the background pass does."""
    from agentscope_mem0._mem0.call_context import no_reply_waits
    from agentscope_mem0._write.judge import TimeJudge

    timer = TimeJudge(store.backend, model)
    with no_reply_waits():
        await timer.judge(scope, results, SAID)
    return timer


def _hidden(meta: dict[str, Any]) -> bool:
    return bool(meta.get("superseded_by") or meta.get("duplicate_of"))


async def run_pair(store: Store, judge: str, model: Any, pair: dict[str, Any]) -> dict[str, Any]:
    scope = store.scope(f"pair-{judge}")
    await store.write(scope, [pair["a"]], EARLIER)
    results = await store.write(scope, [pair["b"]], SAID)
    started = time.perf_counter()
    await judged(store, judge, model, scope, results)
    took = time.perf_counter() - started
    stored = await store.metadata(scope)
    a, b = stored[pair["a"]], stored[pair["b"]]
    merged = b.get("duplicate_of") == a["id"] or a.get("duplicate_of") == b["id"]
    superseded = bool(a.get("superseded_by") or b.get("superseded_by"))
    return {
        "id": pair["id"],
        "split": pair["split"],
        "lang": pair["lang"],
        "kind": pair["kind"],
        "same": pair["same"],
        "merged": merged,
        "superseded": superseded,
        "reason": {k: v for k, v in {**a, **b}.items() if k.endswith("_reason")},
        "seconds": round(took, 3),
    }


def pair_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    distinct = [r for r in rows if not r["same"]]
    repeats = [r for r in rows if r["same"]]
    wrong = [r for r in distinct if r["merged"]]
    hid = [r for r in distinct if r["superseded"]]
    return {
        "distinct_pairs": len(distinct),
        "distinct_merged": len(wrong),
        "distinct_merged_ids": [r["id"] for r in wrong],
        "distinct_merged_by_kind": dict(Counter(r["kind"] for r in wrong)),
        "distinct_superseded": len(hid),
        "distinct_superseded_ids": [r["id"] for r in hid],
        "repeats": len(repeats),
        "repeats_merged": sum(r["merged"] for r in repeats),
        "repeats_left_ids": [r["id"] for r in repeats if not r["merged"]],
    }


async def run_change(store: Store, judge: str, model: Any, row: dict[str, Any]) -> dict[str, Any]:
    scope = store.scope(f"change-{judge}")
    for text in row["others"]:
        await store.write(scope, [text], EARLIER - timedelta(days=1))
    if row["kind"] == "one-message":
        results = await store.write(scope, row["facts"], SAID)
    elif row["kind"] == "quick-turns":
        results = await store.write(scope, row["turns"], SAID)
    else:
        await store.write(scope, [row["old"]], EARLIER)
        results = await store.write(scope, [row["new"]], SAID)
    await judged(store, judge, model, scope, results)
    stored = await store.metadata(scope)
    old, new = stored[row["old"]], stored[row["new"]]
    real = row["kind"] in REAL_CHANGES
    caught = real and old.get("superseded_by") == new["id"]
    true = [row["new"], *row["others"]] + ([] if real else [row["old"]])
    hidden = [text for text in true if _hidden(stored[text])]
    return {
        "id": row["id"],
        "split": row["split"],
        "lang": row["lang"],
        "kind": row["kind"],
        "caught": caught,
        "hidden": hidden,
        "reason": old.get("superseded_reason"),
    }


def change_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "true_memories_hidden": sum(len(r["hidden"]) for r in rows),
        "hidden": {r["id"]: r["hidden"] for r in rows if r["hidden"]},
    }
    for kind in REAL_CHANGES:
        mine = [r for r in rows if r["kind"] == kind]
        out[kind] = {
            "scenarios": len(mine),
            "caught": sum(r["caught"] for r in mine),
            "missed_ids": [r["id"] for r in mine if not r["caught"]],
        }
    false = [r for r in rows if r["kind"] not in REAL_CHANGES]
    out["false_changes"] = {
        "scenarios": len(false),
        "with_a_memory_hidden": sum(bool(r["hidden"]) for r in false),
    }
    return out


def by_split(rows: list[dict[str, Any]], summary: Any) -> dict[str, Any]:
    out = {split: summary([r for r in rows if r["split"] == split]) for split in SPLITS}
    for lang in sorted({r["lang"] for r in rows}):
        out[f"held-out {lang}"] = summary(
            [r for r in rows if r["split"] == "held-out" and r["lang"] == lang]
        )
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    pairs = [p for p in load(args.pairs) if p["split"] in args.splits]
    scenarios = [s for s in load(args.changes) if s["split"] in args.splits]
    if args.limit:
        pairs, scenarios = _limited(pairs, args.limit), _limited(scenarios, args.limit)
    out: dict[str, Any] = {"pairs": {}, "changes": {}}
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder))
        try:
            for judge in args.judges:
                model = judge_model(judge, scenarios, args.live)
                if judge in PAIR_JUDGES and pairs:
                    rows = [await run_pair(store, judge, model, p) for p in pairs]
                    out["pairs"][judge] = {**by_split(rows, pair_summary), "rows": rows}
                    _print(judge, "pairs", out["pairs"][judge])
                if judge in CHANGE_JUDGES and scenarios:
                    rows = [await run_change(store, judge, model, s) for s in scenarios]
                    out["changes"][judge] = {**by_split(rows, change_summary), "rows": rows}
                    _print(judge, "changes", out["changes"][judge])
        finally:
            store.close()
    return out


def _limited(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rows of each kind, language and split (a smoke run)."""
    seen: Counter[tuple[str, str, str]] = Counter()
    kept = []
    for row in rows:
        key = (row["kind"], row["lang"], row["split"])
        seen[key] += 1
        if seen[key] <= limit:
            kept.append(row)
    return kept


def _print(judge: str, part: str, result: dict[str, Any]) -> None:
    for split in SPLITS:
        shown = {k: v for k, v in result.get(split, {}).items() if not k.endswith("ids")}
        print(f"{part:7s} {judge:8s} {split:8s} {json.dumps(shown)}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    judges = list(dict.fromkeys(PAIR_JUDGES + CHANGE_JUDGES))
    parser.add_argument(
        "--judges",
        nargs="+",
        default=[judge for judge in judges if judge != LIVE_JUDGE],
        choices=judges,
    )
    parser.add_argument(
        "--live", help=f"OpenAI-compatible URL of the model the {LIVE_JUDGE!r} judge asks"
    )
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--changes", type=Path, default=CHANGES)
    parser.add_argument(
        "--limit", type=int, default=0, help="rows per kind, language and split (smoke)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if LIVE_JUDGE in args.judges and not args.live:
        parser.error(f"the {LIVE_JUDGE!r} judge needs --live URL (e.g. http://127.0.0.1:8765/v1)")
    result = {"command": " ".join(["python", *sys.argv]), **asyncio.run(run(args))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
