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

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli import agents, process
from acr_cli.agents.mockapi import MockServer, tool_call
from acr_cli.domain import Arm

# Model names the mock answers for: a known codex slug avoids a "model metadata" warning.
CHECK_MODELS = {"claude": "claude-sonnet-4-6", "codex": "gpt-5.5", "opencode": "mock/mock-model"}
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: any host but 127.0.0.1 fails fast


def sandbox(agent: str, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
    """Environment for ``agent`` talking only to ``mock_url``; config files go under ``root``.

    ``plan``: claude signs in as a claude.ai subscriber (a mock OAuth token in ``CLAUDE_CODE_OAUTH_TOKEN``)
    instead of with an API key: only then does it read a plan's limit headers (``anthropic-ratelimit-unified-*``)
    and report them (``rate_limit_event``). codex and opencode read their limits the same with an API key."""
    home = root / "home"
    for sub in ("", ".config", ".local/share", ".cache", ".local/state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
        "HTTPS_PROXY": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY, "https_proxy": DEAD_PROXY, "http_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    if agent == "claude":
        env.update({"CLAUDE_CODE_OAUTH_TOKEN": "acr-mock-oauth-token",
                    "CLAUDE_CODE_OAUTH_SCOPES": "user:inference user:profile"} if plan else
                   {"ANTHROPIC_API_KEY": "acr-mock-key"})
        env.update({"ANTHROPIC_BASE_URL": mock_url,
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_MAX_RETRIES": "0", "API_TIMEOUT_MS": "60000"})
    elif agent == "codex":
        codex_home = root / "codex-home"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            f'model = "{CHECK_MODELS["codex"]}"\nmodel_provider = "mock"\napproval_policy = "never"\n'
            'sandbox_mode = "workspace-write"\ncheck_for_update_on_startup = false\n\n'
            "[analytics]\nenabled = false\n\n"
            "[features]\nplugins = false\nremote_plugin = false\napps = false\nin_app_updates = false\n\n"
            f'[model_providers.mock]\nname = "mock"\nbase_url = "{mock_url}/v1"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\nstream_idle_timeout_ms = 60000\n")
        env["CODEX_HOME"] = str(codex_home)
    elif agent == "opencode":
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "mock",
                                  "options": {"baseURL": f"{mock_url}/v1", "apiKey": "acr-mock-key",
                                              "timeout": 60000},
                                  "models": {"mock-model": {"name": "mock-model",
                                                            "cost": {"input": 3, "output": 15}}}}},
            "model": CHECK_MODELS["opencode"],
            "autoupdate": False,
            "share": "disabled",
        }
        path = root / "opencode.json"
        path.write_text(json.dumps(config, indent=2))
        env.update({"OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_AUTOUPDATE": "1",
                    "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                    "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
                    "OPENCODE_DISABLE_CLAUDE_CODE": "1", "npm_config_registry": f"{mock_url}/npm/"})
    return env


@dataclass
class CheckResult:
    agent: str
    version: str | None
    ok: bool
    problems: list[str] = field(default_factory=list)
    seen: dict = field(default_factory=dict)  # what acr read from the output
    duration_s: float = 0.0


def check_agent(agent: str, timeout: float = 120.0) -> CheckResult:
    adapter = agents.get(agent)
    if shutil.which(adapter.executable) is None:
        return CheckResult(agent, None, False, [f"`{adapter.executable}` is not installed"])
    version_run = process.run(adapter.version_argv(), cwd=Path.cwd(), timeout=30)
    version = ((version_run.stdout or version_run.stderr).strip().splitlines() or [None])[0]
    command, final = "echo acr-check > acr-check.txt", "acr check done"
    with tempfile.TemporaryDirectory(prefix="acr-check-") as tmp, \
            MockServer(script=[tool_call(command, final=final)], lifetime=timeout + 30) as srv:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=project, check=True, stdin=subprocess.DEVNULL)
        arm = Arm(agent, CHECK_MODELS[agent])
        inv = adapter.invocation("Create the file acr-check.txt with the text acr-check.", arm, project,
                                 "workspace-write")
        env = process.child_env(project, {**sandbox(agent, srv.url, root), **inv.env})
        res = process.run(inv.argv, cwd=project, env=env, timeout=timeout, stdin_text=inv.stdin)
        parsed = adapter.parse(res.stdout, res.stderr, res.exit_code)
        turns = [r for r in srv.model_requests() if r["response"]["kind"] in ("tool_call", "final")]
        want_in, want_out = srv.usage[0] * len(turns), srv.usage[1] * len(turns)
        seen = {"exit_code": res.exit_code, "tokens_in": parsed.tokens_in, "tokens_out": parsed.tokens_out,
                "cost_usd": parsed.cost_usd, "session_id": parsed.session_id, "text": parsed.text,
                "error": parsed.error, "failed": parsed.failed, "model_requests": len(turns)}
        problems = []
        if res.timed_out:
            problems.append(f"no result within {timeout:g}s (the CLI hung against the mock)")
        elif res.exit_code != 0:
            problems.append(f"exit code {res.exit_code}: {parsed.error or (res.stderr or '').strip()[-200:]}")
        if parsed.error:
            problems.append(f"error: acr read an error from a successful run: {parsed.error}")
        if parsed.failed:
            problems.append(f"failed: {parsed.failed}")
        if not (project / "acr-check.txt").is_file():
            problems.append("the tool call did not run in the project (permissions or working directory changed?)")
        if len(turns) < 2:
            problems.append(f"the CLI made {len(turns)} model request(s), expected the tool call and the final turn")
        if parsed.tokens_in != want_in:
            problems.append(f"tokens_in: the mock reported {want_in}, acr read {parsed.tokens_in}")
        if parsed.tokens_out != want_out:
            problems.append(f"tokens_out: the mock reported {want_out}, acr read {parsed.tokens_out}")
        if parsed.text != final:
            problems.append(f"final text: expected {final!r}, acr read {parsed.text!r}")
        if not parsed.session_id:
            problems.append("session id: acr read none")
        if agent in ("claude", "opencode") and not parsed.cost_usd:
            problems.append(f"cost: {agent} reports its cost, acr read {parsed.cost_usd!r}")
        return CheckResult(agent, version, not problems, problems, seen, res.duration_s)
