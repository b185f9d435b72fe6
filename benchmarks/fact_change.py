"""Fact-change suite: does the memory note present a stale fact as current?

Each scenario is one user who states a fact, later a change of it, then asks
about it; the three sessions are replayed with ``said_at`` dates (the user
messages' ``created_at``) 30 days apart. Two unrelated facts are stored too.
The note of the asking turn is checked for the old value (stale as current:
this package leaves superseded memories out, so any appearance is current)
and for the new one.

Systems, on the same store type (mem0's embedded Qdrant on disk, one folder
each) in the same run, with the same offline models (``ScriptedChatModel``:
``RuleExtractor`` extraction, ``RuleJudge`` judgement; ``HashEmbedding``):

* ``builtin``: ``agentscope.middleware.Mem0Middleware`` (mem0 only adds);
* ``ours-no-judge``: this package with ``judge=False`` (reply-latency baseline);
* ``ours``: this package with the shipped judge.

The judgement quality of a real chat model is NOT measured here: the
scripted judge follows patterns (``benchmarks/real_model.py`` measures a real
one). Run ``--print-prompt`` for the two prompts to try your own model on.

    python benchmarks/fact_change.py --out docs/benchmarks/fact-change.json \
        --plot docs/benchmarks/fact-change.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mem0
from agentscope.agent import Agent
from agentscope.message import HintBlock, UserMsg

from agentscope_mem0 import Mem0Middleware, build_mem0_config
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

CITIES = [
    "Hangzhou",
    "Beijing",
    "Chengdu",
    "Lisbon",
    "Oslo",
    "Nairobi",
    "Lima",
    "Quito",
    "Hanoi",
    "Perth",
    "Dublin",
    "Austin",
]
COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Wonka",
    "Cyberdyne",
]
DRINKS = ["espresso", "matcha", "rooibos", "cocoa", "chai", "kombucha", "lemonade", "oolong"]
PARTNERS = ["Alex", "Sam", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Quinn"]
CARS = ["Toyota", "Volvo", "Tesla", "Subaru", "Fiat", "Mazda", "Kia", "Skoda"]
PLACES = ["Kyoto", "Cairo", "Reykjavik", "Havana", "Prague", "Marrakesh", "Bali", "Patagonia"]

KINDS: dict[str, tuple[list[str], str, str, str]] = {
    # kind: (values, fact, change, question)
    "home": (CITIES, "I live in {a}.", "I moved to {b} last month.", "Which city do I live in?"),
    "job": (
        COMPANIES,
        "I work at {a} as an engineer.",
        "I changed jobs and now work at {b}.",
        "Where do I work?",
    ),
    "preference": (
        DRINKS,
        "I prefer {a} as my morning drink.",
        "I now prefer {b} as my morning drink.",
        "What is my morning drink?",
    ),
    "relationship": (
        PARTNERS,
        "My partner is {a}.",
        "My partner is now {b}, we met in spring.",
        "Who is my partner?",
    ),
    "possession": (CARS, "I own a {a} car.", "I now own a {b} car.", "What car do I own?"),
    "plan": (
        PLACES,
        "I plan a trip to {a} in June.",
        "I changed my plan, the trip goes to {b} instead.",
        "Where does my trip go?",
    ),
}
FILLERS = ("I like hiking on weekends.", "My sister is called Ana.")
FILLER_WORDS = ("hiking", "Ana")
"""What the note must still hold of the unrelated facts: nothing else is hidden."""


def scenarios(count: int, seed: int) -> list[dict[str, str]]:
    """``count`` scenarios, spread over the kinds in turn."""
    rng = random.Random(seed)
    out = []
    kinds = list(KINDS)
    for i in range(count):
        kind = kinds[i % len(kinds)]
        values, fact, change, question = KINDS[kind]
        a, b = rng.sample(values, 2)
        out.append(
            {
                "kind": kind,
                "old": a,
                "new": b,
                "fact": fact.format(a=a),
                "change": change.format(b=b),
                "question": question,
            }
        )
    return out


def store_config(folder: Path) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {"collection_name": "facts", "path": str(folder / "qdrant"), "on_disk": True},
        },
        "history_db_path": str(folder / "history.db"),
    }


def memory_note(messages: list[Any]) -> str:
    """The text of the memory note (this package's or the built-in's) in a model call."""
    return "\n".join(
        str(block.hint)
        for msg in messages
        if msg.role == "assistant" and msg.name == "memory"
        for block in msg.content
        if isinstance(block, HintBlock)
    )


async def run_system(name: str, cases: list[dict[str, str]], folder: Path) -> dict[str, Any]:
    memory = mem0.AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(),
            mem0_config=store_config(folder),
        )
    )
    if name == "builtin":
        from agentscope.middleware import Mem0Middleware as Builtin

        def build(user: str) -> Any:
            return Builtin(user_id=user, client=memory, mode="static_control")
    else:
        state: dict[str, Any] = {}

        def build(user: str) -> Any:
            mw = Mem0Middleware(
                user_id=user,
                client=memory,
                mode="static_control",
                parameters=Mem0Middleware.Parameters(
                    outbox=folder / "outbox", judge=(name == "ours")
                ),
                **state,
            )
            state.setdefault("client_state", mw.client_state)
            return mw

    stale = current = kept = 0
    replies: list[float] = []
    reads: list[float] = []
    per_kind: dict[str, dict[str, int]] = {}
    examples: list[dict[str, str]] = []
    last: Any = None
    for i, case in enumerate(cases):
        user = f"user{i:03d}"
        mw = build(user)
        last = mw
        day0 = 10 + i % 15
        said = [f"2024-01-{day0:02d}T09:00:00", f"2024-02-{day0:02d}T09:00:00"]
        turns = [f"{FILLERS[0]} {case['fact']}", f"{FILLERS[1]} {case['change']}"]
        for text, when in zip(turns, said, strict=True):
            bot = Agent(
                name="helper",
                system_prompt="x",
                model=ScriptedChatModel("Noted."),
                middlewares=[mw],
            )
            started = time.perf_counter()
            await bot.reply(UserMsg(name="user", content=text, created_at=when))
            replies.append(time.perf_counter() - started)
            if name != "builtin":
                await mw.flush()
        asker = ScriptedChatModel("Noted.")
        bot = Agent(name="helper", system_prompt="x", model=asker, middlewares=[mw])
        started = time.perf_counter()
        await bot.reply(
            UserMsg(name="user", content=case["question"], created_at=f"2024-03-{day0:02d}T09:00")
        )
        replies.append(time.perf_counter() - started)
        reads.append(replies[-1])
        note = memory_note(asker.calls[0]) if asker.calls else ""
        is_stale, has_new = case["old"] in note, case["new"] in note
        stale += is_stale
        current += has_new
        kept += all(word in note for word in FILLER_WORDS)
        kind = per_kind.setdefault(case["kind"], {"scenarios": 0, "stale": 0, "current": 0})
        kind["scenarios"] += 1
        kind["stale"] += is_stale
        kind["current"] += has_new
        if len(examples) < 2:
            examples.append({"question": case["question"], "note": note})
    stats = last.stats() if name != "builtin" else {}
    if name != "builtin":
        await last.client_state.aclose()
    ordered = sorted(replies)
    asked = sorted(reads)
    return {
        "system": name,
        "scenarios": len(cases),
        "stale_as_current": stale / len(cases),
        "current_present": current / len(cases),
        "unrelated_kept": kept / len(cases),
        "per_kind": per_kind,
        "reply_latency_p50": statistics.median(ordered),
        "reply_latency_p95": ordered[int(0.95 * (len(ordered) - 1))],
        "question_reply_latency_p50": statistics.median(asked),
        "question_reply_latency_p95": asked[int(0.95 * (len(asked) - 1))],
        "judge": {k: v for k, v in stats.items() if k.startswith("judge_")},
        "examples": examples,
    }


SYSTEM_LABELS = {
    "builtin": "AgentScope's built-in",
    "ours-no-judge": "agentscope-mem0, judge=False",
    "ours": "agentscope-mem0, judge on",
}
"""The systems, in words, for the plot."""


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """One message: how often the replaced fact is still shown as current."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [SYSTEM_LABELS.get(r["system"], r["system"]) for r in results]
    stale = [100 * r["stale_as_current"] for r in results]
    current = min(100 * r["current_present"] for r in results)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    y = list(range(len(names)))[::-1]
    colours = ["#4a7bb7" if r["system"] == "ours" else "#9aa3ad" for r in results]
    ax.barh(y, stale, color=colours, height=0.6)
    for yi, value in zip(y, stale, strict=True):
        ax.text(value + 1, yi, f"{value:.0f} %", va="center", fontsize=10)
    ax.set_yticks(y, names)
    ax.set_xlim(0, 115)
    ax.set_xlabel("notes showing the replaced fact as current (%)")
    ax.set_title(
        f"A newer fact replaces the older one ({results[0]['scenarios']} scenarios)\n"
        "judge: the rule-based test judge (RuleJudge), not a real model\n"
        f"(the current fact was in {current:.0f} % of the notes of all three)",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--rounds", type=int, default=2, help="runs per system, in alternating order"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--replot", type=Path, help="only redraw --plot from this JSON")
    parser.add_argument("--print-prompt", action="store_true", help="show the judgement prompts")
    args = parser.parse_args()
    if args.replot:
        report = json.loads(args.replot.read_text())
        plot([r for r in report["results"] if r["round"] == 0], args.plot)
        return
    if args.print_prompt:
        from agentscope_mem0._write.judge_prompt import QUESTION_PROMPT, READ_PROMPT

        print(f"{QUESTION_PROMPT}\n\n{READ_PROMPT}")
        return
    cases = scenarios(args.scenarios, args.seed)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        systems = ["builtin", "ours-no-judge", "ours"]
        for round_ in range(args.rounds):
            for name in systems if round_ % 2 == 0 else systems[::-1]:
                started = time.perf_counter()
                result = await run_system(name, cases, Path(tmp) / f"{name}-{round_}")
                result["seconds"] = round(time.perf_counter() - started, 1)
                result["round"] = round_
                results.append(result)
            print(
                f"{name:14s} stale-as-current {result['stale_as_current']:.1%}  current present "
                f"{result['current_present']:.1%}  unrelated kept {result['unrelated_kept']:.1%}"
                f"  reply p50 {1000 * result['reply_latency_p50']:.1f} ms",
                file=sys.stderr,
            )
    report = {"command": " ".join(["python", *sys.argv]), "results": results}
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)
    if args.plot:
        plot([r for r in results if r["round"] == 0], args.plot)


if __name__ == "__main__":
    asyncio.run(main())
