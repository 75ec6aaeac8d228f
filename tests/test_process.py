"""The process runner: stdin closed, timeouts kill the whole group, PWD set, missing commands."""

from __future__ import annotations

import os
import sys
import time

from acr_cli import process


def test_stdin_is_closed_and_pwd_is_the_project(tmp_path):
    code = "import os,sys; print(repr(sys.stdin.read())); print(os.environ['PWD']); print(os.getcwd())"
    r = process.run([sys.executable, "-c", code], cwd=tmp_path, env=process.child_env(tmp_path), timeout=30)
    out = r.stdout.splitlines()
    assert r.exit_code == 0 and out[0] == "''" and out[1] == str(tmp_path) and out[2] == str(tmp_path)


def test_timeout_kills_the_process_group(tmp_path):
    pidfile = tmp_path / "child"
    code = (f"import subprocess,sys,time; c=subprocess.Popen([sys.executable,'-c','import time;time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(str(c.pid)); print('started', flush=True); time.sleep(60)")
    seen = []
    start = time.monotonic()
    r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=2, on_line=lambda s, l: seen.append(l))
    assert r.timed_out and time.monotonic() - start < 15
    assert seen == ["started"]
    child = int(pidfile.read_text())
    time.sleep(0.2)
    try:
        os.kill(child, 0)
        with open(f"/proc/{child}/stat") as f:
            assert f.read().split(")")[-1].split()[0] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        pass


def test_missing_command(tmp_path):
    r = process.run(["definitely-not-a-command-acr"], cwd=tmp_path, timeout=5)
    assert r.not_started and "not found" in r.stderr


def test_log_is_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890abcdef")
    log = tmp_path / "log"
    with open(log, "w") as f:
        process.run([sys.executable, "-c", "print('auth tok-1234567890abcdef sk-ant-aaaaaaaaaaaaaaaaaaaaaaaa')"],
                    cwd=tmp_path, timeout=10, log=f)
    text = log.read_text()
    assert "tok-1234567890abcdef" not in text and "sk-ant-aaaa" not in text and "[REDACTED]" in text


def test_stdin_text_is_delivered_then_closed(tmp_path):
    text = "line one\n\"quoted\" $(x) `y`\n" + "z" * 200_000  # larger than a pipe buffer
    r = process.run([sys.executable, "-c", "import sys; d=sys.stdin.read(); print(len(d)); print(d[:30])"],
                    cwd=tmp_path, timeout=30, stdin_text=text)
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == str(len(text))
    assert r.stdout.splitlines()[1] == "line one"


def test_a_flood_of_output_is_bounded_in_memory_and_in_the_log(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "LOG_MAX_BYTES", 100_000)
    monkeypatch.setattr(process, "KEEP_HEAD_BYTES", 20_000)
    monkeypatch.setattr(process, "KEEP_TAIL_BYTES", 50_000)
    code = "print('FIRST'); [print('x' * 99) for _ in range(20000)]; print('LAST')"  # 2 MB
    log = tmp_path / "log"
    with open(log, "w") as f:
        r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60, log=f)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "FIRST" and lines[-1] == "LAST"  # what parsers need: the start and the end
    assert len(r.stdout) < 80_000
    assert log.stat().st_size < 110_000 and "the rest is not logged" in log.read_text()
