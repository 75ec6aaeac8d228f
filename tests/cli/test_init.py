"""`acr init`: a profile of exactly the arms that can run here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml
from conftest import FAKES, acr


def only(tmp_path: Path, *clis: str) -> dict:
    """An environment whose PATH has just these fake CLIs (and python, git)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for c in clis:
        (bin_dir / c).write_text(f'#!/bin/sh\nexec "{FAKES / c}" "$@"\n')
        (bin_dir / c).chmod(0o755)
    py_dir = Path(sys.executable).parent
    return {"PATH": os.pathsep.join([str(bin_dir), str(py_dir), "/usr/bin", "/bin"])}


def test_init_writes_a_profile_with_exactly_the_ready_arms(tmp_path, acr_home):
    env = only(tmp_path, "claude", "opencode") | {"FAKE_AGENT_OPENCODE_PROVIDERS": "zhipuai"}
    r = acr("init", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [k["arm"] for k in out["kept"]] == ["claude:claude-opus-4-6", "claude:claude-sonnet-4-6",
                                               "opencode:zhipuai/glm-5"]
    left = {k["arm"]: k for k in out["left_out"]}
    assert "not installed" in left["codex:gpt-5.4"]["reason"].lower() or "not found" in left["codex:gpt-5.4"]["reason"]
    assert left["opencode:moonshotai/kimi-k2.5"]["fix"]  # what to do about it
    assert out["written"] and out["active"]
    written = yaml.safe_load(Path(out["path"]).read_text())
    assert [f"{a['agent']}:{a['model']}" for a in written["arms"]] == [k["arm"] for k in out["kept"]]
    assert written["arms"][0]["price"] == {"input": 5, "output": 25}  # from the built-in profiles
    r = acr("profiles", "validate", out["path"], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = acr("doctor", "--json", env=env, cwd=tmp_path)  # now the active profile: every arm ready
    assert json.loads(r.stdout)["profile"]["readiness"] == {"total": 3, "ready": 3, "unknown": 0, "not_ready": 0, "held": 0}
    r = acr("init", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "--force" in r.stderr  # never overwrites unasked
    assert acr("init", "--force", env=env, cwd=tmp_path).returncode == 0


def test_init_with_nothing_ready_writes_nothing_and_says_why(tmp_path, acr_home):
    env = only(tmp_path, "claude") | {"FAKE_AGENT_LOGGED_OUT": "claude"}
    r = acr("init", env=env, cwd=tmp_path)
    assert r.returncode == 1 and "no profile was written" in r.stdout and "claude" in r.stdout
    assert not (acr_home / "config" / "profiles" / "mine.yaml").exists()


def test_init_takes_only_a_plain_name(tmp_path, acr_home):
    env = only(tmp_path, "claude")
    for bad in ("", "a/b", "../x", ".hidden", "balanced", "x\ny", "tab\tname", "two words"):
        r = acr("init", "--name", bad, env=env, cwd=tmp_path)
        assert r.returncode == 2 and "give a plain name" in r.stderr, bad
    assert not (acr_home / "config" / "profiles").exists() or not list((acr_home / "config" / "profiles").iterdir())
    r = acr("init", "--name", "work-2.é", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (acr_home / "config" / "profiles").iterdir()] == ["work-2.é.yaml"]


def test_init_names_the_arms_of_unknown_readiness_it_leaves_out_and_how_to_keep_them(tmp_path, acr_home):
    env = only(tmp_path, "claude", "codex") | {"FAKE_AGENT_STATUS_UNSUPPORTED": "claude"}
    r = acr("init", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for arm in ("claude:claude-opus-4-6", "claude:claude-sonnet-4-6"):
        assert f"? {arm}: readiness unknown, left out: claude: `claude auth status`" in r.stdout
    assert ("left out 2 arm(s) whose readiness no check could tell (they may well run): claude:claude-opus-4-6, "
            "claude:claude-sonnet-4-6; `acr init --include-unknown --force` keeps them") in r.stdout
    kept = acr("init", "--include-unknown", "--force", "--json", env=env, cwd=tmp_path)
    assert {"claude:claude-opus-4-6", "claude:claude-sonnet-4-6"} <= {k["arm"] for k in json.loads(kept.stdout)["kept"]}
