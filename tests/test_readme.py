"""The README's Quickstart, run as a new user would paste it (with the fake agent CLIs it names)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def test_the_quickstart_runs_as_written(tmp_path):
    script = quickstart_block()
    if not (ROOT / ".venv" / "bin" / "activate").is_file():  # tests run from another environment
        script = script.replace("source .venv/bin/activate", f'export PATH="{Path(sys.executable).parent}:$PATH"')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACR_", "FAKE_AGENT", "XDG_"))}
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    r = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert not re.search(r"^Traceback", out, re.M)  # acr's own (the check's, quoted under a failed attempt, is fine)
    attempts = re.findall(r"attempt (\d).*?(opencode|codex)", out)
    assert ("1", "opencode") in attempts and ("2", "codex") in attempts, out
    toy = next(p for p in tmp_path.iterdir() if (p / "calc.py").is_file())
    assert "a + b" in (toy / "calc.py").read_text()  # codex's passing fix is left for review
    assert not (tmp_path / ".local" / "share" / "acr").exists()  # the demo kept out of the user's own memory
