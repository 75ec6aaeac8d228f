"""Shared fixtures: every test gets its own acr home; helpers for git projects and fake agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FAKES = TESTS / "fakes"
SAMPLES = TESTS / "samples"  # outputs recorded from the real CLIs (samples/README.md)
DATA = TESTS / "data"  # hand-written requests, labelled by kind
REPO = TESTS.parent
SHARED_BENCH = REPO.parent / "shared" / "coderouterbench"
# the published CodeRouterBench files, for the tests that replay them: ../shared's copy, or $ACR_TEST_BENCH_DATA;
# those tests are skipped where neither has them (a clone elsewhere)
BENCH_DATA = Path(os.environ.get("ACR_TEST_BENCH_DATA", SHARED_BENCH))
needs_bench_data = pytest.mark.skipif(not (BENCH_DATA / "ood176_results_long.csv").is_file(),
                                      reason=f"CodeRouterBench files not found in {BENCH_DATA}")


def pytest_configure(config):
    """Compile acr_cli's bytecode once, before any test starts (in the controller, not in each xdist worker).

    Most tests start ``python -m acr_cli`` in a subprocess; where PYTHONDONTWRITEBYTECODE is set (CI images
    often set it) each of those would otherwise compile every acr module from source again. Only acr's own
    package is compiled (its ``__pycache__`` is git-ignored): a test project's files never are.
    """
    if not hasattr(config, "workerinput"):
        import compileall

        compileall.compile_dir(REPO / "acr_cli", quiet=1)


@pytest.fixture(autouse=True)
def acr_home(tmp_path, monkeypatch):
    """Each test runs with a fresh ACR_HOME and without scenario/config leaking in from outside.

    PYTEST_DISABLE_PLUGIN_AUTOLOAD: a check command that runs pytest (VERIFY) then loads no third-party
    plugin (xdist, anyio, timeout: none is needed by the test projects), which halves its start-up time.
    FAKE_AGENT_PYTHON: the fake agents run on this interpreter, not on whatever ``python3`` the PATH finds
    first (a version manager's shim starts dozens of processes per call).
    """
    home = tmp_path / "acr-home"
    monkeypatch.setenv("ACR_HOME", str(home))
    for var in ("ACR_MEMORY", "ACR_BENCH_DATA", "FAKE_AGENT_SCENARIO", "FAKE_AGENT_PIDFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("FAKE_AGENT_PYTHON", sys.executable)
    return home


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server of the test session's own (tests/pgserver.py). Without one here the tests that
    need it are skipped, unless ACR_REQUIRE_POSTGRES=1 (.ci/run) makes that a failure."""
    import pgserver

    why = pgserver.why_not()
    if why:
        if os.environ.get("ACR_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"ACR_REQUIRE_POSTGRES=1 and {why}")
        pytest.skip(why)
    server = pgserver.Server().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request) -> str:
    """The memory's database: a test taking it runs once on SQLite (default suite) and once on a real
    PostgreSQL server (``pytest -m postgres``)."""
    return request.param


@pytest.fixture
def memory_target(backend, tmp_path, request):
    """A function giving a new, empty memory's location on the test's backend: a file path, or a URL."""
    n = iter(range(1000))

    def make() -> str:
        if backend == "sqlite":
            return str(tmp_path / f"memory{next(n)}.sqlite")
        server = request.getfixturevalue("pg_server")
        return server.url(server.new_database())

    return make


@pytest.fixture
def new_memory(memory_target):
    """A function opening a new, empty memory on the test's backend (closed at the end of the test)."""
    from acr_cli.memory.store import Memory

    opened = []

    def make():
        opened.append(Memory.open(memory_target()))
        return opened[-1]

    yield make
    for m in opened:
        try:
            m.close()
        except Exception:
            pass


@pytest.fixture
def fakes_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return FAKES


def git(cwd: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True).stdout


def init_repo(p: Path, files: dict[str, str]) -> Path:
    """A git repository at ``p`` with ``files`` committed."""
    p.mkdir(parents=True, exist_ok=True)
    git(p, "init", "-q")
    git(p, "config", "user.email", "t@example.com")
    git(p, "config", "user.name", "t")
    for name, text in files.items():
        (p / name).write_text(text)
    git(p, "add", "-A")
    git(p, "commit", "-qm", "init")
    return p


@pytest.fixture
def project(tmp_path) -> Path:
    """A small git project whose test fails until add() is fixed."""
    return init_repo(tmp_path / "proj", {
        "calc.py": "def add(a, b):\n    return a * b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"})


VERIFY = f"{sys.executable} -m pytest -q -p no:cacheprovider"
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def scenario(tmp_path, monkeypatch):
    """Write a fake-agent scenario and point FAKE_AGENT_SCENARIO at it; returns (write, log path)."""
    path = tmp_path / "scenario.json"
    log = tmp_path / "calls.jsonl"

    def write(*rules: dict) -> Path:
        path.write_text(json.dumps({"log": str(log), "rules": list(rules)}))
        return log

    monkeypatch.setenv("FAKE_AGENT_SCENARIO", str(path))
    return write


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def acr(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Run the real ``acr`` entry point in a subprocess (as a user would)."""
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "acr_cli", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL if input is None else None,
                          input=input)
