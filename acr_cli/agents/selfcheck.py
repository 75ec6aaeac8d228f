"""Run a real agent CLI against a throw-away mock model API: does acr still understand it?

``sandbox()`` builds the environment (and config files) that point one CLI at
a local :class:`~acr_cli.agents.mockapi.MockServer` with a temporary HOME and
nothing else reachable: proxies to a dead local port catch any other host.
``check_agent()`` runs the CLI through acr's own adapter (argv, permissions,
parsing) on a tiny git project where the mock asks for one shell command, and
reports every field acr could not read. ``acr doctor --check`` and the
real-CLI tests (``pytest -m agents``) both use these.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli import agents, process
from acr_cli.agents.base import AgentResult
from acr_cli.agents.mockapi import MockServer, tool_call
from acr_cli.domain import Arm
from acr_cli.paths import Paths

DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: any host but 127.0.0.1 fails fast


def checkable() -> tuple[str, ...]:
    """The built-in agents with a self-check set-up (a model the mock answers for, its sandbox)."""
    from acr_cli.agents import registry

    return tuple(n for n in registry.NAMES if registry.agent(n).check_model)


def sandbox(agent: str, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
    """Environment for ``agent`` talking only to ``mock_url``; config files go under ``root``.
    ``plan``: signed in as a plan's subscriber where the CLI tells that from an API key (claude)."""
    home = root / "home"
    for sub in ("", ".config", ".local/share", ".cache", ".local/state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
        "HTTPS_PROXY": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY, "https_proxy": DEAD_PROXY, "http_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    return {**env, **agents.get(agent).sandbox_env(mock_url, root, plan=plan)}


@dataclass
class CheckResult:
    agent: str
    version: str | None
    ok: bool
    problems: list[str] = field(default_factory=list)
    seen: dict = field(default_factory=dict)  # what acr read from the output
    duration_s: float = 0.0


_COMMAND = "echo acr-check > acr-check.txt"  # the one shell command the mock asks the agent to run
_FINAL = "acr check done"  # the mock's final answer, which acr should read as the agent's text


def check_agent(agent: str, timeout: float = 120.0) -> CheckResult:
    """Run ``agent`` once through its adapter against the mock, on a throw-away git project; every field
    acr could not read, or effect that did not happen, is a problem."""
    adapter = agents.get(agent)
    if shutil.which(adapter.executable) is None:
        return CheckResult(agent, None, False, [f"`{adapter.executable}` is not installed"])
    version_run = process.run(adapter.version_argv(), cwd=Path.cwd(), timeout=30)
    version = ((version_run.stdout or version_run.stderr).strip().splitlines() or [None])[0]
    # under acr's cache, not the system's temp: codex makes no helper binaries in a home under the temp
    # directory, and where bubblewrap is installed its shell tool then fails ("execvp codex-linux-sandbox")
    cache = Paths.from_env().cache_dir
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="acr-check-", dir=cache) as tmp, \
            MockServer(script=[tool_call(_COMMAND, final=_FINAL)], lifetime=timeout + 30) as srv:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        init = process.short_call(["git", "init", "-q"], cwd=project)
        if not init.ok:
            return CheckResult(agent, version, False, [f"`git init` failed in a temporary directory: "
                                                       f"{init.stderr.strip()[-200:]}"])
        arm = Arm(agent, adapter.check_model or "")
        inv = adapter.invocation("Create the file acr-check.txt with the text acr-check.", arm, project,
                                 "workspace-write")
        env = process.child_env(project, {**sandbox(agent, srv.url, root), **inv.env})
        res = process.run(inv.argv, cwd=project, env=env, timeout=timeout, stdin_text=inv.stdin)
        parsed = adapter.parse(res.stdout, res.stderr, res.exit_code)
        turns = [r for r in srv.model_requests() if r["response"]["kind"] in ("tool_call", "final")]
        want = (srv.usage[0] * len(turns), srv.usage[1] * len(turns))
        seen = {"exit_code": res.exit_code, "tokens_in": parsed.tokens_in, "tokens_out": parsed.tokens_out,
                "cost_usd": parsed.cost_usd, "session_id": parsed.session_id, "text": parsed.text,
                "error": parsed.error, "failed": parsed.failed, "model_requests": len(turns)}
        problems = [*_outcome_problems(res, parsed, timeout), *_effect_problems(project, len(turns)),
                    *_reading_problems(parsed, want, adapter.reports_cost, agent)]
        return CheckResult(agent, version, not problems, problems, seen, res.duration_s)


def _outcome_problems(res: process.ProcessResult, parsed: AgentResult, timeout: float) -> list[str]:
    """How the run ended: hung, a non-zero exit, or an error or failure acr read from a run that worked."""
    problems = []
    if res.timed_out:
        problems.append(f"no result within {timeout:g}s (the CLI hung against the mock)")
    elif res.exit_code != 0:
        problems.append(f"exit code {res.exit_code}: {parsed.error or (res.stderr or '').strip()[-200:]}")
    if parsed.error:
        problems.append(f"error: acr read an error from a successful run: {parsed.error}")
    if parsed.failed:
        problems.append(f"failed: {parsed.failed}")
    return problems


def _effect_problems(project: Path, turns: int) -> list[str]:
    """Whether the tool call ran in the project and the CLI asked the model twice (the call, the answer)."""
    problems = []
    if not (project / "acr-check.txt").is_file():
        problems.append("the tool call did not run in the project (permissions or working directory changed?)")
    if turns < 2:
        problems.append(f"the CLI made {turns} model request(s), expected the tool call and the final turn")
    return problems


def _reading_problems(parsed: AgentResult, want: tuple[int, int], reports_cost: bool, agent: str) -> list[str]:
    """The fields acr should have read from the output: tokens as the mock counted them, the final text,
    a session id, a cost where the CLI reports one."""
    problems = []
    if parsed.tokens_in != want[0]:
        problems.append(f"tokens_in: the mock reported {want[0]}, acr read {parsed.tokens_in}")
    if parsed.tokens_out != want[1]:
        problems.append(f"tokens_out: the mock reported {want[1]}, acr read {parsed.tokens_out}")
    if parsed.text != _FINAL:
        problems.append(f"final text: expected {_FINAL!r}, acr read {parsed.text!r}")
    if not parsed.session_id:
        problems.append("session id: acr read none")
    if reports_cost and not parsed.cost_usd:
        problems.append(f"cost: {agent} reports its cost, acr read {parsed.cost_usd!r}")
    return problems
