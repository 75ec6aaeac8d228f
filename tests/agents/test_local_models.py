"""The local-models recipe (docs/local-models.md), as written: an opencode provider and codex arms pointed at a local
OpenAI-compatible server, with acr's mock API standing in for that server.

The first tests run in the default suite with the fake CLIs: a local arm routes, runs, costs $0 and is
never held as not logged in. The `agents` tests run the real codex and opencode with the same snippets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FAKES, REPO, acr, init_repo

from acr_cli.agents.mockapi import MockServer, tool_call
from acr_cli.agents.selfcheck import sandbox

RECIPE = REPO / "docs" / "local-models.md"
RECIPE_URL = "http://127.0.0.1:11434"  # the server address the recipe's snippets name
VERIFY = f"{sys.executable} -c \"import sys; sys.exit(0 if open('out.txt').read().strip() == 'good' else 1)\""
LOCAL_ARMS = ("opencode:local/qwen2.5-coder", "codex:qwen2.5-coder")


def recipe() -> tuple[str, str]:
    """(opencode.json, profile YAML): the two code blocks of docs/local-models.md."""
    section = RECIPE.read_text(encoding="utf-8")
    blocks = dict(re.findall(r"```(json|yaml)\n(.*?)```", section, re.S))
    return blocks["json"], blocks["yaml"]


def set_up(tmp_path: Path, url: str, extra_arms: str = "") -> tuple[dict[str, str], Path]:
    """The recipe's opencode.json in a fresh HOME's ``~/.config/opencode``, its profile arms (plus
    ``extra_arms``) in a profile file, both with ``url`` for the server; returns (environment, profile)."""
    opencode_json, profile_yaml = recipe()
    home = tmp_path / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(opencode_json.replace(RECIPE_URL, url))
    profile = tmp_path / "local.yaml"
    profile.write_text(profile_yaml.replace(RECIPE_URL, url) + extra_arms)
    (tmp_path / "codex-home").mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "CODEX_HOME": str(tmp_path / "codex-home")}
    return env, profile


def test_the_recipe_is_a_valid_profile_of_two_priced_arms(tmp_path):
    _, profile = set_up(tmp_path, RECIPE_URL)
    r = acr("profiles", "show", str(profile), "--json")
    assert r.returncode == 0, r.stderr
    arms = {a["id"] if "id" in a else f"{a['agent']}:{a['model']}": a for a in json.loads(r.stdout)["arms"]}
    assert set(arms) == set(LOCAL_ARMS)
    assert "no price" not in acr("profiles", "validate", str(profile)).stderr


@pytest.fixture
def fake_world(tmp_path, fakes_on_path):
    """The fake CLIs, none logged in anywhere; a listening server at the recipe's URL (the mock API);
    a project whose check fails until out.txt says good; a scenario in which every agent fixes it."""
    project = init_repo(tmp_path / "repo", {"out.txt": "initial\n"})
    log = tmp_path / "calls.jsonl"
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"log": str(log), "rules": [
        {"match": {"agent": "codex"}, "write": {"out.txt": "good\n"}, "tokens": [12000, 800], "text": "fixed"},
        {"match": {"agent": "opencode"}, "write": {"out.txt": "good\n"}, "tokens": [9000, 500], "cost": 0,
         "text": "fixed"}]}))
    with MockServer(script=[tool_call("true")], lifetime=300) as srv:
        env, profile = set_up(tmp_path, srv.url, "  - agent: codex\n    model: gpt-5.4\n")
        env.update({"FAKE_AGENT_SCENARIO": str(scenario), "FAKE_AGENT_LOGGED_OUT": "claude,codex,opencode",
                    "FAKE_AGENT_OPENCODE_PROVIDERS": "", "FAKE_AGENT_STATUS_LOG": str(tmp_path / "status.jsonl")})
        yield {"project": project, "env": env, "profile": profile, "log": log, "url": srv.url,
               "status_log": tmp_path / "status.jsonl"}


def test_a_local_arm_is_ready_without_a_login_and_doctor_names_its_endpoint(fake_world):
    w = fake_world
    r = acr("doctor", "--profile", str(w["profile"]), "--json", cwd=w["project"], env=w["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    arms = {a["arm"]: a for a in json.loads(r.stdout)["profile"]["arms"]}
    for arm in LOCAL_ARMS:
        assert arms[arm]["state"] == "ready", arms[arm]
        assert f"at {w['url']}/v1, a local server (no login needed)" in arms[arm]["reason"]
    assert arms["codex:qwen2.5-coder"]["scope"] == "codex:local"
    assert arms["codex:gpt-5.4"]["state"] == "not_ready"  # the OpenAI login is missing: that arm alone
    statuses = [json.loads(x)["argv"] for x in w["status_log"].read_text().splitlines()]
    assert statuses == [["login", "status"]], statuses  # asked for codex:gpt-5.4 only; never for a local arm


def test_a_local_arm_runs_and_costs_0_although_codex_is_not_logged_in(fake_world):
    w = fake_world
    # doctor first: it records codex as not logged in, which `acr run` then reads from its cache
    acr("doctor", "--profile", str(w["profile"]), cwd=w["project"], env=w["env"])
    for arm in LOCAL_ARMS:
        r = acr("run", "--profile", str(w["profile"]), "--arms", arm, "--verify", VERIFY, "--json", "--",
                "make out.txt say good", cwd=w["project"], env=w["env"])
        assert r.returncode == 0, r.stdout + r.stderr
        att = json.loads(r.stdout)["attempts"][0]
        assert (att["verdict"], att["cost_usd"], att["cost_source"]) == ("passed", 0.0, "priced"), att
        assert att["tokens_in"] > 0
        (w["project"] / "out.txt").write_text("initial\n")
    calls = [json.loads(x) for x in w["log"].read_text().splitlines()]
    codex_argv = next(c["argv"] for c in calls if c["agent"] == "codex")
    assert f"model_providers.local.base_url={w['url']}/v1" in codex_argv and "model_provider=local" in codex_argv
    assert sorted(c["model"] for c in calls) == ["local/qwen2.5-coder", "qwen2.5-coder"]
    spent = json.loads(acr("memory", "log", "--json", env=w["env"]).stdout)["tasks"]
    assert [t["attempts"][0]["cost_usd"] for t in spent] == [0.0, 0.0]


def test_the_openai_codex_login_failing_does_not_hold_the_local_codex_arm(fake_world, tmp_path):
    """A run on codex:gpt-5.4 that ends "not logged in" sets codex's OpenAI login aside; the local arm's
    credential scope is its own, so the next run still tries it."""
    w = fake_world
    scenario = json.loads(Path(w["env"]["FAKE_AGENT_SCENARIO"]).read_text())
    scenario["rules"].insert(0, {"match": {"agent": "codex", "model": "gpt-5.4"}, "error": "login"})
    Path(w["env"]["FAKE_AGENT_SCENARIO"]).write_text(json.dumps(scenario))
    r = acr("run", "--profile", str(w["profile"]), "--arms", "codex:gpt-5.4", "--verify", VERIFY, "--json", "--",
            "make out.txt say good", cwd=w["project"], env=w["env"])
    assert r.returncode != 0 and json.loads(r.stdout)["attempts"][0]["verdict"] == "error"
    r = acr("run", "--profile", str(w["profile"]), "--arms", "codex:qwen2.5-coder,codex:gpt-5.4", "--verify", VERIFY,
            "--json", "--", "make out.txt say good", cwd=w["project"], env=w["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert [a["arm"] if "arm" in a else f"{a['agent']}:{a['model']}" for a in json.loads(r.stdout)["attempts"]] \
        == ["codex:qwen2.5-coder"]


def test_route_plans_a_local_arm_at_0_and_claude_s_own_price_table_does_not_cost_it(fake_world):
    """Priced {0, 0}: the plan's expected cost is $0 before anything is observed, and a CLI that reports a
    cost from its own price table (claude prices a model it does not know like its default one) does not
    make it cost anything."""
    w = fake_world
    with w["profile"].open("a") as f:
        f.write("  - agent: claude\n    model: qwen2.5-coder\n    price: {input: 0, output: 0}\n")
    r = acr("route", "make out.txt say good", "--profile", str(w["profile"]), "--json", cwd=w["project"], env=w["env"])
    plan = {f"{a['agent']}:{a['model']}": a for a in json.loads(r.stdout)["order"]}
    assert [plan[a]["expected_cost"] for a in (*LOCAL_ARMS, "claude:qwen2.5-coder")] == [0.0, 0.0, 0.0]
    assert plan["codex:gpt-5.4"]["expected_cost"] is None  # no price anywhere: unknown, not $0
    scenario = json.loads(Path(w["env"]["FAKE_AGENT_SCENARIO"]).read_text())
    scenario["rules"].append({"match": {"agent": "claude"}, "write": {"out.txt": "good\n"}, "cost": 0.0151})
    Path(w["env"]["FAKE_AGENT_SCENARIO"]).write_text(json.dumps(scenario))
    env = {**w["env"], "ANTHROPIC_API_KEY": "local"}
    r = acr("run", "--profile", str(w["profile"]), "--arms", "claude:qwen2.5-coder", "--verify", VERIFY, "--json",
            "--", "make out.txt say good", cwd=w["project"], env=env)
    att = json.loads(r.stdout)["attempts"][0]
    assert (att["verdict"], att["cost_usd"], att["cost_source"]) == ("passed", 0.0, "priced"), att


def test_a_local_arm_whose_server_is_not_running_is_skipped_not_waited_for(tmp_path, fakes_on_path):
    """Nothing listens at the endpoint (port 9): the real CLIs would retry until acr's timeout (20 minutes by
    default). acr refuses before the baseline check, names each arm with what to do, and runs no agent."""
    project = init_repo(tmp_path / "repo", {"out.txt": "initial\n"})
    log = tmp_path / "calls.jsonl"
    (tmp_path / "scenario.json").write_text(json.dumps({"log": str(log), "rules": []}))
    env, profile = set_up(tmp_path, "http://127.0.0.1:9")
    env["FAKE_AGENT_SCENARIO"] = str(tmp_path / "scenario.json")
    r = acr("run", "--profile", str(profile), "--verify", VERIFY, "--", "make out.txt say good", cwd=project, env=env)
    assert r.returncode == 2 and "no agent was run" in r.stderr, r.stderr
    for arm in LOCAL_ARMS:
        assert f"{arm}: nothing answers at http://127.0.0.1:9/v1: start its server" in r.stderr
    assert not log.exists()
    doctor = json.loads(acr("doctor", "--profile", str(profile), "--json", cwd=project, env=env).stdout)
    assert {a["state"] for a in doctor["profile"]["arms"]} == {"unknown"}  # not "not logged in"


# --------------------------------------------------------------------------- the real CLIs


def _real(agent: str) -> str:
    found = shutil.which(agent)
    if found is None or Path(found).resolve().parent == FAKES.resolve():
        msg = f"the real {agent} is not on PATH (see tests/agents/test_real_clis.py)"
        if os.environ.get("CI") == "true" or os.environ.get("ACR_REQUIRE_AGENTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return found


@pytest.mark.agents
@pytest.mark.parametrize("arm", LOCAL_ARMS)
def test_the_real_cli_runs_the_recipe_against_a_local_server(arm, tmp_path):
    agent = arm.split(":")[0]
    _real(agent)
    project = init_repo(tmp_path / "repo", {"out.txt": "initial\n"})
    with MockServer(script=[tool_call("echo good > out.txt", final="done")], lifetime=600) as srv:
        env, profile = set_up(tmp_path, srv.url)
        # the sandbox's offline settings (no proxy but the dead one, no update checks); not its mock configuration
        offline = {k: v for k, v in sandbox("opencode", srv.url, tmp_path / "sandbox").items()
                   if k not in ("OPENCODE_CONFIG", "HOME") and not k.startswith("XDG_")}
        env.update(offline)
        doctor = acr("doctor", "--profile", str(profile), "--json", cwd=project, env=env, timeout=300)
        state = {a["arm"]: a for a in json.loads(doctor.stdout)["profile"]["arms"]}[arm]
        assert state["state"] == "ready" and srv.url in state["reason"], state
        r = acr("run", "--profile", str(profile), "--arms", arm, "--verify", VERIFY, "--json", "--timeout", "120",
                "--", "write good into out.txt", cwd=project, env=env, timeout=300)
        bodies = [q["body"] for q in srv.model_requests()]
    assert r.returncode == 0, r.stdout + r.stderr
    att = json.loads(r.stdout)["attempts"][0]
    assert (att["verdict"], att["cost_usd"], att["cost_source"]) == ("passed", 0.0, "priced"), att
    assert len(bodies) >= 2 and all(b.get("model") == "qwen2.5-coder" for b in bodies), bodies
    assert (project / "out.txt").read_text().strip() == "good"


@pytest.mark.agents
def test_the_real_claude_runs_with_the_recipe_s_base_url_at_0(tmp_path):
    """claude has no per-arm endpoint: the recipe's two variables in acr's environment; the arm priced $0."""
    _real("claude")
    section = RECIPE.read_text(encoding="utf-8")
    recipe_env = dict(re.findall(r"`(ANTHROPIC_BASE_URL|ANTHROPIC_API_KEY)=([^`\s]+)`", section))
    assert recipe_env["ANTHROPIC_BASE_URL"] == RECIPE_URL
    project = init_repo(tmp_path / "repo", {"out.txt": "initial\n"})
    profile = tmp_path / "claude-local.yaml"
    profile.write_text("arms:\n  - agent: claude\n    model: qwen2.5-coder\n    price: {input: 0, output: 0}\n")
    with MockServer(script=[tool_call("echo good > out.txt", final="done")], lifetime=600) as srv:
        env = sandbox("claude", srv.url, tmp_path / "sandbox")  # offline settings, a HOME of its own
        env.update({k: v.replace(RECIPE_URL, srv.url) for k, v in recipe_env.items()})
        r = acr("run", "--profile", str(profile), "--arms", "claude:qwen2.5-coder", "--verify", VERIFY, "--json",
                "--timeout", "120", "--", "write good into out.txt", cwd=project, env=env, timeout=300)
        bodies = [q["body"] for q in srv.model_requests()]
    assert r.returncode == 0, r.stdout + r.stderr
    att = json.loads(r.stdout)["attempts"][0]
    # claude itself reports about $0.015 for these tokens (its default price): the arm's $0 wins
    assert (att["verdict"], att["cost_usd"], att["cost_source"]) == ("passed", 0.0, "priced"), att
    assert len(bodies) >= 2 and all(b.get("model") == "qwen2.5-coder" for b in bodies), bodies
