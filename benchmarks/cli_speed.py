"""How long the reading commands take on a small data folder, beside ``--help``.

    python benchmarks/cli_speed.py [--folder DIR] [--fill demo|hash] [--repeats 5]
        [--before-src PATH] [--out FILE]

Each command (``--help``, ``list``, ``history ID``, ``status``, ``export``) runs
``--repeats`` times as ``python -m agentscope_mem0.cli ...`` in a fresh
interpreter, as a user runs it, and the wall time of each run is kept: the
median and the slowest are reported. ``--before-src`` times the same commands
with another checkout's package (its ``src`` folder) on the same folder, side
by side. The machine's load average is recorded at the start and the end: a
busy machine makes every figure slower.

The folder is filled once, if it holds no store: ``demo`` runs the four-session
demo (offline scripted model, real embedder: the few memories the issue
measured), ``hash`` imports six memories with the hash embedder at the offline
embedder's size (no model load; for a quick run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
USER = "demo-user"
_FACTS = (
    "The user wants charts in dark mode with matplotlib by default.",
    "The user lives in Hangzhou.",
    "The user moved to Beijing last month.",
    "The user likes green tea.",
    "The user's sister is called Mei.",
    "The user runs on Sundays.",
)


def _env(src: Path, folder: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "AGENTSCOPE_MEM0_DIR": str(folder),
        "MEM0_DIR": str(folder.parent / "mem0-home"),
        **extra,
    }
    for name in ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)  # the offline model: nothing leaves the machine
    return env


def _cli(src: Path, folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", *args],
        env=_env(src, folder, **extra),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _checked(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise SystemExit(f"{what} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


def fill(src: Path, folder: Path, how: str) -> None:
    """Give ``folder`` a few memories of :data:`USER`, unless it has a store."""
    if (folder / "edge").is_dir():
        return
    if how == "demo":
        _checked(_cli(src, folder, "demo", "--folder", str(folder)), "the demo")
        return
    # One import of the facts, embedded at the offline embedder's size without loading it.
    lines = "".join(json.dumps({"text": fact, "user_id": USER}) + "\n" for fact in _FACTS)
    imported = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", "import", "-"],
        input=lines,
        env=_env(src, folder, AGENTSCOPE_MEM0_EMBEDDER="hash:384"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    _checked(imported, "import")


def commands(src: Path, folder: Path) -> dict[str, list[str]]:
    """The commands timed, by name; ``history`` shows the oldest memory's."""
    listed = json.loads(
        _checked(_cli(src, folder, "list", "--user", USER, "--all", "--json"), "list")
    )
    oldest = min(listed, key=lambda m: (m.get("created_at") or "", m["id"]))["id"]
    return {
        "--help": ["--help"],
        "list": ["list", "--user", USER],
        "history": ["history", oldest],
        "status": ["status"],
        "export": ["export", "--user", USER],
    }


def time_commands(
    src: Path, folder: Path, timed: dict[str, list[str]], repeats: int
) -> dict[str, dict[str, float]]:
    """Median and slowest wall seconds of each command, in fresh interpreters."""
    results = {}
    for name, args in timed.items():
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            _checked(_cli(src, folder, *args), name)
            seconds.append(time.perf_counter() - started)
        results[name] = {
            "median_s": round(statistics.median(seconds), 3),
            "max_s": round(max(seconds), 3),
        }
        print(f"{src.parent.name or src}: {name:8} median {results[name]['median_s']:.2f} s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, default=None, help="data folder (default: temp)")
    parser.add_argument("--fill", choices=["demo", "hash"], default="demo")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before-src", type=Path, default=None, help="another checkout's src")
    parser.add_argument("--out", type=Path, default=Path("cli-speed.json"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = (args.folder or Path(scratch) / "data").resolve()
        src = ROOT / "src"
        load_before = os.getloadavg()
        fill(src, folder, args.fill)
        timed = commands(src, folder)
        report: dict[str, Any] = {
            "folder": str(folder),
            "fill": args.fill,
            "repeats": args.repeats,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_start": [round(x, 2) for x in load_before],
            "results": {"after": time_commands(src, folder, timed, args.repeats)},
        }
        if args.before_src is not None:
            before = time_commands(args.before_src.resolve(), folder, timed, args.repeats)
            report["results"]["before"] = before
            report["before_src"] = str(args.before_src)
        report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
