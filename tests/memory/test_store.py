"""One memory interface (acr_cli.memory.interface.MemoryStore): a run gets one object from open_memory,
whether the memory is a file or a team's server, and never asks which."""

from __future__ import annotations

import socket

from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.memory.interface import MemoryStore
from acr_cli.memory.opening import open_memory
from acr_cli.memory.store import Memory
from acr_cli.paths import MemoryLocation

ARM = Arm("codex", "gpt-5.4")


def _record(mem: Memory) -> str:
    tid = mem.begin_task(source="live", kind="bug_fix", groups=["all", "kind=bug_fix"], prompt="fix add()")
    mem.add_attempt(tid, 1, Decision(ARM, "x"), Feedback(ARM, "passed", cost_usd=0.01))
    mem.finish_task(tid, passed=True, score=1.0, cost_usd=0.01, final_arm=ARM.id)
    return tid


def _closed_port() -> int:
    """A local port nothing listens on: a server that is away."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_file_is_a_store_that_records_reads_and_shares_nothing(tmp_path):
    store = open_memory(MemoryLocation(tmp_path / "memory.sqlite", source="--memory"))
    try:
        assert isinstance(store, MemoryStore)
        assert store.records is store and store.reads is store and store.note is None
        assert store.policy(lambda read: read) is store  # the policy is made on the file itself
        tid = _record(store.records)
        store.recorded(tid)  # nothing to queue
        assert store.finish() is None
    finally:
        store.close()


def test_a_teams_server_away_records_locally_queues_the_task_and_says_so(tmp_path):
    url = f"postgresql://alice:s3cret@127.0.0.1:{_closed_port()}/acr?connect_timeout=2"
    local = tmp_path / "local.sqlite"
    store = open_memory(MemoryLocation(None, url, "ACR_MEMORY"), team_copy=local)
    try:
        assert isinstance(store, MemoryStore)
        assert "routing from the local copy" in store.note and "s3cret" not in store.note
        assert store.reads is store.records and str(store.records.path) == str(local)
        made = []
        store.policy(lambda read: made.append(read) or read)
        assert made == [store.records]  # routing reads the local copy while the server is away
        tid = _record(store.records)
        store.recorded(tid)
        done = store.finish()
        assert done["routed_from"] == "local copy" and done["pending"] == 1 and done["uploaded"] == 0
        assert done["error"] and "s3cret" not in done["server"]
    finally:
        store.close()
    mem = Memory.open(local)
    try:
        assert [t["id"] for t in mem.tasks()] == [tid]  # kept here until the next sync sends it
    finally:
        mem.close()
