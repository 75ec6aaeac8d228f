"""The wheel users install: the built-in profiles and benchmark descriptions, not the developer's scripts."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import REPO


def test_the_wheel_carries_what_acr_reads_and_not_the_benchmark_scripts(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp_path.glob("acr-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {n.split("_data/", 1)[1] for n in names if n.startswith("acr_cli/_data/")}
    assert data == {f"profiles/{p.name}" for p in (REPO / "profiles").glob("*.yaml")} | {
        "bench/ood176.yaml", "bench/id2919.yaml"}
    assert "acr_cli/routing/registry.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "acr_cli/_data/bench/")) and n.endswith(".py")
                or n.endswith(".png")]
