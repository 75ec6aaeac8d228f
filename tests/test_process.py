"""The process runner: stdin closed, timeouts kill the whole group and every process the run started, PWD set,
missing commands, bounded memory, a log that cannot be written."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

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
    r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=2, on_line=lambda stream, line: seen.append(line))
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
    monkeypatch.setattr(process.capture, "KEEP_HEAD_BYTES", 20_000)
    monkeypatch.setattr(process.capture, "KEEP_TAIL_BYTES", 50_000)
    code = "print('FIRST'); [print('x' * 99) for _ in range(20000)]; print('LAST')"  # 2 MB
    log = tmp_path / "log"
    with open(log, "w") as f:
        r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60, log=f, log_max_bytes=100_000)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "FIRST" and lines[-1] == "LAST"  # what parsers need: the start and the end
    assert len(r.stdout) < 80_000
    assert log.stat().st_size < 110_000 and "the rest is not logged" in log.read_text()


def _note_bytes(log: Path) -> int:
    """The size of the note that ends a full log (its last line)."""
    return len(log.read_bytes().splitlines(keepends=True)[-1])


def test_the_log_cap_counts_the_bytes_written_not_the_bytes_read(tmp_path):
    # 1 MB of one-byte lines: each is logged as "[out] x\n", four times its size, and the same for
    # characters that take more bytes in UTF-8 than in the output (an invalid byte is logged as U+FFFD)
    cap = 100_000
    code = ("import sys; w = sys.stdout.buffer.write; [w(b'x\\n') for _ in range(300000)]; "
            "[w(b'\\xff\\n') for _ in range(200000)]; w(b'LAST\\n')")
    log = tmp_path / "log"
    with open(log, "w", encoding="utf-8") as f:
        f.write("--- agent: a header acr wrote first\n")
        r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60, log=f, log_max_bytes=cap)
    assert r.exit_code == 0 and not r.timed_out and r.log_problem is None
    assert r.stdout.splitlines()[-1] == "LAST"  # drained to the end after the cap
    text = log.read_text()
    assert text.startswith("--- agent: a header acr wrote first\n")
    assert text.endswith("the rest is not logged)\n") and text.count("the rest is not logged") == 1
    assert log.stat().st_size <= cap + _note_bytes(log)
    assert log.stat().st_size > cap - 100  # ...and the cap is used: lines are logged up to it


def test_a_full_log_takes_one_note_from_each_later_run(tmp_path):
    # the agent's run fills the log; the verifier's, on the same file, adds its note and nothing else
    cap = 50_000
    log = tmp_path / "log"
    flood = [sys.executable, "-c", "import sys; [print(i) for i in range(100000)]; print('x' * 500, file=sys.stderr)"]
    with open(log, "w", encoding="utf-8") as f:
        process.run(flood, cwd=tmp_path, timeout=60, log=f, log_max_bytes=cap)
        f.flush()
        size = log.stat().st_size
        assert size <= cap + _note_bytes(log)
        process.run(flood, cwd=tmp_path, timeout=60, log=f, log_max_bytes=cap)
    assert log.stat().st_size == size + _note_bytes(log)
    assert log.read_text().count("the rest is not logged") == 2


# --- Every process of a run ends with it -------------------------------------------------------------------

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and prctl (Linux)")
DRIVER = Path(__file__).parent / "fakes" / "process_driver.py"


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_for(what, seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < end, "gave up waiting"
        time.sleep(0.05)


def _escape(kind: str, pidfile: Path, then: str) -> list[str]:
    """An agent that starts a process leaving its group (``kind``), then exits (``then`` "exit") or hangs."""
    py = sys.executable
    hang = "time.sleep(300)" if then == "hang" else "pass"
    if kind == "setsid":  # a grandchild that makes its own session, keeping the agent's stdout and stderr
        grandchild = (f"import os,time; os.setsid(); open({str(pidfile) + '.tmp'!r},'w').write(str(os.getpid()));"
                      f"os.rename({str(pidfile) + '.tmp'!r},{str(pidfile)!r}); time.sleep(300)")
        code = (f"import os,subprocess,sys,time; subprocess.Popen([{py!r},'-c',{grandchild!r}]);"
                f"[time.sleep(0.02) for _ in range(1500) if not os.path.exists({str(pidfile)!r})]; {hang}")
        return [py, "-c", code]
    if kind == "double-fork":  # the classic daemon: fork, setsid, fork; the middle one exits at once
        code = (f"import os,time\n"
                f"if os.fork() == 0:\n"
                f"    os.setsid()\n"
                f"    if os.fork() == 0:\n"
                f"        open({str(pidfile) + '.tmp'!r},'w').write(str(os.getpid()))\n"
                f"        os.rename({str(pidfile) + '.tmp'!r},{str(pidfile)!r}); time.sleep(300)\n"
                f"    os._exit(0)\n"
                f"[time.sleep(0.02) for _ in range(1500) if not os.path.exists({str(pidfile)!r})]\n{hang}\n")
        return [py, "-c", code]
    assert kind == "set-m"  # bash job control: the job gets a process group of its own
    tail = "exec sleep 300" if then == "hang" else "exit 0"
    return ["bash", "-c", f"set -m; sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile};"
                          f" disown; {tail}"]


@linux_only
@pytest.mark.parametrize("then", ["exit", "hang"])
@pytest.mark.parametrize("kind", ["setsid", "double-fork", "set-m"])
def test_a_process_that_left_the_group_ends_with_the_run(tmp_path, kind, then):
    pidfile = tmp_path / "escaped"
    bystander = subprocess.Popen(["sleep", "60"])  # acr's own child from before the run: not the run's
    try:
        start = time.monotonic()
        r = process.run(_escape(kind, pidfile, then), cwd=tmp_path, timeout=4 if then == "hang" else 30)
        assert time.monotonic() - start < 15
        assert r.timed_out == (then == "hang") and (then == "hang" or r.exit_code == 0)
        pid = int(pidfile.read_text())
        assert not _running(pid)
        assert [line for line in r.leftovers if line.startswith(f"pid {pid} (")], r.leftovers
        assert all(line.endswith(("terminated (SIGTERM)", "killed (SIGKILL)")) for line in r.leftovers), r.leftovers
        assert bystander.poll() is None  # neither killed nor reaped by run()
    finally:
        bystander.kill()
        bystander.wait()


@linux_only
def test_a_process_that_left_the_group_ends_on_ctrl_c_too(tmp_path):
    pidfile = tmp_path / "escaped"
    cfg = {"argv": _escape("setsid", pidfile, "hang"), "cwd": str(tmp_path), "timeout": 60,
           "interrupt_when": str(pidfile)}
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(cfg)], capture_output=True, text=True, timeout=60)
    out = json.loads(done.stdout)
    pid = int(pidfile.read_text())
    assert out["cancelled"] and not _running(pid)
    assert [line for line in out["leftovers"] if line.startswith(f"pid {pid} (")], out


@linux_only
def test_a_process_that_forks_while_being_killed_is_chased_down(tmp_path):
    marker = f"test-chain-{os.getpid()}-{time.monotonic_ns()}"
    pids = tmp_path / "pids"
    # Each generation ignores SIGTERM, leaves its session, forks the next one and exits: a moving target.
    chain = (f"import os,signal,time\n"
             f"signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             f"for gen in range(2000):\n"
             f"    with open({str(pids)!r},'a') as f: f.write(f'{{os.getpid()}}\\n')\n"
             f"    time.sleep(0.005)\n"
             f"    if os.fork() != 0: os._exit(0)\n"
             f"    os.setsid()\n")
    agent = (f"import os,subprocess,sys,time\n"
             f"subprocess.Popen([sys.executable,'-c',{chain!r}])\n"
             f"end = time.monotonic() + 20\n"
             f"while time.monotonic() < end and not (os.path.exists({str(pids)!r})\n"
             f"                                      and len(open({str(pids)!r}).read().split()) >= 5):\n"
             f"    time.sleep(0.02)\n")
    r = process.run([sys.executable, "-c", agent], cwd=tmp_path, timeout=30, marker=marker)
    assert r.exit_code == 0
    seen = [int(p) for p in pids.read_text().split()]
    assert len(seen) >= 5
    assert process.find_marked(marker) == []
    assert not [p for p in seen if _running(p)]
    assert any(line.endswith("killed (SIGKILL)") for line in r.leftovers), r.leftovers


@linux_only
def test_a_killed_acr_takes_its_agent_along_and_the_rest_is_found_by_its_marker(tmp_path):
    prefix = f"test-killed-{os.getpid()}-{time.monotonic_ns()}"
    agent_pid, escaped = tmp_path / "agent", tmp_path / "escaped"
    grandchild = (f"import os,time; os.setsid(); open({str(escaped) + '.tmp'!r},'w').write(str(os.getpid()));"
                  f"os.rename({str(escaped) + '.tmp'!r},{str(escaped)!r}); time.sleep(300)")
    agent = (f"import os,subprocess,sys,time; open({str(agent_pid)!r},'w').write(str(os.getpid()));"
             f"subprocess.Popen([sys.executable,'-c',{grandchild!r}],stdout=subprocess.DEVNULL); time.sleep(300)")
    cfg = {"argv": [sys.executable, "-c", agent], "cwd": str(tmp_path), "timeout": 120, "marker": prefix + "-1"}
    driver = subprocess.Popen([sys.executable, str(DRIVER), json.dumps(cfg)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: escaped.exists() or driver.poll() is not None)
        assert driver.poll() is None, driver.communicate()
        driver.kill()  # acr gets SIGKILL: no cleanup of its own runs
        driver.wait()
        agent = int(agent_pid.read_text())
        _wait_for(lambda: not _running(agent), 10)  # the parent-death signal
        pid = int(escaped.read_text())
        assert _running(pid)  # what the agent started outlives it...
        found = process.find_marked(prefix)
        assert [p for p, _ in found] == [pid] and "os.setsid()" in found[0][1]  # ...and is found by its marker
        assert process.find_marked(prefix + "-2") == []
        assert process.kill_pids([pid]) == []
        assert not _running(pid) and process.find_marked(prefix) == []
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        if escaped.exists() and _running(int(escaped.read_text())):
            os.kill(int(escaped.read_text()), signal.SIGKILL)


def test_without_proc_and_prctl_the_group_kill_still_holds(tmp_path, monkeypatch):
    """What macOS gets: no subreaper, no parent-death signal, no /proc; the process group is still killed."""
    monkeypatch.setattr(process.procfs, "LINUX", False)
    monkeypatch.setattr(process.reaper, "_prctl_loaded", True)
    monkeypatch.setattr(process.reaper, "_prctl_fn", None)
    pidfile = tmp_path / "child"
    code = (f"import subprocess,sys,time; c=subprocess.Popen([sys.executable,'-c','import time;time.sleep(60)']);"
            f"open({str(pidfile)!r},'w').write(str(c.pid)); time.sleep(60)")
    r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=3, marker="test-no-linux")
    assert r.timed_out and r.leftovers == [] and r.log_problem is None
    _wait_for(lambda: not _running(int(pidfile.read_text())), 10)
    assert process.find_marked("test-no-linux") == []


# --- Bounded memory, and a log that cannot be written -------------------------------------------------------

def test_a_long_line_is_cut_in_the_output_the_callback_and_the_log(tmp_path, monkeypatch):
    monkeypatch.setattr(process.capture, "LINE_MAX_BYTES", 1000)
    code = "import sys; w=sys.stdout.write; w('a'*5000+'\\n'); w('b'*10+'\\n'); w('c'*1000+'\\n'); w('d'*2500)"
    seen = []
    log = tmp_path / "log"
    with open(log, "w") as f:
        r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=30, log=f,
                        on_line=lambda s, line: seen.append(line))
    want = ["a" * 1000 + " [... line cut: 4000 bytes dropped]", "b" * 10, "c" * 1000,
            "d" * 1000 + " [... line cut: 1500 bytes dropped]"]
    assert r.stdout.splitlines() == want and seen == want
    assert log.read_text().splitlines() == [f"[out] {line}" for line in want]


@linux_only
def test_one_huge_line_keeps_memory_bounded(tmp_path):
    code = ("import sys; w=sys.stdout.buffer.write; chunk=b'x'*2**20\n"
            "for _ in range(200): w(chunk)\n"
            "w(b'\\nafter\\n')\n")
    cfg = {"argv": [sys.executable, "-c", code], "cwd": str(tmp_path), "timeout": 120, "log": str(tmp_path / "log")}
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(cfg)], capture_output=True, text=True, timeout=120)
    out = json.loads(done.stdout)
    assert out["exit_code"] == 0, out
    assert out["maxrss"] < 150 * 2**20, out["maxrss"]
    cut = f" [... line cut: {199 * 2**20} bytes dropped]"
    assert out["stdout_lines"][0].endswith(f"...({2**20 + len(cut)})") and out["stdout_lines"][1] == "after"
    logged = (tmp_path / "log").read_text().splitlines()
    assert logged[0] == "[out] " + "x" * 2**20 + cut and logged[1] == "[out] after"


def test_a_tiny_line_flood_is_bounded_by_memory_not_by_characters(monkeypatch):
    monkeypatch.setattr(process.capture, "KEEP_HEAD_BYTES", 10_000)
    monkeypatch.setattr(process.capture, "KEEP_TAIL_BYTES", 100_000)
    cap = process.capture.Capture()
    for i in range(200_000):
        cap.append(f"{i % 100:02d}")
    held = sum(sys.getsizeof(s) + 8 for s in [*cap.head, *cap.tail])
    assert held < 120_000 and cap.tail[-1] == "99"


class _FullDisk:
    """A log whose writes fail with ENOSPC once ``room`` characters were written."""

    def __init__(self, room: int) -> None:
        self.room, self.written, self.failures = room, 0, 0

    def write(self, text: str) -> int:
        if self.written + len(text) > self.room:
            self.failures += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.written += len(text)
        return len(text)


def test_a_full_disk_stops_the_log_not_the_agent(tmp_path, monkeypatch, capfd):
    crashed = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashed.append(args))
    code = ("import sys\n"
            "for i in range(100000):\n"
            "    print('o' * 99); print('e' * 99, file=sys.stderr)\n"
            "print('done')\n")
    seen = []

    def on_line(stream, line):
        seen.append(stream)
        raise ValueError("a broken live view")

    log = _FullDisk(10_000)
    start = time.monotonic()
    r = process.run([sys.executable, "-c", code], cwd=tmp_path, timeout=20, log=log, on_line=on_line)
    assert not r.timed_out and r.exit_code == 0 and time.monotonic() - start < 15
    assert r.log_problem == f"logging stopped: {os.strerror(errno.ENOSPC)}"
    assert log.failures == 1  # the first failure ends logging
    assert r.stdout.splitlines()[-1] == "done" and len(seen) == 200_001
    assert not crashed and "Traceback" not in capfd.readouterr().err
