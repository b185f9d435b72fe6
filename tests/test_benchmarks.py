"""Every benchmark's own command still runs, on a tiny input, in seconds.

Each benchmark's command line (``python benchmarks/X.py ...``, as its report
gives it) runs as a subprocess on the smallest sizes, on two short invented
conversations in LoCoMo's shape where it reads LoCoMo (no outside data), into
a folder of its own that does not exist yet. Each test checks that its
command exited 0 and wrote its result file with the keys its report reads;
where the benchmark measures a guarantee (nothing lost, nothing stored twice,
a replaced fact not shown as current), that too. The figures are not checked:
a run this small measures nothing. The commands the reports give are checked
to parse with the benchmarks' current options.

Most of a run is an interpreter starting and importing mem0 and AgentScope,
and several wait on purpose (a model's delay, a lease, an exit's grace), so
the runs go three at a time in the background, in the order of the tests
selected, and each test waits for its own.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
PG_DSN = os.environ.get("AGENTSCOPE_MEM0_TEST_PG_DSN")
_PGVECTOR = ",pgvector,pgvector-hnsw-noscope,pgvector-exact --pg-dsn {dsn}"

SMOKE: dict[str, str] = {
    # test_<name> -> its command after "python benchmarks/": {out} is the run's own
    # folder (not there yet), {data} the invented LoCoMo file, {pairs} and {fresh}
    # the invented pair sets, {src} this checkout's package.
    "embedded_recall": "embedded_recall.py {data} --limit-conversations 2 --quick --out-dir {out}",
    "note_recall": "note_recall.py --data {data} --embedder hash --turns 3 --out {out}/nr.json",
    "note_dedupe": "note_dedupe.py --embedder hash --data {data} --out {out}/note-dedupe.json",
    "time_locomo": "time_locomo.py --data {data} --out {out}/time-locomo.json",
    "temporal": "temporal.py --embedder hash --limit 4 --out {out}/temporal.json",
    "consolidation": "consolidation.py --parts rule store judge --judge-model scripted "
    "--pairs {pairs} --fresh-pairs {fresh} --out {out}/consolidation.json",
    "fact_change": "fact_change.py --scenarios 6 --rounds 1 --out {out}/fact-change.json "
    "--plot {out}/fact-change.png",
    # One row of each kind of the #37 sets, held-out half, every scripted judge.
    "judgement_sets": "judgement_sets.py --limit 1 --splits held-out "
    "--out {out}/judgement-sets.json",
    # The recorded runs of docs/benchmarks, answered from their recordings only.
    "judge_replay": "judge_replay.py --limit 4 --out {out}/judge-replay.json",
    "real_model": "real_model.py --scripted --split dev --cases home-allergy chitchat-weather "
    "change-01 person-07 --out {out}/real-model.json --plot {out}/real-model.png",
    # Both sides on this checkout: the side by side runs, compares nothing.
    "grounding": "grounding.py --scripted --before-src {src} --splits held-out --limit 3 "
    "--sweep --out {out}/grounding.json --plot {out}/grounding.png",
    "user_profile": "user_profile.py --scripted --split held-out --limit 3 "
    "--out {out}/profile.json",
    "e5_queries": "e5_queries.py --sizes 1 2 --repeats 1 --out {out}/e5-queries.json",
    # Release 0.1's local mode (--local-max) would be one more interpreter; scaling runs it.
    "edge_scaling": "edge_scaling.py --sizes 200 --local-max 0 --queries 20 --phase-seconds 0.2 "
    "--out-dir {out}",
    "edge_tenants": "edge_tenants.py --memories 600 --users 6 --big-users 1 --big-size 300 "
    "--rounds 1 --searches 3 --tmp {out}/stores --out-dir {out}",
    # pgvector's stores where the suite has a PostgreSQL server; the embedded one always.
    "scaling": "scaling.py --sizes 100 --users 2 --dims 32 --queries 6 --adds 4 "
    "--phase-seconds 0.2 --out {out}/scaling.json --plot {out}/scaling.png --backends qdrant"
    + (_PGVECTOR if PG_DSN else ""),
    "inspector_home": "inspector_home.py --folder {out}/folder --make 30 --runs 1 "
    "--out {out}/inspector-home.json",
    "write_latency": "write_latency.py --turns 3 --rounds 1 --reply-delay 0.01 "
    "--extraction-delay 0.01 --out {out}",
    # Each workload is an interpreter of its own: the two that compare, not the variants;
    # where the suite has a PostgreSQL server, the scale-out too (two replica processes).
    "load": "load.py --users 2 --turns 2 --reply-delay 0.01 --extraction-delay 0.01 "
    "--max-reply 100 --drain-timeout 60 --skip pause memory-waiting --out {out}"
    + (" --replicas 2 --pg-dsn {dsn}" if PG_DSN else ""),
    "fault_exit": "fault_exit.py --turns 2 --delays 0.2 --out {out}/fault-exit.json",
    # Needs the suite's PostgreSQL; without one it exits at once and its test skips.
    "pod_loss": "pod_loss.py --pg-dsn {dsn} --users 6 --kill-after 4 --extraction-delay 0.2 "
    "--out {out}/pod-loss.json",
    # Needs the suite's PostgreSQL; without one it exits at once and its test skips.
    "pgvector_search": "pgvector_search.py {data} --pg-dsn {dsn} --grid-k 10 "
    "--grid-dense-weight 0.7 --out {out}/pgvector-search.json",
    # Both fronts where the suite has a PostgreSQL server; without one it exits at once.
    "queue_cost": "queue_cost.py --pg-dsn {dsn} --writes 4 --concurrency 2 --latency-writes 2 "
    "--repeats 1 --out {out}/queue-cost.json --plot {out}/queue-cost.png",
    # Side by side with itself, one run a side: the figures compare nothing.
    "turn_cpu": "turn_cpu.py --turns 3 --warmup 1 --runs 1 --settle 0.05 --before-src {src} "
    "--out {out}" + (" --pg-dsn {dsn}" if PG_DSN else ""),
    # Side by side with itself: the run times, compares nothing.
    "cli_speed": "cli_speed.py --fill hash --repeats 1 --before-src {src} "
    "--out {out}/cli-speed.json",
}


def _run(folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/<command>`` from ``folder``, with this checkout's package,
    and the benchmarks' caches, the data folder and mem0's home inside ``folder``."""
    script, *args = shlex.split(command)
    folder.mkdir(parents=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p
        ),
        "AGENTSCOPE_MEM0_BENCH_CACHE": str(folder / "bench-cache"),
        "AGENTSCOPE_MEM0_DIR": str(folder / "data"),
        "MEM0_DIR": str(folder / "mem0-home"),
        "MEM0_TELEMETRY": "False",
    }
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


class Runs:
    """The smoke runs of ``names``, three at a time in the background, in that order."""

    def __init__(self, folder: Path, names: list[str]) -> None:
        paths = {
            "data": write_tiny_locomo(folder / "tiny-locomo.json"),
            "pairs": _pair_file(folder / "pairs.jsonl", _PAIRS[:4], 0),
            "fresh": _pair_file(folder / "fresh.jsonl", _PAIRS[4:], 100),
            "dsn": PG_DSN or "",
            "src": ROOT / "src",
        }
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="benchmark")
        self._runs: dict[str, tuple[Path, Future[subprocess.CompletedProcess[str]]]] = {}
        for name in names:
            run = folder / name
            quoted = {k: shlex.quote(str(v)) for k, v in {**paths, "out": run / "out"}.items()}
            command = SMOKE[name].format(**quoted)
            self._runs[name] = run / "out", self._pool.submit(_run, run, command)

    def out(self, name: str) -> Path:
        """Wait for ``name``'s run; the folder it wrote into, once it exited 0."""
        out, future = self._runs[name]
        done = future.result()
        assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return out

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    """The runs of the tests selected in this module, started at the first of them."""
    selected = [
        item.name.removeprefix("test_")
        for item in request.session.items
        if item.path == request.path
    ]
    started = Runs(tmp_path_factory.mktemp("benchmarks"), [n for n in selected if n in SMOKE])
    yield started
    started.close()


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
    """``pairs`` as consolidation.py reads a pair set (JSON lines)."""
    rows = [
        {"id": first_id + i, "user": user, "same": same, "kind": kind, "a": a, "b": b}
        for i, (user, same, kind, a, b) in enumerate(pairs)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# -- the LoCoMo benchmarks ------------------------------------------------------------


def test_embedded_recall(runs: Runs) -> None:
    # The recall benchmark's smoke command (issue #40): two conversations, the small grid.
    out = runs.out("embedded_recall")
    data = result(
        out / "embedded-recall-partial.json",
        *("default", "rows", "variants", "choice", "encoders", "ms_per_search"),
    )
    assert data["conversations"] == ["tiny-1", "tiny-2"]
    assert data["questions"] == 10  # those with evidence, category 5 included
    final = data["choice"]["final"]
    for key in ("cv_recall@10_by_category", "in_sample_recall@10_by_category"):
        assert final[key] and set(final[key]) <= {"1", "2", "3", "4"}
    assert (out / "embedded-recall-partial.md").is_file()
    assert (out / "embedded-recall-partial.png").is_file()


def test_note_recall(runs: Runs) -> None:
    data = result(runs.out("note_recall") / "nr.json", "recall", "context")
    assert data["recall"]["questions"] == 8  # categories 1-4
    assert data["context"]["turns"] == 3


def test_note_dedupe(runs: Runs) -> None:
    data = result(
        runs.out("note_dedupe") / "note-dedupe.json",
        *("recall", "hits_merged_per_question", "evidence_lost_examples"),
    )
    assert data["questions"] == 8


def test_time_locomo(runs: Runs) -> None:
    data = result(runs.out("time_locomo") / "time-locomo.json", "command", "results")
    assert [r["variant"] for r in data["results"]] == ["no-date", "said_at", "date-in-text"]
    assert all(r["questions"] == 2 for r in data["results"])  # one temporal question each


def test_temporal(runs: Runs) -> None:
    data = result(runs.out("temporal") / "temporal.json", "command", "results", "rows")
    assert data["items"] == 4 and set(data["results"]) == {"dev", "held-out"}
    # The first four ask of 2023 (twice), last week and last month: read by
    # their periods, each recalls its period's memory first, superseded or not.
    assert all(row["after_first_right"] for row in data["rows"])


# -- the judgement ---------------------------------------------------------------------------


def test_consolidation(runs: Runs) -> None:
    out = runs.out("consolidation")
    data = result(
        out / "consolidation.json", "pairs", "fresh_pairs", "rule", "store", "judge_scripted"
    )
    assert (data["pairs"], data["fresh_pairs"]) == (4, 2)
    assert (out / "consolidation.png").is_file()


def test_fact_change(runs: Runs) -> None:
    out = runs.out("fact_change")
    by_system = {r["system"]: r for r in result(out / "fact-change.json", "results")["results"]}
    assert set(by_system) == {"builtin", "ours-no-judge", "ours"}
    # One scenario of each kind: the judge (the shipped RuleJudge) hides every replaced fact.
    assert by_system["ours"]["stale_as_current"] == 0
    assert by_system["ours"]["current_present"] == 1
    assert (out / "fact-change.png").is_file()


def test_judgement_sets(runs: Runs) -> None:
    data = result(runs.out("judgement_sets") / "judgement-sets.json", "command", "pairs", "changes")
    assert set(data["pairs"]) == {"none", "not-said", "same", "rule"}
    assert set(data["changes"]) == {"not-said", "ends", "reader", "rule"}
    held = data["changes"]["reader"]["held-out"]
    assert held["change"]["scenarios"] == held["one-message"]["scenarios"] == 2  # en, zh
    # A model that reads "not said" everywhere: the words alone hide no true memory.
    assert data["changes"]["not-said"]["held-out"]["true_memories_hidden"] == 0
    # A model that says every older memory ended: the ending words ask it only where
    # they name what the older memory names ("quit smoking" / "smokes a pack a day").
    ends = data["changes"]["ends"]["held-out"]
    assert ends["true_memories_hidden"] == 0
    assert ends["change"]["caught"] + ends["one-message"]["caught"] >= 1


def test_judge_replay(runs: Runs) -> None:
    data = result(runs.out("judge_replay") / "judge-replay.json", "summary", "by_split", "rows")
    assert data["summary"]["scenarios"] == len(data["rows"]) == 4
    assert all(row["reason"] or not row["old_superseded"] for row in data["rows"])


def test_real_model(runs: Runs) -> None:
    # No chat server: --scripted runs the whole pipeline with the package's ScriptedChatModel.
    out = runs.out("real_model")
    data = result(out / "real-model.json", "extraction", "judge", "server", "model", "machine")
    assert data["model"] == "scripted"
    assert {r["case"] for r in data["extraction"]["rows"]} == {"home-allergy", "chitchat-weather"}
    assert {r["scenario"] for r in data["judge"]["rows"]} == {"change-01", "person-07"}
    assert (out / "real-model.png").is_file()


def test_grounding(runs: Runs) -> None:
    out = runs.out("grounding")
    data = result(out / "grounding.json", "sides", "sweep", "command", "model")
    assert set(data["sides"]) == {"before", "after"}
    for side in data["sides"].values():
        assert len(side["rows"]) == 3
        assert side["summary"]["compact/held-out"]["exchanges"] == 3
    assert (out / "grounding.png").is_file()


def test_user_profile(runs: Runs) -> None:
    data = result(runs.out("user_profile") / "profile.json", "rows", "summary", "command", "model")
    assert data["model"] == "scripted" and len(data["rows"]) == 3
    summary = data["summary"]
    # The scripted model adds one invented line per user; the check drops each.
    assert summary["before_check"]["invented_lines"] == 3
    assert summary["after_check"]["invented_lines"] == 0
    assert summary["after_check"]["superseded_kept"] == 0


# -- stores and sizes --------------------------------------------------------------------


def test_e5_queries(runs: Runs) -> None:
    data = result(runs.out("e5_queries") / "e5-queries.json", "command", "machine", "rows")
    assert [row["queries"] for row in data["rows"]] == [1, 2]


def test_edge_scaling(runs: Runs) -> None:
    out = runs.out("edge_scaling")
    data = result(out / "edge-scaling.json", "command", "results", "environment")
    assert {r["engine"] for r in data["results"]} == {"edge", "edge-hnsw"}
    assert (out / "edge-scaling.png").is_file()


def test_edge_tenants(runs: Runs) -> None:
    out = runs.out("edge_tenants")
    data = result(out / "edge-tenants.json", "command", "mixes", "environment")
    assert [m["mix"] for m in data["mixes"]] == ["uniform", "skewed"]
    assert (out / "edge-scaling.png").is_file()


def test_scaling(runs: Runs) -> None:
    out = runs.out("scaling")
    data = result(out / "scaling.json", "command", "settings", "results")
    pgvector = {"pgvector-hnsw", "pgvector-hnsw-noscope", "pgvector-exact"}
    expected = {"local-qdrant"} | (pgvector if PG_DSN else set())
    assert {r["backend"] for r in data["results"]} == expected
    assert (out / "scaling.png").is_file()


def test_inspector_home(runs: Runs) -> None:
    data = result(runs.out("inspector_home") / "inspector-home.json", "folder", "runs", "pages")
    assert set(data["pages"]) == {"home", "user"}


# -- writes: latency, load, faults ----------------------------------------------------------


def test_write_latency(runs: Runs) -> None:
    out = runs.out("write_latency")
    data = result(
        out / "write-latency.json",
        *("results", "summary", "query_cache", "search_alone_s", "settings"),
    )
    assert "hash" in data["query_cache"]
    for name in ("write-latency.md", "write-latency.png", "write-kept.png"):
        assert (out / name).is_file()


def test_load(runs: Runs) -> None:
    out = runs.out("load")
    data = result(out / "load.json", "config", "baseline", "memory", "overhead")
    assert "pause" not in data and "waiting" not in data  # --skip
    memory = data["memory"]  # every fact stored, and once
    assert memory["writes_stored_once"] == memory["writes_expected"] == 2
    assert [turn["p50"] > 0 for turn in memory["reply_latency_by_turn"]] == [True, True]
    assert (out / "load.png").is_file()
    if not PG_DSN:
        return
    # The scale-out: the users dealt out over two replica processes on one PostgreSQL,
    # beside one process on it; every reply counted, every fact stored once.
    # And both again with their writes stored by a writer process.
    replicas, one = data["postgres_replicas"], data["postgres"]
    written = data["postgres_replicas_writer"], data["postgres_writer"]
    assert replicas["processes"] == data["baseline_replicas"]["processes"] == 2
    assert written[0]["processes"] == 2 and written[1]["processes"] == 1
    for run in (replicas, one, *written):
        assert len(run["reply_latencies"]) == 4 and run["drained"]
        assert run["writes_stored_once"] == run["writes_expected"] == 2
        assert run["store"] == "agentscope_mem0._postgres.vector_store.PgvectorStore"
    for run in written:  # the replicas recorded (4 turns, a warm-up each), the writer stored
        parts = run["stats"] if isinstance(run["stats"], list) else [run["stats"]]
        recorded = sum(part["writes_handed_over"] for part in parts)
        assert recorded == 4 + run["processes"] == run["writer"]["stats"]["writes_stored"]
        assert sum(part["writes_stored"] for part in parts) == 0
    assert "p50" in data["overhead_postgres_replicas"]
    assert "p50" in data["overhead_postgres_replicas_writer_same_split"]


def test_fault_exit(runs: Runs) -> None:
    data = result(runs.out("fault_exit") / "fault-exit.json", "turns", "runs")
    assert [r["ending"] for r in data["runs"]] == ["ends", "killed"]
    for ended in data["runs"]:  # however the script ended, the next process stores all once
        assert ended["flushed"] and ended["exchanges_stored"] == 2
        assert ended["stored_twice"] == 0


def test_pod_loss(runs: Runs) -> None:
    if not PG_DSN:
        pytest.skip("the pod-loss benchmark needs AGENTSCOPE_MEM0_TEST_PG_DSN")
    data = result(runs.out("pod_loss") / "pod-loss.json", "lost", "stored_twice")
    assert data["acknowledged"] == 18 and data["acknowledged_by_lost_replica"] == 4
    assert data["lost"] == 0 and data["stored_twice"] == 0
    assert data["changes_before_their_fact"] == 0 and data["all_flushed"]


def test_pgvector_search(runs: Runs) -> None:
    if not PG_DSN:
        pytest.skip("the pgvector search benchmark needs AGENTSCOPE_MEM0_TEST_PG_DSN")
    out = runs.out("pgvector_search") / "pgvector-search.json"
    data = result(out, "rows", "store", "chosen")
    assert data["conversations"] == ["tiny-1", "tiny-2"]
    assert data["store"] == "agentscope_mem0._postgres.vector_store.PgvectorStore"
    assert len(data["rows"]) == 5  # four ways and the one fused setting of the grid
    for row in data["rows"].values():
        assert {"recall@5", "recall@10", "recall@10_by_category"} <= set(row)


def test_queue_cost(runs: Runs) -> None:
    if not PG_DSN:
        pytest.skip("the queue-cost benchmark needs AGENTSCOPE_MEM0_TEST_PG_DSN")
    out = runs.out("queue_cost")
    data = result(out / "queue-cost.json", "fronts", "command")
    assert set(data["fronts"]) == {"sqlite", "postgres"}
    for front in data["fronts"].values():
        assert set(front) == {"insert_alone", "latency", "one_process", "three_processes"}
        for name in ("latency", "one_process", "three_processes"):  # each write delivered once
            run = front[name]
            assert run["delivered"] == run["writes"] > 0 and run["delivered_twice"] == 0
            assert run["unrecorded"] == 0
            assert run["all_flushed"]
        assert front["three_processes"]["writes"] == 3 * front["one_process"]["writes"]
    assert (out / "queue-cost.png").is_file()


def test_cli_speed(runs: Runs) -> None:
    data = result(runs.out("cli_speed") / "cli-speed.json", "results", "load_average_start")
    for side in ("after", "before"):
        assert set(data["results"][side]) == {"--help", "list", "history", "status", "export"}


def test_turn_cpu(runs: Runs) -> None:
    data = result(runs.out("turn_cpu") / "turn-cpu.json", "baseline_ms", "sides", "machine")
    # On PostgreSQL too where the suite has a server: writes stored here, and by a writer.
    postgres = {"postgres", "postgres_writer"} if PG_DSN else set()
    assert set(data["sides"]) == {"memory", "before"} | postgres
    for name, side in data["sides"].items():
        assert {"total", "total_mean", "reply", "enqueue", "write"} <= set(side["memory_ms"])
        assert [run["writes_stored"] for run in side["runs"]] == [4]  # warm-up turn and 3
        assert all(run["flushed"] for run in side["runs"])
        handed_over = [run["writes_handed_over"] for run in side["runs"]]
        assert handed_over == ([4] if name == "postgres_writer" else [0])


def test_every_benchmark_has_a_smoke_run() -> None:
    scripts = {path.stem for path in BENCHMARKS.glob("[!_]*.py")}
    assert scripts == set(SMOKE)
    tests = {name.removeprefix("test_") for name in globals() if name.startswith("test_")}
    assert set(SMOKE) <= tests


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
