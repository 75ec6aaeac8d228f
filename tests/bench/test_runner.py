"""`acr bench replay` as a library call: it prints nothing; progress and notices reach the caller."""

from __future__ import annotations

from benchdata import write_ood

from acr_cli.bench.runner import ReplayRequest, run_replays

CELLS = {f"t{i}": {"cheap": (i % 2, 1, 0.01), "mid": (1, 1, 0.20), "premium": (1, 1, 1.00)} for i in range(6)}


def test_a_replay_reports_progress_through_its_callback_and_prints_nothing(tmp_path, capsys):
    d = write_ood(tmp_path / "data", CELLS)
    seen: list[tuple[str, int, int]] = []
    doc = run_replays(ReplayRequest("ood176", ["learned", "random"], data_dir=d, orders=2),
                      on_progress=lambda label, done, total: seen.append((label, done, total)),
                      on_notice=lambda message: seen.append(("notice", 0, 0)))
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert [r["policy"] for r in doc["results"]] == ["learned", "random"]
    total = 2 * 2 * len(CELLS)  # policies x orders x tasks
    assert {t for _, _, t in seen} == {total} and seen[-1][1] == total
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)  # only forward
    assert {label for label, _, _ in seen} == {"learned", "random"}  # no notice: the data was given


def test_the_replay_command_leaves_a_host_programs_signal_handlers_and_threads_alone(tmp_path):
    # acr's CLI run inside another program (Typer's runner, a notebook, a worker thread)
    import signal
    import threading

    from typer.testing import CliRunner

    from acr_cli.cli.app import app

    d = write_ood(tmp_path / "data", CELLS)
    args = ["bench", "replay", "ood176", "-P", "learned", "--data-dir", str(d), "--json"]

    def host(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, host)
    try:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert signal.getsignal(signal.SIGTERM) is host and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, old)
    codes = []
    worker = threading.Thread(target=lambda: codes.append(CliRunner().invoke(app, args).exit_code))
    worker.start()
    worker.join()
    assert codes == [0]
