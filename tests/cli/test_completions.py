"""Shell completions: the committed scripts match the app, and completion answers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import REPO

ROOT = REPO


def _generator():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "completions" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_committed_scripts_are_current(shell):
    got = (ROOT / "completions" / f"acr.{shell}").read_text()
    assert got == _generator().script(shell), "stale: run `python completions/generate.py`"


def test_completion_answers_subcommands():
    env = dict(os.environ, _ACR_COMPLETE="complete_bash", COMP_WORDS="acr mem", COMP_CWORD="1")
    r = subprocess.run([sys.executable, "-m", "acr_cli"], env=env, capture_output=True, text=True, timeout=30)
    assert "memory" in r.stdout.split()


def test_install_completion(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), SHELL="/bin/bash", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    r = subprocess.run([sys.executable, "-m", "acr_cli", "--install-completion", "bash"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "_ACR_COMPLETE" in (tmp_path / ".bashrc").read_text() + "".join(
        p.read_text() for p in tmp_path.rglob("acr*") if p.is_file())
