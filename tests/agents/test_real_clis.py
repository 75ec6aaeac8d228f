"""acr against the real claude, codex and opencode binaries, each talking to a local mock model API.

Marked `agents` (not in the default run): `pytest -m agents`. The CLIs come from npm
(see docs/development.md); when they are not on PATH these tests skip with the reason, except in CI
(CI=true or ACR_REQUIRE_AGENTS=1) where a missing CLI fails the run. Every CLI gets a
temporary HOME and config pointing only at 127.0.0.1; proxies to a dead local port
catch any attempt to reach another host.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import FAKES, acr, init_repo

from acr_cli.agents.mockapi import MockServer, http_error, plan_limit, stall, tool_call
from acr_cli.agents.selfcheck import sandbox

pytestmark = pytest.mark.agents
AGENTS = ("claude", "codex", "opencode")
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ACR_REQUIRE_AGENTS") == "1"
# Arms as the tests name them: codex uses a profile arm so acr prices its tokens.
ARM = {"claude": "claude:claude-sonnet-4-6", "codex": "codex:gpt-5.4", "opencode": "opencode:mock/mock-model"}
VERIFY = f"{sys.executable} -c \"import sys; sys.exit(0 if open('out.txt').read().strip() == 'good' else 1)\""


@pytest.fixture(scope="module", autouse=True)
def real_clis():
    found = {a: shutil.which(a) for a in AGENTS}
    missing = [a for a, p in found.items() if p is None or Path(p).resolve().parent == FAKES.resolve()]
    if missing:
        msg = (f"real agent CLIs not on PATH: {', '.join(missing)} (npm install --prefix ~/.cache/acr-ci-agents "
               "@anthropic-ai/claude-code @openai/codex opencode-ai, then put its node_modules/.bin on PATH)")
        if REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)
    return found


@pytest.fixture
def project(tmp_path) -> Path:
    return init_repo(tmp_path / "repo", {"app.py": "print('hello')\n", "out.txt": "initial\n"})


class Mocks:
    """One mock API per agent, and the environment pointing each CLI at its own."""

    def __init__(self, root: Path, scripts: dict[str, list], plan: tuple[str, ...] = ()):
        self.root, self.plan = root, plan
        self.servers = {a: MockServer(script=s, lifetime=600, log_path=str(root / f"{a}-requests.jsonl"))
                        for a, s in scripts.items()}
        self.env: dict[str, str] = {}

    def __enter__(self) -> "Mocks":
        for agent, srv in self.servers.items():
            srv.start()
            self.env.update(sandbox(agent, srv.url, self.root, plan=agent in self.plan))
        return self

    def __exit__(self, *exc) -> None:
        for srv in self.servers.values():
            srv.stop()


def run(project: Path, mocks: Mocks, prompt: str, arms: list[str], *extra: str, timeout: float = 300) -> dict:
    r = acr("run", "--arms", ",".join(arms), "--verify", VERIFY, "--json", "--timeout", "90", *extra, "--", prompt,
            cwd=project, env=mocks.env, timeout=timeout)
    assert r.stdout, f"acr printed nothing (exit {r.returncode}): {r.stderr}"
    out = json.loads(r.stdout)
    out["exit_code"] = r.returncode
    out["stderr"] = r.stderr
    return out


def turns(srv: MockServer) -> int:
    return len([q for q in srv.model_requests() if q["response"]["kind"] in ("tool_call", "final", "text")])


@pytest.mark.parametrize("agent", AGENTS)
def test_each_cli_alone_passes_with_real_tokens_and_cost(agent, project, tmp_path):
    with Mocks(tmp_path, {agent: [tool_call("echo good > out.txt", final="done")]}) as m:
        out = run(project, m, "write good into out.txt", [ARM[agent]])
        srv = m.servers[agent]
        assert out["exit_code"] == 0, out["stderr"]
        att = out["attempts"][0]
        assert att["verdict"] == "passed", att
        n = turns(srv)
        assert n == 2, f"{agent}: expected the tool-call turn and the final turn, got {n}"
        assert (att["tokens_in"], att["tokens_out"]) == (srv.usage[0] * n, srv.usage[1] * n), \
            f"{agent}: token fields (tokens_in/tokens_out) not read from the CLI's output"
        if agent == "codex":
            assert att["cost_source"] == "priced"
            assert att["cost_usd"] == pytest.approx((att["tokens_in"] * 2.5 + att["tokens_out"] * 15) / 1e6)
        else:
            assert att["cost_source"] == "reported" and att["cost_usd"] > 0, f"{agent}: cost field not read"
    logged = json.loads(acr("memory", "log", "--json").stdout)["tasks"][0]["attempts"][0]
    assert (logged["tokens_in"], logged["tokens_out"], logged["cost_usd"]) == \
        (att["tokens_in"], att["tokens_out"], pytest.approx(att["cost_usd"]))
    assert (project / "out.txt").read_text().strip() == "good"


def test_escalation_rolls_back_the_first_agent_and_keeps_user_work(project, tmp_path):
    (project / "app.py").write_text("print('my uncommitted edit')\n")
    (project / "notes.txt").write_text("my untracked notes\n")
    before = {p: (project / p).read_bytes() for p in ("app.py", "notes.txt")}
    scripts = {"codex": [tool_call("echo bad > out.txt && echo junk > stray.txt", final="done")],
               "claude": [tool_call("echo good > out.txt", final="fixed")]}
    with Mocks(tmp_path, scripts) as m:
        out = run(project, m, "make out.txt say good", [ARM["codex"], ARM["claude"]])
        assert out["exit_code"] == 0, out["stderr"]
        assert [a["verdict"] for a in out["attempts"]] == ["failed", "passed"]
        # claude was told why codex's attempt failed
        first_claude = next(q for q in m.servers["claude"].requests if q["path"].endswith("/messages"))
        assert "did not succeed" in json.dumps(first_claude["body"])
    assert not (project / "stray.txt").exists()
    assert (project / "out.txt").read_text().strip() == "good"
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p


@pytest.mark.parametrize("status, first, second", [(500, "claude", "codex"), (401, "codex", "claude")])
def test_api_error_is_recorded_and_the_next_arm_passes(status, first, second, project, tmp_path):
    scripts = {first: [http_error(status)], second: [tool_call("echo good > out.txt", final="done")]}
    with Mocks(tmp_path, scripts) as m:
        out = run(project, m, "write good into out.txt", [ARM[first], ARM[second]])
    assert out["exit_code"] == 0, out["stderr"]
    assert [a["verdict"] for a in out["attempts"]] == ["error", "passed"]
    assert out["attempts"][0]["agent"] == first


def _processes_using(home: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"HOME={home}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("agent", ["opencode", "claude"])
def test_stalled_stream_ends_by_timeout_and_leaves_no_process(agent, project, tmp_path):
    other = "codex"
    scripts = {agent: [stall()], other: [tool_call("echo good > out.txt", final="done")]}
    with Mocks(tmp_path, scripts) as m:
        start = time.monotonic()
        out = run(project, m, "write good into out.txt", [ARM[agent], ARM[other]], "--timeout", "15")
        took = time.monotonic() - start
    assert out["exit_code"] == 0, out["stderr"]
    assert [a["verdict"] for a in out["attempts"]] == ["timeout", "passed"]
    assert took < 90
    time.sleep(0.5)
    assert _processes_using(tmp_path / "home") == []


@pytest.mark.parametrize("agent", AGENTS)
def test_prompt_reaches_the_model_verbatim_and_no_shell_runs_it(agent, project, tmp_path):
    canary = tmp_path / "canary"
    prompt = (f"write \"good\" into 'out.txt' $(touch {canary}) `touch {canary}`; touch {canary} && echo x\n"
              f"second line\twith a tab and $HOME")
    with Mocks(tmp_path, {agent: [tool_call("echo good > out.txt", final="done")]}) as m:
        out = run(project, m, prompt, [ARM[agent]])
        bodies = [json.dumps(q["body"]) for q in m.servers[agent].model_requests()]
    assert out["exit_code"] == 0, out["stderr"]
    encoded = json.dumps(prompt)[1:-1]  # the prompt as it appears inside a JSON string
    assert any(encoded in b for b in bodies), f"{agent}: the prompt did not reach the model verbatim"
    assert not canary.exists()


@pytest.mark.parametrize("agent", AGENTS)
def test_a_prompt_too_long_for_one_argument_reaches_the_model(agent, project, tmp_path):
    prompt = "write \"good\" into out.txt; the failing log follows" + "\nE   assert 'initial' == 'good'" * 5_000
    (tmp_path / "prompt.txt").write_text(prompt)  # ~170 KB: over Linux's 128 KiB limit for one argument
    with Mocks(tmp_path, {agent: [tool_call("echo good > out.txt", final="done")]}) as m:
        r = acr("run", "--arms", ARM[agent], "--verify", VERIFY, "--json", "--timeout", "90",
                "--prompt-file", str(tmp_path / "prompt.txt"), cwd=project, env=m.env, timeout=300)
        bodies = [json.dumps(q["body"]) for q in m.servers[agent].model_requests()]
    assert r.returncode == 0, r.stderr
    assert any(json.dumps(prompt)[1:-1] in b for b in bodies), f"{agent}: the prompt did not reach the model whole"


def test_doctor_check_understands_every_installed_cli():
    r = acr("doctor", "--check", "--json", timeout=600)
    report = json.loads(r.stdout)
    # every check passed: exit 0, whether or not an arm of the profile is logged in (here none need be)
    assert r.returncode == 0 and report["problems"] == [], r.stdout + r.stderr
    checks = {c["agent"]: c for c in report["checks"]}
    assert set(checks) == set(AGENTS)
    for agent, c in checks.items():
        assert c["ok"], f"{agent} {c['version']}: {c['problems']}"
    human = acr("doctor", "--check", timeout=600)
    assert human.returncode == 0 and human.stdout.strip().splitlines()[-1].startswith(
        "check passed: acr understood all 3 CLI(s) (exit 0"), human.stdout


def test_opencode_session_files_give_an_interactive_sessions_tokens(project, tmp_path, monkeypatch):
    """What `acr run --interactive` reads after an opencode session (session list + export) is what the run used."""
    from acr_cli import agents

    with Mocks(tmp_path, {"opencode": [tool_call("echo good > out.txt", final="done")]}) as m:
        since = time.time() - 1
        out = run(project, m, "write good into out.txt", [ARM["opencode"]])
        att = out["attempts"][0]
        assert att["verdict"] == "passed", att
        for key, value in m.env.items():  # the CLI's own data lives in the sandbox HOME
            monkeypatch.setenv(key, value)
        assert agents.get("opencode").session_usage(project, since) == (att["tokens_in"], att["tokens_out"])
        assert agents.get("opencode").session_usage(project, time.time() + 60) is None


# A plan's usage limit, answered by the mock as each provider does (mockapi.limit_response): the limited CLI's two
# arms (one login), then another CLI's arm that passes.
LIMITED = {"claude": ("claude:claude-sonnet-4-6", "claude:claude-opus-4-6", "codex"),
           "codex": ("codex:gpt-5.4", "codex:gpt-5.5", "claude"),
           "opencode": ("opencode:mock/mock-model", "opencode:mock/other-model", "codex")}


def _utc(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("agent", AGENTS)
def test_a_plans_usage_limit_through_the_real_cli_holds_its_login_until_the_reset(agent, project, tmp_path,
                                                                                  monkeypatch):
    """claude (signed in to a plan) prints a rejected rate_limit_event with the reset; codex "try again at 3:04 PM"
    (the minute, local time); opencode retries silently, its log (stderr) names the reset in UTC+8."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # claude signs in with the plan's (mock) token
    first, second, other = LIMITED[agent]
    arms = [first, second, ARM[other]]
    profile = tmp_path / "limits.yaml"  # the watchdog's silence bound lowered: a backstop, not what ends opencode
    profile.write_text("extends: balanced\nsettings: {model_silence: 30}\narms:\n"
                       + "".join(f"  - {{agent: {a.split(':', 1)[0]}, model: {a.split(':', 1)[1]}}}\n" for a in arms))
    reset = int(time.time()) + 3 * 3600 + 1234
    scripts = {agent: [plan_limit(reset)], other: [tool_call("echo good > out.txt", final="done")]}
    with Mocks(tmp_path, scripts, plan=("claude",)) as m:
        started = time.monotonic()
        out = run(project, m, "write good into out.txt", arms, "--profile", str(profile),
                  "--policy", "cascade:" + ",".join(arms))
        took = time.monotonic() - started
        limited = [q for q in m.servers[agent].model_requests() if q["response"]["kind"] == "limit"]
        doctor = json.loads(acr("doctor", "--json", "--profile", str(profile), cwd=project, env=m.env).stdout)
    assert out["exit_code"] == 0, out["stderr"]
    assert limited, f"{agent} never asked the mock"
    assert [(a["agent"], a["verdict"], a["problem"]) for a in out["attempts"]] == [
        (agent, "error", "limit"), (other, "passed", None)], out["attempts"]
    held = _utc(out["attempts"][0]["held_until"])
    assert reset - 60 < held <= reset, f"{agent}: held until {out['attempts'][0]['held_until']}, reset {reset}"
    assert [s["model"] for s in out["skipped"]] == [second.split(":", 1)[1]]  # same login: not tried
    assert took < 120, f"{agent}: the limit took {took:.0f}s to fall through"
    health = {a["model"]: a["health"] for a in doctor["profile"]["arms"] if a["agent"] == agent}
    assert set(health) == {first.split(":", 1)[1], second.split(":", 1)[1]}
    assert all(h["state"] == "held" and _utc(h["until"]) == held for h in health.values()), health


@pytest.mark.parametrize("lanes", ["overlay", "worktree"])
def test_the_three_clis_race_in_lanes_and_the_winners_change_lands(lanes, project, tmp_path):
    """The real CLIs run side by side in race lanes (codex's own sandbox inside acr's namespace, for overlays);
    one's change lands on the user's uncommitted work, the lanes are gone."""
    from acr_cli.workspace import overlay

    if lanes == "overlay" and overlay.probe() is not None:
        pytest.skip(f"overlay lanes cannot start here: {overlay.probe()}")
    (project / "app.py").write_text("print('my uncommitted edit')\n")
    assert acr("config", "set", "race_lanes", lanes, cwd=project).returncode == 0
    scripts = {a: [tool_call("echo good > out.txt", final="done")] for a in AGENTS}
    with Mocks(tmp_path, scripts) as m:
        out = run(project, m, "write good into out.txt", [ARM[a] for a in AGENTS], "--race", "3")
    assert out["exit_code"] == 0, out["stderr"]
    assert out["race"]["winner"] is not None and sorted(out["race"]["attempts"]) == [1, 2, 3]
    assert {a["agent"] for a in out["attempts"]} == set(AGENTS)
    said = " ".join(out["stderr"].split())
    assert ("copy-on-write overlay" if lanes == "overlay" else "its own worktree") in said, said
    assert {a["verdict"] for a in out["attempts"]} <= {"passed", "cancelled"}, out["attempts"]
    assert (project / "out.txt").read_text().strip() == "good"
    assert (project / "app.py").read_text() == "print('my uncommitted edit')\n"
    lanes_left = [p for p in Path(os.environ["ACR_HOME"]).rglob("acr-race-*")] if "ACR_HOME" in os.environ else []
    assert lanes_left == []
