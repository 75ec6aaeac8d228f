"""``sandbox = "bwrap"``: the agent and its verifier in bubblewrap, through ``acr run`` with the fake agents.

The tests that start a real sandbox need bubblewrap that can start one here; without it they are skipped,
unless ACR_REQUIRE_BWRAP=1 (.ci/run) makes that a failure. The refusals use a ``bwrap`` that cannot start.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
from conftest import FAKES, GOOD, VERIFY, acr, git, init_repo

from acr_cli import sandbox


@pytest.fixture(scope="module")
def bwrap() -> None:
    """Skip (or fail, under ACR_REQUIRE_BWRAP=1) where bubblewrap cannot start a sandbox."""
    why = sandbox.problem()
    if why:
        if os.environ.get("ACR_REQUIRE_BWRAP") == "1":
            pytest.fail(f"ACR_REQUIRE_BWRAP=1 and {why}")
        pytest.skip(why)


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A project whose test fails until add() is fixed, with a symlink to a file outside it; a home of the test's
    own (HOME) with a ``.bashrc``; another folder outside the project; the fake agents on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("the user's bashrc\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("the user's notes\n")
    root = init_repo(tmp_path / "proj", {
        "calc.py": "def add(a, b):\n    return a * b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"})
    os.symlink(elsewhere / "notes.txt", root / "linked.txt")
    git(root, "add", "linked.txt")
    git(root, "commit", "-qm", "link")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return {"root": root, "home": home, "elsewhere": elsewhere, "tmp": tmp_path, "env": monkeypatch}


def _agent_does(world: dict, script: str, fix: bool = True) -> None:
    """The fake agent's scenario: run ``script`` (sh, as its shell tool would: a failing command does not stop
    it), then fix add(). No call log: the sandboxed agent could not write one outside the project."""
    rule = {"commands": [["sh", "-c", script]], **({"write": {"calc.py": GOOD}} if fix else {})}
    path = world["tmp"] / "scenario.json"
    path.write_text(json.dumps({"rules": [rule]}))
    world["env"].setenv("FAKE_AGENT_SCENARIO", str(path))


def _run(root: Path, *extra: str, verify: str = VERIFY) -> tuple[object, dict]:
    r = acr("run", "fix add", "--verify", verify, "--arms", "codex:gpt-5.4", "--json", *extra, cwd=root)
    assert r.returncode in (0, 1), r.stderr
    return r, json.loads(r.stdout)


HOSTILE = 'echo pwned >> "$HOME/.bashrc"; echo pwned > {notes}; echo pwned > {new}; echo pwned > linked.txt'


def test_a_sandboxed_agent_cannot_write_outside_the_project(bwrap, world, monkeypatch):
    """Writes by absolute path (the user's ~/.bashrc, another folder) and through a symlink fail; the attempt goes
    on to the verifier, passes, and its change in the project is kept."""
    notes, new = world["elsewhere"] / "notes.txt", world["elsewhere"] / "new.txt"
    _agent_does(world, HOSTILE.format(notes=shlex.quote(str(notes)), new=shlex.quote(str(new))))
    r, out = _run(world["root"], "--sandbox", "bwrap")
    assert r.returncode == 0 and out["attempts"][0]["verdict"] == "passed", r.stdout
    assert (world["home"] / ".bashrc").read_text() == "the user's bashrc\n"
    assert notes.read_text() == "the user's notes\n"
    assert not new.exists()
    assert (world["root"] / "calc.py").read_text() == GOOD
    log = Path(out["attempts"][0]["log_path"]).read_text()
    assert "--- sandbox: bwrap; writable: " + str(world["root"]) in log


def test_without_the_sandbox_the_same_agent_writes_outside_and_the_symlink_write_is_reported(world):
    """The sandbox is opt-in: without it, what the agent writes by absolute path lands (acr cannot see it), and a
    write through a symlink out of the project is named in the run's report as before."""
    notes, new = world["elsewhere"] / "notes.txt", world["elsewhere"] / "new.txt"
    _agent_does(world, HOSTILE.format(notes=shlex.quote(str(notes)), new=shlex.quote(str(new))))
    r, out = _run(world["root"])
    assert r.returncode == 0, r.stdout
    assert (world["home"] / ".bashrc").read_text().endswith("pwned\n") and new.exists()
    effects = out["attempts"][0]["side_effects"]
    assert any(e.startswith(f"changed {notes} outside the project, through the symlink linked.txt") for e in effects), \
        effects


def test_a_sandboxed_verifier_cannot_write_outside_the_project(bwrap, world):
    """The verifier runs in the sandbox too (the baseline and the attempt's check): its write outside fails; it
    still writes in the project and in its private temp."""
    outside = world["elsewhere"] / "notes.txt"
    _agent_does(world, "true")
    check = (f"echo check >> {shlex.quote(str(outside))}; echo check > \"$TMPDIR/scratch\" && "
             f"echo check > check-output.txt && {VERIFY}")
    r, out = _run(world["root"], "--sandbox", "bwrap", verify=check)
    assert r.returncode == 0 and out["attempts"][0]["verdict"] == "passed", r.stdout
    assert outside.read_text() == "the user's notes\n"
    assert (world["root"] / "check-output.txt").read_text() == "check\n"


def test_the_agents_own_directory_and_temp_stay_writable(bwrap, world):
    """codex's ~/.codex (made when missing, as codex would) and the private temp are writable in the sandbox; the
    temp is gone after the run."""
    _agent_does(world, 'echo session > "$HOME/.codex/session.txt" && echo "$TMPDIR" > "$HOME/.codex/tmp" '
                              '&& echo scratch > "$TMPDIR/scratch"')
    r, out = _run(world["root"], "--sandbox", "bwrap")
    assert r.returncode == 0, r.stdout
    assert (world["home"] / ".codex" / "session.txt").read_text() == "session\n"
    tmp = Path((world["home"] / ".codex" / "tmp").read_text().strip())
    assert tmp.name.startswith("acr-sandbox-") and not tmp.exists()


def test_a_sandboxed_attempts_leftover_background_process_is_ended(bwrap, world):
    """A process the agent left running in a session of its own is ended with the attempt, as outside the
    sandbox: the marker, the process group and the reaper still hold."""
    _agent_does(world, 'setsid sleep 300 >/dev/null 2>&1 & echo $! > "$HOME/.codex/pid"')
    r, out = _run(world["root"], "--sandbox", "bwrap")
    assert r.returncode == 0, r.stdout
    pid = int((world["home"] / ".codex" / "pid").read_text())
    assert not _running(pid)
    log = Path(out["attempts"][0]["log_path"]).read_text()
    assert "outlived the agent and was ended" in log and "sleep 300" in log


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not), waiting a moment for one being ended."""
    end = time.monotonic() + 3
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


# --------------------------------------------------------------------------- a sandbox that cannot start

@pytest.fixture
def broken_bwrap(tmp_path, monkeypatch) -> Path:
    """A ``bwrap`` first on PATH that fails as bubblewrap does where user namespaces are off."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel "
                    "does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return fake


def test_run_refuses_before_any_agent_when_the_sandbox_cannot_start(world, broken_bwrap):
    _agent_does(world, 'echo ran > "$HOME/agent-ran"')
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--sandbox", "bwrap", cwd=world["root"])
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join(r.stderr.split())
    assert "--sandbox bwrap: bubblewrap" in said and "cannot start a sandbox here" in said
    assert "no agent was run" in said and "Traceback" not in r.stderr
    assert not (world["home"] / "agent-ran").exists()
    assert (world["root"] / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"


def test_doctor_reports_a_sandbox_that_is_on_and_cannot_start(world, broken_bwrap):
    assert acr("config", "set", "sandbox", "bwrap", cwd=world["root"]).returncode == 0
    r = acr("doctor", "--json", cwd=world["root"])
    box = json.loads(r.stdout)["sandbox"]
    assert r.returncode == 1
    assert box["setting"] == "bwrap" and box["available"] is False and "cannot start" in box["problem"]
    assert any(p.startswith('sandbox = "bwrap"') for p in json.loads(r.stdout)["problems"])
    human = acr("doctor", cwd=world["root"])
    assert "sandbox bwrap" in human.stdout and "No permissions to creating new namespace" in " ".join(
        human.stdout.split())


def test_a_missing_bwrap_is_named():
    assert sandbox.problem("acr-no-such-bwrap") == "bubblewrap (bwrap) is not installed"


def test_an_untrusted_project_file_may_turn_the_sandbox_on_never_off(world, broken_bwrap):
    """.acr.toml (not trusted) with sandbox = "bwrap" turns it on even over config.toml's "none"; with "none" it
    cannot turn off the user's "bwrap". Either way the run refuses here, where the sandbox cannot start."""
    root = world["root"]
    _agent_does(world, "true")
    for mine, theirs in (("none", "bwrap"), ("bwrap", "none")):
        assert acr("config", "set", "sandbox", mine, cwd=root).returncode == 0
        (root / ".acr.toml").write_text(f'sandbox = "{theirs}"\n')
        r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=root)
        assert r.returncode == 2 and "cannot start a sandbox here" in r.stderr, (mine, theirs, r.stderr)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--sandbox", "none", cwd=root)
    assert r.returncode == 0, r.stderr  # the user's own command line may still turn it off


def test_a_bad_sandbox_value_is_refused(world):
    r = acr("run", "fix add", "--sandbox", "docker", cwd=world["root"])
    assert r.returncode == 2 and "expected bwrap or none" in r.stderr and "Traceback" not in r.stderr
    (world["root"] / ".acr.toml").write_text('sandbox = "firejail"\n')
    r = acr("run", "fix add", cwd=world["root"])
    assert r.returncode == 2 and "expected bwrap or none" in r.stderr


def test_bwrap_argv_binds_each_writable_path_once_and_runs_no_shell(tmp_path):
    """The argv: read-only root, then the outermost writable paths, then the command as separate arguments."""
    work, inner = tmp_path / "work", tmp_path / "work" / ".git"
    spec = sandbox.Spec((work, inner, tmp_path / "agent"), tmp_path / "tmp", work)
    argv = sandbox.bwrap_argv(spec, [sys.executable, "-c", "print('$(x)')"])
    assert argv[:5] == ["bwrap", "--ro-bind", "/", "/", "--dev"]
    assert sandbox.writable_in(argv) == [str(work), str(tmp_path / "agent"), str(tmp_path / "tmp")]
    assert argv[-4:] == ["--", sys.executable, "-c", "print('$(x)')"]


def test_a_profile_may_turn_the_sandbox_on(world, broken_bwrap):
    """``settings: sandbox: bwrap`` in a profile applies to its runs (here: refused, the sandbox cannot start)."""
    profile = world["tmp"] / "boxed.yaml"
    profile.write_text("extends: balanced\nsettings:\n  sandbox: bwrap\n")
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--profile", str(profile),
            cwd=world["root"])
    assert r.returncode == 2 and "(from profile boxed)" in r.stderr and "cannot start a sandbox here" in r.stderr, \
        r.stderr
    profile.write_text("extends: balanced\nsettings:\n  sandbox: yes\n")
    r = acr("run", "fix add", "--profile", str(profile), cwd=world["root"])
    assert r.returncode == 2 and "expected one of bwrap, none" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("lanes", ["worktree", "overlay"])
def test_a_sandboxed_race_stops_an_arm_writing_into_the_users_work_tree(bwrap, world, lanes):
    """In a sandboxed race each arm may write only its own lane: a write into the user's work tree by absolute
    path fails (the race is not spoiled by it), and the winner's change arrives as usual."""
    from acr_cli.workspace import overlay

    if lanes == "overlay" and overlay.probe() is not None:
        why = f"overlay lanes cannot start here: {overlay.probe()}"
        pytest.fail(why) if os.environ.get("ACR_REQUIRE_OVERLAY") == "1" else pytest.skip(why)
    planted = world["root"] / "planted.py"
    _agent_does(world, f'echo pwned > {shlex.quote(str(planted))}; echo pwned >> "$HOME/.bashrc"')
    assert acr("config", "set", "race_lanes", lanes, cwd=world["root"]).returncode == 0
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4,claude:claude-opus-4-6", "--race", "2",
            "--sandbox", "bwrap", "--json", cwd=world["root"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["race"]["winner"] is not None and out["race"]["note"] is None
    assert not planted.exists() and (world["home"] / ".bashrc").read_text() == "the user's bashrc\n"
    assert (world["root"] / "calc.py").read_text() == GOOD
    said = {"overlay": "each in a copy-on-write overlay of your repository", "worktree": "each in its own worktree"}
    assert said[lanes] in " ".join(r.stderr.split()), r.stderr
