#!/usr/bin/env python3
"""What one failed attempt costs acr's workspace, today against an earlier revision, printed (never asserted).

    python bench/rollback_cost.py REV [--repeat 7] [--files 2000,50000]

One cycle is what acr does around a failed attempt: checkpoint, the change check (``touched()``
where the revision has it: what the attempt changed, ignored files too, read before the verifier;
else ``changes()``),
the rollback that keeps the attempt's work, and dropping the checkpoint. Each revision's
``acr_cli`` runs in a child process of its own (``git worktree`` of REV in a temporary folder),
on the same generated repository, the two alternating round by round so a noisy machine moves
both alike; the figure is the median of the cycles' own time (no process start counted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CYCLE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from acr_cli.workspace import Workspace
root, name = sys.argv[2], sys.argv[3]
ws = Workspace.open(__import__("pathlib").Path(root))
t0 = time.perf_counter()
cp = ws.checkpoint(name)
(ws.root / "src" / "m0" / "f0.py").write_text("changed " + name + "\n")
(ws.root / "new_file.py").write_text("made by the attempt\n")
ws.touched(cp) if hasattr(ws, "touched") else ws.changes(cp)  # (touched() reads changes() and the ignored files)
ws.restore(cp, keep_as=name)
ws.drop(cp)
print(json.dumps(time.perf_counter() - t0))
"""


def make_repo(where: Path, files: int) -> Path:
    where.mkdir(parents=True)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=where, check=True, capture_output=True)

    git("init", "-q")
    for i in range(files):
        d = where / "src" / f"m{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"x = {i}\n" * 20)
    (where / ".gitignore").write_text(".env\n__pycache__/\n")
    (where / ".env").write_text("TOKEN=x\n")
    git("add", "-A")
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init")
    (where / "notes.md").write_text("the user's untracked notes\n")
    return where


def cycle(tree: Path, repo: Path, name: str, env: dict) -> float:
    r = subprocess.run([sys.executable, "-c", CYCLE, str(tree), str(repo), name], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0:
        raise SystemExit(f"the cycle failed in {tree}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the revision to compare with (e.g. the commit before a change)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--files", default="2000,50000", help="tracked files of the generated repositories")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        old = tmpdir / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old), args.rev], check=True)
        try:
            print(f"checkpoint + change check + rollback (kept) + drop of one failed attempt, medians of {args.repeat}, "
                  "alternating")
            print(f"  {'tracked files':>14} {'today':>9} {args.rev[:10]:>11} {'ratio':>6}")
            for n in (int(x) for x in args.files.split(",")):
                repo = make_repo(tmpdir / f"repo{n}", n)
                samples: dict[str, list[float]] = {"today": [], "old": []}
                for i in range(args.repeat + 1):
                    for key, tree in (("today", ROOT), ("old", old)):
                        env = {**os.environ, "ACR_HOME": str(tmpdir / f"home-{key}")}
                        t = cycle(tree, repo, f"bench-{key}-{i}", env)
                        if i:  # the first round warms the caches
                            samples[key].append(t)
                today, was = statistics.median(samples["today"]), statistics.median(samples["old"])
                print(f"  {n:>14,} {today * 1000:7.0f}ms {was * 1000:9.0f}ms {today / was:5.2f}x")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)


if __name__ == "__main__":
    main()
