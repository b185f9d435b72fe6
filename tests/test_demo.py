"""The four-session demo, offline, on the real embedded default."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentscope_mem0.cli import cli
from agentscope_mem0.demo import DEMO_USER, run_demo

ROOT = Path(__file__).resolve().parents[1]


def _stored(folder: Path, *extra: str) -> list[dict[str, object]]:
    """The demo user's memories as ``agentscope-mem0 list --json`` reads them."""
    listed = CliRunner().invoke(
        cli,
        ["list", "--user", DEMO_USER, "--folder", str(folder), "--json", *extra],
        catch_exceptions=False,
    )
    assert listed.exit_code == 0, listed.output
    return json.loads(listed.stdout)


@pytest.mark.parametrize("mode", ["static_control", "agent_control", "both"])
def test_later_sessions_use_what_was_told_and_a_move_supersedes_the_old_home(
    mode: str, tmp_path: Path
) -> None:
    folder = tmp_path / "demo"
    out = io.StringIO()
    answers = asyncio.run(run_demo(mode, folder=folder, out=out))  # type: ignore[arg-type]
    transcript = out.getvalue()
    assert len(answers) == 4
    second, fourth = answers[1], answers[3]
    assert "offline scripted model" in transcript
    assert 'plt.style.use("dark_background")' in second
    assert "matplotlib" in second and "Hangzhou" in second
    assert "session 2 used dark mode and matplotlib" in transcript
    assert transcript.count("[assistant]") == 4
    # Session 4 (after "I moved to Beijing") plots Beijing, still in dark mode.
    assert "Beijing" in fourth and "Hangzhou" not in fourth
    assert 'plt.style.use("dark_background")' in fourth
    assert "session 4 used Beijing, not Hangzhou, as where the user lives now." in transcript
    # What session 4 was given (note or search results) presents only Beijing.
    session_four = transcript.split("=== session 4")[1].split("[assistant]")[0]
    assert "Beijing" in session_four and "Hangzhou" not in session_four
    # In the store: every Hangzhou memory is kept, marked superseded by a Beijing one,
    # or (said again by the other write of the same turn) merged into one that is.
    everything = {str(m["id"]): m for m in _stored(folder, "--all")}
    # The package's own fields (the timeline) are under "agentscope_mem0".
    metadata = {i: dict(m["agentscope_mem0"]) for i, m in everything.items()}  # type: ignore[call-overload]
    hangzhou = [i for i, m in everything.items() if "Hangzhou" in str(m["text"])]
    old = [i for i in hangzhou if not metadata[i].get("duplicate_of")]
    repeats = [i for i in hangzhou if i not in old]
    assert len(old) == 1 and len(repeats) == (1 if mode == "both" else 0)
    for memory_id in repeats:
        assert metadata[memory_id]["duplicate_of"] in old
    for memory_id in old:
        newer = metadata[memory_id]["superseded_by"]
        assert "Beijing" in str(everything[newer]["text"])
        assert memory_id in metadata[newer]["supersedes"]
        assert metadata[memory_id]["valid_until"]
        assert f'"{everything[memory_id]["text"]}" no longer true since' in transcript
    assert (
        f"{len(old)} of {len(hangzhou)} memories saying Hangzhou are marked superseded and "
        f"{len(repeats)} merged into them as repeats" in transcript
    )
    assert any(f"agentscope-mem0 history {i} --folder {folder}\n" in transcript for i in old)
    # One current memory per fact, though in mode both the agent's add_memory and
    # the automatic write each stored every fact.
    current = [str(m["text"]) for m in _stored(folder)]
    assert not any("Hangzhou" in text for text in current)
    assert sum("Beijing" in text for text in current) == 1
    assert sum("dark mode" in text for text in current) == 1
    if mode == "agent_control":
        assert "[tool call (agent)] add_memory" in transcript
        assert "[tool call (agent)] search_memory" in transcript
        assert "[mem0 → context (static)]" not in transcript
        assert "[context → mem0 (static)]" not in transcript
    else:
        assert "[mem0 → context (static)]" in transcript
        assert "[context → mem0 (static)] User lives in Hangzhou." in transcript
    if mode == "static_control":
        assert "(add_memory)" not in transcript
    else:
        # What the tool stored is labelled as the agent's, not as a static write.
        assert "[agent → mem0 (add_memory)] The user lives in Hangzhou." in transcript
        assert "[context → mem0 (static)] The user lives in Hangzhou." not in transcript


def test_default_is_both_for_its_own_user_and_the_cli_finds_it(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    out = io.StringIO()
    asyncio.run(run_demo(folder=folder, out=out))
    transcript = out.getvalue()
    assert DEMO_USER == "demo-user"
    assert "mode: both" in transcript
    assert (
        f"memories of user 'demo-user' (the demo's own user: no other user's memories are "
        f"touched) are stored in {folder}" in transcript
    )
    assert f"agentscope-mem0 list --user demo-user --folder {folder}" in transcript
    listed = CliRunner().invoke(
        cli, ["list", "--user", "demo-user", "--folder", str(folder)], catch_exceptions=False
    )
    assert listed.exit_code == 0, listed.output
    assert "Beijing" in listed.stdout and "dark mode" in listed.stdout
    assert "Hangzhou" not in listed.stdout  # superseded: hidden unless --all
    shown = CliRunner().invoke(
        cli,
        ["list", "--user", "demo-user", "--folder", str(folder), "--all"],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.output
    assert "Hangzhou. (superseded" in shown.stdout


def test_the_demo_leaves_the_folders_users_alone(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    kept = CliRunner().invoke(
        cli,
        ["add", "--user", "alice", "--raw", "likes green tea", "--folder", str(folder)],
        catch_exceptions=False,
    )
    assert kept.exit_code == 0, kept.output
    command = CliRunner().invoke(cli, ["demo", "--help"], catch_exceptions=False)
    assert f"[default: {DEMO_USER}]" in command.stdout  # the command's default is the same user
    asyncio.run(run_demo(folder=folder, out=io.StringIO()))
    listed = CliRunner().invoke(
        cli, ["list", "--user", "alice", "--folder", str(folder)], catch_exceptions=False
    )
    assert listed.exit_code == 0, listed.output
    assert "likes green tea" in listed.stdout


def test_demo_script_help_and_bad_mode() -> None:
    script = str(ROOT / "demos" / "oss_demo.py")
    shown = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "Usage: oss_demo.py [OPTIONS]" in shown.stdout
    assert "[static_control|agent_control|both]" in shown.stdout and "--folder" in shown.stdout
    # The same form as `agentscope-mem0 demo`: the help texts are the command's.
    command = CliRunner().invoke(cli, ["demo", "--help"], catch_exceptions=False)
    options = ["".join(t.split("[OPTIONS]", 1)[1].split()) for t in (shown.stdout, command.stdout)]
    assert options[0] == options[1]
    bad = subprocess.run(
        [sys.executable, script, "--mode", "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AGENTSCOPE_MEM0_DIR": "/nonexistent/never-written"},
    )
    assert bad.returncode == 2
    assert "'nonsense' is not one of" in bad.stderr


async def test_demo_starts_from_a_clean_store(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    await run_demo("static_control", folder=folder, out=io.StringIO())
    out = io.StringIO()
    await run_demo("static_control", folder=folder, out=out)
    # the second run's first session has no memory note: its store was cleared
    session_one = out.getvalue().split("=== session 2")[0]
    assert "[mem0 → context (static)]" not in session_one


async def test_without_the_judge_both_cities_stay_current_and_the_verdict_says_so(
    tmp_path: Path,
) -> None:
    from agentscope_mem0.demo import _offline_script
    from agentscope_mem0.testing import ScriptedChatModel

    # judge=None sends the judgement to the chat script, which does not answer it.
    model = ScriptedChatModel(_offline_script, judge=None)
    out = io.StringIO()
    answers = await run_demo("static_control", folder=tmp_path / "demo", chat_model=model, out=out)
    transcript = out.getvalue()
    session_four = transcript.split("=== session 4")[1].split("[assistant]")[0]
    assert "Hangzhou" in session_four and "Beijing" in session_four
    assert "which city do you live in now?" in answers[3]
    assert "session 4 did NOT use Beijing, not Hangzhou" in transcript
    assert "0 of 1 memories saying Hangzhou are marked superseded" in transcript
    assert "[mem0 timeline]" not in transcript and "agentscope-mem0 history" not in transcript


def test_in_mode_both_add_memory_and_the_automatic_write_keep_one_memory_per_fact(
    tmp_path: Path,
) -> None:
    """The agent's add_memory stores first, and its answer says what it stored; the
    automatic write of a turn where the user said more ("make ...") stores the same
    facts again, which are marked repeats of the tool's: what the tool reported
    stays what the store shows. A turn whose words the tool stored ("I moved to
    Beijing last month") is not written again."""
    folder = tmp_path / "demo"
    out = io.StringIO()
    asyncio.run(run_demo("both", folder=folder, out=out))
    transcript = out.getvalue()
    everything = {str(m["text"]): m for m in _stored(folder, "--all")}
    by_id = {str(m["id"]): m for m in everything.values()}
    tool = [line.split("] ", 1)[1] for line in transcript.splitlines() if "(add_memory)] " in line]
    automatic = [line.split("] ", 1)[1] for line in transcript.splitlines() if "(static)] " in line]
    assert len(tool) == 3 and len(automatic) == 2
    assert not any("Beijing" in text for text in automatic)
    # The tool's answer, worded as the built-in's ("Successfully recorded to memory ...").
    lines = transcript.splitlines()
    recorded = "\n".join(line for line in lines if "recorded to memory" in line.lower())
    for text in tool:
        # Reported to the agent as recorded, and never hidden as a repeat of another.
        assert text.rstrip(".") in recorded, text
        assert not dict(everything[text]["agentscope_mem0"]).get("duplicate_of"), text  # type: ignore[call-overload]
    for text in automatic:
        kept = dict(everything[text]["agentscope_mem0"]).get("duplicate_of")  # type: ignore[call-overload]
        assert kept is not None, text
        assert str(by_id[str(kept)]["text"]) in tool
    current = [str(m["text"]) for m in _stored(folder)]
    assert sorted(current) == sorted(t for t in tool if "Hangzhou" not in t)


_SLOW_DEMO = """
import sys
from agentscope_mem0 import demo
from agentscope_mem0.testing import ScriptedChatModel

slow = ScriptedChatModel(demo._offline_script, delay=float(sys.argv[2]))
demo.chat_model_from_env = lambda: (slow, "a slow scripted model")
from agentscope_mem0.cli import cli

cli(["demo", "--folder", sys.argv[1]])
"""


def _interrupted_demo(folder: Path, presses: int) -> tuple[int, str]:
    """The demo on a slow model, interrupted ``presses`` times once the first
    reply is done (its write is then under way); its exit code and stderr."""
    child = subprocess.Popen(
        [sys.executable, "-u", "-c", _SLOW_DEMO, str(folder), "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        for line in child.stdout:
            if line.startswith("[assistant]"):
                break
        child.send_signal(signal.SIGINT)
        if presses == 2:
            # The first press's message, then the second press while mem0 extracts.
            assert child.stderr.readline() == "\n"
            assert child.stderr.readline().startswith("interrupted; storing 1 write")
            child.send_signal(signal.SIGINT)
        code = child.wait(120)
        return code, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_ctrl_c_says_what_it_waits_for_and_stores_it(tmp_path: Path) -> None:
    code, err = _interrupted_demo(tmp_path / "data", presses=1)
    assert code == 130, err
    assert "interrupted; storing 1 write of this conversation first" in err
    assert "Press Ctrl-C again to stop now: they stay in the outbox" in err
    assert "1 write: stored." in err
    assert "Traceback" not in err


def test_a_second_ctrl_c_stops_at_once_and_leaves_the_write_in_the_outbox(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    code, err = _interrupted_demo(folder, presses=2)
    assert code == 130, err
    assert "stopped; writes not stored yet stay in the outbox" in err
    assert "Traceback" not in err and "Event loop is closed" not in err
    status = CliRunner().invoke(
        cli, ["status", "--folder", str(folder), "--json"], catch_exceptions=False
    )
    assert json.loads(status.stdout)["outbox"]["pending"] >= 1  # the next start stores it
