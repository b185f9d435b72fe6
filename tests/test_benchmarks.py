"""Every benchmark's own command still runs, on a tiny input, in seconds.

Each test runs ``python benchmarks/X.py ...`` as a subprocess, the way its
report says to reproduce it, but on the smallest sizes and (for the LoCoMo
benchmarks) on two short invented conversations in LoCoMo's JSON shape, so
that no outside data is needed. It checks that the command exits 0 and wrote
its result file with the keys its report reads; where the benchmark measures
a guarantee (nothing lost, nothing stored twice, a replaced fact not shown as
current), that too. The figures themselves are not checked: a run this small
measures nothing. The commands the reports give are checked to parse.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
PG_DSN = os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN")


def run(tmp_path: Path, command: str, **paths: Path | str) -> str:
    """Run ``python benchmarks/<command>`` from ``tmp_path``; its stdout.

    ``{name}`` in ``command`` stands for ``paths[name]``. The package comes from
    this checkout; the benchmarks' caches and mem0's home folder stay in
    ``tmp_path``; a relative default path lands there too.
    """
    script, *args = shlex.split(
        command.format(**{k: shlex.quote(str(v)) for k, v in paths.items()})
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p
        ),
        "AGENTSCOPE_MEM0_BENCH_CACHE": str(tmp_path / "bench-cache"),
        "MEM0_TELEMETRY": "False",
    }
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def result(path: Path, *keys: str) -> dict[str, Any]:
    """The JSON at ``path``, checked to hold ``keys`` at its top level."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(keys) <= set(data), f"{path.name} lacks {set(keys) - set(data)}"
    return data


# Two invented conversations in LoCoMo's shape: sessions of turns with a
# ``dia_id``, the session's date in LoCoMo's wording, and questions of every
# category (1 single-hop, 2 temporal, 3 inference, 4 detail, 5 adversarial)
# naming their evidence turns.
_CONVERSATIONS: list[tuple[str, tuple[str, str], list[list[str]], list[tuple[str, int, str]]]] = [
    (
        "tiny-1",
        ("Mira", "Tomas"),
        [
            [
                "I started learning the cello last week.",
                "Nice! Which teacher did you pick?",
                "A retired violinist called Agnes who lives near the harbour.",
                "I adopted a grey cat named Pebble on Sunday.",
            ],
            [
                "Pebble knocked my cello bow off the shelf this morning.",
                "Did the bow survive?",
                "Yes, but I bought a case for it at the music shop on Elm Street.",
                "I am moving to Lisbon in the autumn for a new job.",
            ],
        ],
        [
            ("Which instrument is Mira learning?", 1, "D1:1"),
            ("When did Mira adopt her cat?", 2, "D1:4"),
            ("Would Mira need a pet sitter after moving?", 3, "D1:4;D2:4"),
            ("Where did Mira buy the case for her bow?", 4, "D2:3"),
            ("Which instrument does Tomas teach?", 5, "D1:2"),
        ],
    ),
    (
        "tiny-2",
        ("Jun", "Priya"),
        [
            [
                "I ran my first half marathon in Osaka yesterday.",
                "Congratulations! What was your time?",
                "Just under two hours, and my knees still ache.",
                "My sister gave me a bonsai pine for my birthday.",
            ],
            [
                "I watered the bonsai too much and the needles turned yellow.",
                "Repot it in gritty soil, that helped mine.",
                "Good idea, I signed up for a pottery class on Thursdays too.",
                "Next spring I want to run the Kyoto marathon.",
            ],
        ],
        [
            ("Where did Jun run a half marathon?", 1, "D1:1"),
            ("When did Jun run the half marathon?", 2, "D1:1"),
            ("Does Jun enjoy long-distance running?", 3, "D1:1;D2:4"),
            ("Which day is Jun's pottery class?", 4, "D2:3"),
            ("What colour did Priya's bonsai turn?", 5, "D2:1"),
        ],
    ),
]
_SESSION_DATES = ("1:56 pm on 8 May, 2023", "10:14 am on 21 June, 2023")


def write_tiny_locomo(path: Path) -> Path:
    """Write the invented conversations to ``path`` as LoCoMo samples; returns it."""
    samples: list[dict[str, Any]] = []
    for sample_id, speakers, sessions, questions in _CONVERSATIONS:
        conversation: dict[str, Any] = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
        for number, turns in enumerate(sessions, start=1):
            conversation[f"session_{number}_date_time"] = _SESSION_DATES[number - 1]
            conversation[f"session_{number}"] = [
                {"speaker": speakers[i % 2], "dia_id": f"D{number}:{i + 1}", "text": text}
                for i, text in enumerate(turns)
            ]
        qa = []
        for question, category, evidence in questions:
            item: dict[str, Any] = {
                "question": question,
                "evidence": evidence.split(";"),
                "category": category,
            }
            item["adversarial_answer" if category == 5 else "answer"] = "invented"
            qa.append(item)
        samples.append({"sample_id": sample_id, "conversation": conversation, "qa": qa})
    path.write_text(json.dumps(samples, indent=1), encoding="utf-8")
    return path


# -- the LoCoMo benchmarks ------------------------------------------------------------


@pytest.fixture
def locomo(tmp_path: Path) -> Path:
    return write_tiny_locomo(tmp_path / "tiny-locomo.json")


def test_embedded_recall(tmp_path: Path, locomo: Path) -> None:
    # The recall benchmark's smoke command (issue #40): two conversations, the small grid.
    out = tmp_path / "out"
    run(
        tmp_path,
        "embedded_recall.py {data} --limit-conversations 2 --quick --out-dir {out}",
        data=locomo,
        out=out,
    )
    data = result(
        out / "embedded-recall-partial.json",
        *("default", "rows", "variants", "choice", "encoders", "ms_per_search"),
    )
    assert data["conversations"] == ["tiny-1", "tiny-2"]
    assert data["questions"] == 10  # those with evidence, category 5 included
    assert (out / "embedded-recall-partial.md").is_file()
    assert (out / "embedded-recall-partial.png").is_file()


def test_note_recall(tmp_path: Path, locomo: Path) -> None:
    out = tmp_path / "out" / "note-recall.json"
    run(
        tmp_path,
        "note_recall.py --data {data} --embedder hash --turns 3 --out {out}",
        data=locomo,
        out=out,
    )
    data = result(out, "recall", "context")
    assert data["recall"]["questions"] == 8  # categories 1-4
    assert data["context"]["turns"] == 3


def test_note_dedupe(tmp_path: Path, locomo: Path) -> None:
    out = tmp_path / "out" / "note-dedupe.json"
    run(tmp_path, "note_dedupe.py --embedder e5 --data {data} --out {out}", data=locomo, out=out)
    data = result(out, "recall", "hits_merged_per_question", "evidence_lost_examples")
    assert data["questions"] == 8


def test_time_locomo(tmp_path: Path, locomo: Path) -> None:
    out = tmp_path / "out" / "time-locomo.json"
    run(tmp_path, "time_locomo.py --data {data} --out {out}", data=locomo, out=out)
    data = result(out, "command", "results")
    assert [r["variant"] for r in data["results"]] == ["no-date", "said_at", "date-in-text"]
    assert all(r["questions"] == 2 for r in data["results"])  # one temporal question each


# -- the judgement and the note ---------------------------------------------------------

_PAIRS = [
    # (user, same fact?, kind, older memory, newer memory): invented for this test.
    ("dora", True, "paraphrase", "User keeps two hens.", "The user keeps two hens."),
    ("dora", True, "paraphrase", "User's favourite tea is oolong.", "User likes oolong tea best."),
    ("dora", False, "another-person", "User lives in Graz.", "User's brother lives in Graz."),
    ("dora", False, "number", "User runs 5 km each morning.", "User runs 12 km each morning."),
    ("ezra", True, "paraphrase", "User plays the oboe.", "The user plays oboe."),
    ("ezra", False, "negation", "User eats fish.", "User does not eat fish."),
]


def _pair_file(path: Path, pairs: list[tuple[str, bool, str, str, str]], first_id: int) -> Path:
    rows = [
        {"id": first_id + i, "user": user, "same": same, "kind": kind, "a": a, "b": b}
        for i, (user, same, kind, a, b) in enumerate(pairs)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_consolidation(tmp_path: Path) -> None:
    pairs = _pair_file(tmp_path / "pairs.jsonl", _PAIRS[:4], 0)
    fresh = _pair_file(tmp_path / "fresh.jsonl", _PAIRS[4:], 100)
    out = tmp_path / "out" / "consolidation.json"
    run(
        tmp_path,
        "consolidation.py --parts rule store judge --judge-model scripted "
        "--pairs {pairs} --fresh-pairs {fresh} --out {out}",
        pairs=pairs,
        fresh=fresh,
        out=out,
    )
    data = result(out, "pairs", "fresh_pairs", "rule", "store", "judge_scripted")
    assert (data["pairs"], data["fresh_pairs"]) == (4, 2)
    assert out.with_suffix(".png").is_file()


def test_fact_change(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(
        tmp_path,
        "fact_change.py --scenarios 6 --rounds 1 --out {out}/fact-change.json "
        "--plot {out}/fact-change.png",
        out=out,
    )
    data = result(out / "fact-change.json", "command", "results")
    by_system = {r["system"]: r for r in data["results"]}
    assert set(by_system) == {"builtin", "ours-no-judge", "ours"}
    # One scenario of each kind: the judge (the shipped RuleJudge) hides every replaced fact.
    assert by_system["ours"]["stale_as_current"] == 0
    assert by_system["ours"]["current_present"] == 1
    assert (out / "fact-change.png").is_file()


def test_real_model_scripted(tmp_path: Path) -> None:
    # No chat server: --scripted runs the whole pipeline with the package's ScriptedChatModel.
    out = tmp_path / "out"
    run(
        tmp_path,
        "real_model.py --scripted --split dev --cases home-allergy chitchat-weather "
        "change-01 person-07 --out {out}/real-model.json --plot {out}/real-model.png",
        out=out,
    )
    data = result(out / "real-model.json", "extraction", "judge", "server", "model", "machine")
    assert data["model"] == "scripted"
    assert {r["case"] for r in data["extraction"]["rows"]} == {"home-allergy", "chitchat-weather"}
    assert {r["scenario"] for r in data["judge"]["rows"]} == {"change-01", "person-07"}
    assert (out / "real-model.png").is_file()


# -- stores and sizes --------------------------------------------------------------------


def test_e5_queries(tmp_path: Path) -> None:
    out = tmp_path / "out" / "e5-queries.json"
    run(tmp_path, "e5_queries.py --sizes 1 2 --repeats 1 --out {out}", out=out)
    assert [row["queries"] for row in result(out, "command", "machine", "rows")["rows"]] == [1, 2]


def test_edge_scaling(tmp_path: Path) -> None:
    out = tmp_path / "out" / "not-there-yet"  # the benchmark creates it
    run(
        tmp_path,
        "edge_scaling.py --sizes 200 --queries 20 --phase-seconds 0.2 --out-dir {out}",
        out=out,
    )
    data = result(out / "edge-scaling.json", "command", "results", "environment")
    assert {r["engine"] for r in data["results"]} == {"edge", "edge-hnsw", "qdrant-local"}
    assert (out / "edge-scaling.png").is_file()


def test_edge_tenants(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(
        tmp_path,
        "edge_tenants.py --memories 600 --users 6 --big-users 1 --big-size 300 "
        "--rounds 1 --searches 3 --tmp {stores} --out-dir {out}",
        stores=tmp_path / "stores",
        out=out,
    )
    data = result(out / "edge-tenants.json", "command", "mixes", "environment")
    assert [m["mix"] for m in data["mixes"]] == ["uniform", "skewed"]
    assert (out / "edge-scaling.png").is_file()


def test_scaling(tmp_path: Path) -> None:
    # pgvector's stores run where the suite has a PostgreSQL server; the embedded one always.
    pg = ",pgvector,pgvector-hnsw-noscope,pgvector-exact --pg-dsn {dsn}" if PG_DSN else ""
    out = tmp_path / "out"
    run(
        tmp_path,
        "scaling.py --sizes 100 --users 2 --dims 32 --queries 6 --adds 4 "
        "--phase-seconds 0.2 --out {out}/scaling.json --plot {out}/scaling.png "
        "--backends qdrant" + pg,
        out=out,
        dsn=PG_DSN or "",
    )
    data = result(out / "scaling.json", "command", "settings", "results")
    pgvector = {"pgvector-hnsw", "pgvector-hnsw-noscope", "pgvector-exact"}
    expected = {"local-qdrant"} | (pgvector if PG_DSN else set())
    assert {r["backend"] for r in data["results"]} == expected
    assert (out / "scaling.png").is_file()


def test_inspector_home(tmp_path: Path) -> None:
    out = tmp_path / "out" / "inspector-home.json"
    run(
        tmp_path,
        "inspector_home.py --folder {folder} --make 30 --runs 1 --out {out}",
        folder=tmp_path / "folder",
        out=out,
    )
    assert set(result(out, "folder", "runs", "pages")["pages"]) == {"home", "user"}


# -- writes: latency, load, faults ----------------------------------------------------------


def test_write_latency(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(
        tmp_path,
        "write_latency.py --turns 3 --rounds 1 --reply-delay 0.01 "
        "--extraction-delay 0.01 --out {out}",
        out=out,
    )
    data = result(
        out / "write-latency.json",
        *("results", "summary", "query_cache", "search_alone_s", "settings"),
    )
    assert "hash" in data["query_cache"]
    for name in ("write-latency.md", "write-latency.png", "write-kept.png"):
        assert (out / name).is_file()


def test_load(tmp_path: Path) -> None:
    # Each workload is an interpreter of its own: the two that compare, not the variants.
    out = tmp_path / "out"
    run(
        tmp_path,
        "load.py --users 2 --turns 2 --reply-delay 0.01 --extraction-delay 0.01 "
        "--max-reply 100 --drain-timeout 60 --skip pause memory-waiting --out {out}",
        out=out,
    )
    data = result(out / "load.json", "config", "baseline", "memory", "overhead")
    assert "pause" not in data and "waiting" not in data
    memory = data["memory"]  # every fact stored, and once
    assert memory["writes_stored_once"] == memory["writes_expected"] == 2
    assert (out / "load.png").is_file()


def test_fault_exit(tmp_path: Path) -> None:
    out = tmp_path / "out" / "fault-exit.json"
    run(tmp_path, "fault_exit.py --turns 2 --delays 0.2 --out {out}", out=out)
    data = result(out, "turns", "runs")
    assert [r["ending"] for r in data["runs"]] == ["ends", "killed"]
    for ended in data["runs"]:  # however the script ended, the next process stores all once
        assert ended["flushed"] and ended["exchanges_stored"] == 2
        assert ended["stored_twice"] == 0


# -- the commands the reports give ------------------------------------------------------------

_COMMAND = re.compile(r"python benchmarks/(\w+)\.py((?:[^`\n#])*)")

_PARSE_ONLY = """
import argparse, asyncio, importlib, inspect, json, shlex, sys

class Parsed(Exception):
    pass

parse = argparse.ArgumentParser.parse_args

def parse_args(self, args=None, namespace=None):
    parse(self, args, namespace)  # exits 2 on a flag or value the parser does not take
    raise Parsed

argparse.ArgumentParser.parse_args = parse_args
sys.path.insert(0, sys.argv[1])
failed = []
for name, args in json.loads(sys.argv[2]):
    sys.argv = [name + ".py", *shlex.split(args)]
    try:
        done = importlib.import_module(name).main()
        if inspect.iscoroutine(done):
            asyncio.run(done)
        failed.append([name, args, "ran without parsing its command line"])
    except Parsed:
        pass
    except SystemExit as exc:
        failed.append([name, args, f"exit {exc.code}"])
print(json.dumps(failed))
"""


def documented_commands() -> list[tuple[str, str]]:
    """``(benchmark, arguments)`` of every ``python benchmarks/X.py ...`` in the docs."""
    found = []
    for doc in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        lines: list[str] = []
        for line in doc.read_text(encoding="utf-8").splitlines():
            # An inline code span broken over two lines is one command.
            if lines and lines[-1].count("`") % 2 and not lines[-1].lstrip().startswith("```"):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line)
        text = re.sub(r"\\\n\s*", " ", "\n".join(lines))  # shell line continuations
        found += [(m.group(1), m.group(2).strip()) for m in _COMMAND.finditer(text)]
    return found


def test_the_commands_the_reports_give_still_parse(tmp_path: Path) -> None:
    commands = documented_commands()
    assert {name for name, _ in commands} >= {"embedded_recall", "load", "write_latency"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(BENCHMARKS)])}
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_ONLY, str(BENCHMARKS), json.dumps(commands)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], done.stderr[-4000:]
