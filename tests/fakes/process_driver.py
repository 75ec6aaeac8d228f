#!/usr/bin/env python3
"""Runs one ``acr_cli.process.run()`` in a process of its own, for tests that must kill that process,
send it Ctrl-C or measure its memory.

Usage: ``process_driver.py CONFIG_JSON``; the config holds ``argv``, ``cwd`` and optionally ``timeout``,
``marker``, ``log`` (a file to log to) and ``interrupt_when`` (a file: once it exists, the driver sends
itself SIGINT, as a Ctrl-C would). Prints one JSON object: the result's fields (stdout and stderr
shortened) and ``maxrss`` (the driver's peak resident memory, bytes).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acr_cli import process  # noqa: E402


def interrupt_when(path: str) -> None:
    end = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGINT)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if cfg.get("interrupt_when"):
        threading.Thread(target=interrupt_when, args=(cfg["interrupt_when"],), daemon=True).start()
    log = open(cfg["log"], "w") if cfg.get("log") else None
    try:
        r = process.run(cfg["argv"], cwd=Path(cfg["cwd"]), timeout=cfg.get("timeout"), marker=cfg.get("marker"),
                        log=log)
    except process.Cancelled as e:
        r = e.result
    finally:
        if log is not None:
            log.close()
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    out = {
        "exit_code": r.exit_code, "timed_out": r.timed_out, "cancelled": r.cancelled,
        "leftovers": r.leftovers, "log_problem": r.log_problem,
        "stdout_len": len(r.stdout), "stdout_lines": [line[:200] + f"...({len(line)})" if len(line) > 200 else line
                                                      for line in r.stdout.splitlines()[:10]],
        "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
