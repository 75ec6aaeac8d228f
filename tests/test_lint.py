"""The code passes the lint configuration in pyproject.toml (ruff: pyflakes, pycodestyle, import order)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO


def test_the_code_passes_its_lint_configuration():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "acr_cli", "bench", "tests"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
