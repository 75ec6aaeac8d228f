"""Readiness per arm: installed, credentials for its provider (from the CLIs' login status commands,
run for real as the fake CLIs on PATH), cached until what it depends on changes; `acr doctor`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FAKES, acr

from acr_cli import redact as redact_module
from acr_cli.agents import base as agent_base
from acr_cli.agents.claude import ClaudeAdapter
from acr_cli.agents.codex import CodexAdapter, codex_overrides
from acr_cli.agents.opencode import OpencodeAdapter, opencode_listing
from acr_cli.health import readiness

STATUS_VARS = ("FAKE_AGENT_LOGGED_OUT", "FAKE_AGENT_OPENCODE_PROVIDERS", "FAKE_AGENT_STATUS_HANG",
               "FAKE_AGENT_STATUS_UNSUPPORTED", "FAKE_AGENT_STATUS_LOG")
PLACES = ("CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR",
          "OPENCODE_CONFIG_CONTENT", "CLAUDE_CONFIG_DIR")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, fakes_on_path):
    """A home of its own (no real credential file counts), no key in the environment, the fakes on
    PATH, a working directory inside a git root (opencode's project config search stops there)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in (*STATUS_VARS, *PLACES):
        monkeypatch.delenv(var, raising=False)
    for var in list(os.environ):
        if var.endswith(("_API_KEY", "_APIKEY", "_AUTH_TOKEN", "_OAUTH_TOKEN", "_ACCESS_TOKEN")):
            monkeypatch.delenv(var)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("FAKE_AGENT_STATUS_LOG", str(tmp_path / "status.jsonl"))
    readiness._MEMO.clear()
    readiness._VERSIONS.clear()
    yield home
    readiness._MEMO.clear()
    readiness._VERSIONS.clear()
    # redact() keeps its scan of the environment while the environment keeps its size and the secrets
    # it saw keep their values: this fixture's environment (variables removed, others added) must not
    # be taken for the next test's, which may have the same size and a new secret
    redact_module._cache = None


def status_calls(tmp_path: Path, agent: str | None = None) -> int:
    log = tmp_path / "status.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return sum(1 for x in lines if agent in (None, x["agent"]))


def check(agent, model, tmp_path, **kw):
    readiness._MEMO.clear()  # as a new acr process would: only the cache file carries answers over
    return readiness.check(agent, model, agent, cache_dir=tmp_path / "cache", **kw)


# --------------------------------------------------------------------------- scope


def test_scope_is_the_credential_scope_of_an_arm():
    assert readiness.scope("claude", "claude-opus-4-6") == "claude"
    assert readiness.scope("codex", "gpt-5.4") == "codex"
    assert readiness.scope("opencode", "moonshotai/kimi-k2.5") == "opencode:moonshotai"
    assert readiness.scope("opencode", "openrouter/qwen/qwen3-coder:free") == "opencode:openrouter"
    assert readiness.scope("opencode", "MoonshotAI/kimi") == "opencode:moonshotai"
    assert readiness.scope("aider", "m1") == "aider"


# --------------------------------------------------------------------------- claude


def test_a_logged_out_claude_is_not_ready_and_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "claude")
    r = check("claude", "claude-opus-4-6", tmp_path)
    assert r.state == "not_ready" and not r.runnable
    assert r.reason == "claude: not logged in (claude auth status)"
    assert "/login" in r.fix and "ANTHROPIC_API_KEY" in r.fix
    assert r.version == "2.1.197 (Claude Code)"


def test_a_logged_in_claude_is_ready(tmp_path, monkeypatch):
    r = check("claude", "claude-sonnet-4-6", tmp_path)
    assert (r.state, r.fix) == ("ready", None) and "logged in" in r.reason
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "claude")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")  # an API key is a login too
    r = check("claude", "claude-sonnet-4-6", tmp_path)
    assert r.state == "ready" and "ANTHROPIC_API_KEY" in r.reason


def test_a_cli_that_is_not_installed_is_not_ready_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = check("codex", "gpt-5.4", tmp_path)
    assert (r.state, r.version) == ("not_ready", None)
    assert r.fix == "install it: npm install -g @openai/codex" and "not installed" in r.reason


@pytest.mark.parametrize("agent,model", [("claude", "claude-opus-4-6"), ("codex", "gpt-5.4"),
                                         ("opencode", "moonshotai/kimi-k2.5")])
def test_a_cli_without_the_status_command_is_unknown_not_not_ready(tmp_path, monkeypatch, agent, model):
    monkeypatch.setenv("FAKE_AGENT_STATUS_UNSUPPORTED", agent)
    r = check(agent, model, tmp_path)
    assert r.state == "unknown" and r.runnable and "does not understand" in r.reason, r


def test_an_agent_acr_has_no_status_command_for_is_unknown(tmp_path):
    r = readiness.check("aider", "m1", "claude", cache_dir=tmp_path / "cache")  # any installed executable
    assert r.state == "unknown" and "no credential check" in r.reason and status_calls(tmp_path) == 0


# --------------------------------------------------------------------------- codex


def write_codex_config(tmp_path, monkeypatch, text: str) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("CODEX_HOME", str(home))
    (home / "config.toml").write_text(text)
    return home


def test_codex_not_logged_in_is_not_ready(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "codex")
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "not_ready" and r.reason == "codex: not logged in (codex login status)"
    assert "codex login" in r.fix and "CODEX_API_KEY" in r.fix
    write_codex_config(tmp_path, monkeypatch, 'model = "gpt-5.4"\nmodel_provider = "openai"\n')
    assert check("codex", "gpt-5.4", tmp_path).state == "not_ready"  # OpenAI's own provider: the login counts


def test_codex_with_a_custom_model_provider_is_unknown(tmp_path, monkeypatch):
    """Its credentials live in that provider's settings (or it needs none): `codex login status`
    says "Not logged in" although codex runs."""
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "codex")
    write_codex_config(tmp_path, monkeypatch, 'model_provider = "mock"\n[model_providers.mock]\nname = "m"\n'
                                              'base_url = "https://llm.example.com/v1"\n')
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "unknown" and "model_provider 'mock'" in r.reason
    write_codex_config(tmp_path, monkeypatch, 'profile = "work"\n[profiles.work]\nmodel_provider = "azure"\n')
    r = check("codex", "gpt-5.4", tmp_path)  # chosen by the active profile
    assert r.state == "unknown" and "model_provider 'azure'" in r.reason


LOCAL_ARGS = ("-c", "model_provider=local", "--config", 'model_providers.local.base_url="http://127.0.0.1:9/v1"')


def test_a_codex_arm_whose_args_choose_a_provider_has_a_scope_of_its_own():
    assert readiness.scope("codex", "qwen2.5-coder", LOCAL_ARGS) == "codex:local"
    assert readiness.scope("codex", "gpt-5.4", ("-c", 'model_provider="openai"')) == "codex"
    assert readiness.scope("codex", "gpt-5.4", ("--config=model_provider=azure",)) == "codex:azure"
    assert codex_overrides(LOCAL_ARGS) == {"model_provider": "local",
                                                     "model_providers.local.base_url": "http://127.0.0.1:9/v1"}


def test_a_local_server_arm_asks_no_login_and_is_unknown_while_nothing_answers(tmp_path, monkeypatch):
    """Port 9 on loopback: nothing listens. The arm is still tried, with what to do; no status command ran."""
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "codex")
    r = check("codex", "qwen2.5-coder", tmp_path, args=LOCAL_ARGS)
    assert r.state == "unknown" and r.runnable and "http://127.0.0.1:9/v1" in r.reason
    assert "nothing answers there now" in r.reason and "ollama serve" in r.fix
    assert status_calls(tmp_path) == 0
    held = readiness.known_not_ready("codex", "qwen2.5-coder", "codex", tmp_path / "cache", args=LOCAL_ARGS)
    assert held.startswith("nothing answers at http://127.0.0.1:9/v1") and "logged in" not in held
    # the OpenAI login of the same CLI is asked for, and held, on its own
    assert check("codex", "gpt-5.4", tmp_path).state == "not_ready" and status_calls(tmp_path) == 1


def test_a_provider_with_a_key_or_on_another_host_is_not_taken_for_a_local_one(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "codex")
    keyed = (*LOCAL_ARGS, "-c", "model_providers.local.env_key=LOCAL_KEY")
    r = check("codex", "qwen2.5-coder", tmp_path, args=keyed)
    assert r.state == "unknown" and "arguments select model_provider 'local'" in r.reason  # not "not logged in"
    assert readiness.local_endpoint("codex", "m", keyed) is None
    assert readiness.is_local_url("http://192.168.1.20:8000/v1") and readiness.is_local_url("http://localhost:8080")
    assert not readiness.is_local_url("https://api.example.com/v1") and not readiness.is_local_url("not a url")


def test_codex_api_key_variables(tmp_path, monkeypatch):
    """codex exec sends CODEX_API_KEY; the installed version does not send OPENAI_API_KEY (checked
    against a local server), so that one alone cannot make it ready: unknown, with the fix."""
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "codex")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "unknown" and "OPENAI_API_KEY" in r.reason
    assert r.fix == "printenv OPENAI_API_KEY | codex login --with-api-key (or set CODEX_API_KEY)"
    monkeypatch.setenv("CODEX_API_KEY", "sk-test-codex-0123456789")
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "ready" and "CODEX_API_KEY" in r.reason


# --------------------------------------------------------------------------- opencode


def test_opencode_credentials_are_found_per_provider_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_OPENCODE_PROVIDERS", "anthropic,moonshotai,minimax")
    assert check("opencode", "moonshotai/kimi-k2.5", tmp_path).state == "ready"  # listed as "Moonshot AI"
    assert check("opencode", "MoonshotAI/kimi-k2.5", tmp_path).state == "ready"  # case does not matter
    assert check("opencode", "minimax/MiniMax-M2.7", tmp_path).state == "ready"  # "MiniMax (minimax.io)"
    assert check("opencode", "anthropic/claude-sonnet-4-6", tmp_path).state == "ready"
    r = check("opencode", "zhipuai/glm-5", tmp_path)
    assert r.state == "not_ready" and r.reason == "opencode: no credentials for provider zhipuai (opencode auth list)"
    assert r.fix == "run `opencode auth login` and choose Zhipu AI, or set ZHIPU_API_KEY"
    monkeypatch.setenv("ZHIPU_API_KEY", "zk-test-0123456789")  # listed in the environment section
    r = check("opencode", "zhipuai/glm-5", tmp_path)
    assert r.state == "ready" and "ZHIPU_API_KEY in the environment" in r.reason
    monkeypatch.setenv("FAKE_AGENT_OPENCODE_PROVIDERS", "")
    assert check("opencode", "moonshotai/kimi-k2.5", tmp_path).state == "not_ready"


def test_an_opencode_config_that_defines_the_provider_makes_it_unknown_not_not_ready(tmp_path, monkeypatch, isolated):
    monkeypatch.setenv("FAKE_AGENT_OPENCODE_PROVIDERS", "")
    conf = isolated / ".config" / "opencode"
    conf.mkdir(parents=True)
    (conf / "opencode.jsonc").write_text('{\n  // my gateway\n  "$schema": "https://opencode.ai/config.json",\n'
                                         '  "provider": {"myproxy": {"options": {"apiKey": "k", "baseURL": '
                                         '"https://gateway.example.com/v1"}, "models": {"m1": {}},},},\n}\n')
    r = check("opencode", "myproxy/m1", tmp_path)
    assert r.state == "unknown" and r.runnable and "opencode.jsonc defines that provider" in r.reason
    assert check("opencode", "zhipuai/glm-5", tmp_path).state == "not_ready"  # that file does not define it
    # $OPENCODE_CONFIG, and a project's own opencode.json, count too
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({"provider": {"zhipuai": {"options": {"apiKey": "{env:MY_KEY}"}}}}))
    monkeypatch.setenv("OPENCODE_CONFIG", str(other))
    assert check("opencode", "zhipuai/glm-5", tmp_path).state == "unknown"
    monkeypatch.delenv("OPENCODE_CONFIG")
    (Path.cwd() / "opencode.json").write_text(json.dumps({"provider": {"alibaba": {}}}))
    assert check("opencode", "alibaba/qwen3-max", tmp_path).state == "unknown"
    # opencode writes a config of its own with no provider in it: that is no reason for doubt
    (conf / "opencode.jsonc").write_text('{\n  "$schema": "https://opencode.ai/config.json"\n}\n')
    assert check("opencode", "myproxy/m1", tmp_path).state == "not_ready"


def test_opencode_providers_with_credential_chains_are_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_OPENCODE_PROVIDERS", "")
    assert check("opencode", "amazon-bedrock/anthropic.claude-sonnet", tmp_path).state == "unknown"


def test_opencode_auth_list_output_is_read_as_the_real_one_prints_it():
    raw = ("\u250c  Credentials \x1b[90m~/.local/share/opencode/auth.json\n\u2502\n"
           "\u25cf  Moonshot AI \x1b[90mapi\n\u2502\n\u25cf  myproxy \x1b[90mapi\n\u2502\n\u2514  2 credentials\n\n"
           "\u250c  Environment\n\u2502\n\u25cf  Z.AI \x1b[90mZHIPU_API_KEY\n\u2502\n"
           "\u2514  1 environment variables\n\x1b[0m")  # as opencode 1.18.33 prints it, colours and all
    assert opencode_listing(raw) == [("stored", "Moonshot AI", "api"), ("stored", "myproxy", "api"),
                                               ("env", "Z.AI", "ZHIPU_API_KEY")]
    assert opencode_listing("\u250c  Credentials ~/x\n\u2502\n\u2514  0 credentials\n") == []
    assert opencode_listing("opencode [project]\n\nstart opencode tui\n") is None


# --------------------------------------------------------------------------- timeouts


def test_a_status_command_that_hangs_is_unknown_within_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_STATUS_HANG", "codex")
    start = time.monotonic()
    r = check("codex", "gpt-5.4", tmp_path, timeout=1.5)
    assert time.monotonic() - start < 8
    assert r.state == "unknown" and "did not answer within" in r.reason and r.version == "codex-cli 0.169.0"
    entry = json.loads((tmp_path / "cache" / "readiness.json").read_text())["scopes"]["codex"]
    assert entry["expires_at"] - entry["checked_at"] == pytest.approx(readiness.TRANSIENT_TTL_S)  # kept briefly


# --------------------------------------------------------------------------- cache


def test_an_answer_is_cached_until_a_credential_file_or_key_changes(tmp_path, monkeypatch, isolated):
    monkeypatch.setenv("FAKE_AGENT_LOGGED_OUT", "claude")
    assert check("claude", "claude-opus-4-6", tmp_path).state == "not_ready"
    assert check("claude", "claude-sonnet-4-6", tmp_path).state == "not_ready"  # same scope, from the cache
    assert status_calls(tmp_path, "claude") == 1
    creds = isolated / ".claude" / ".credentials.json"
    creds.parent.mkdir()
    creds.write_text("{}")  # a login stored
    check("claude", "claude-opus-4-6", tmp_path)
    assert status_calls(tmp_path, "claude") == 2
    check("claude", "claude-opus-4-6", tmp_path)
    assert status_calls(tmp_path, "claude") == 2
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    assert check("claude", "claude-opus-4-6", tmp_path).state == "ready"
    assert status_calls(tmp_path, "claude") == 3
    check("claude", "claude-opus-4-6", tmp_path, refresh=True)  # asks again whatever the cache says
    assert status_calls(tmp_path, "claude") == 4
    cached = (tmp_path / "cache" / "readiness.json").read_text()
    assert "sk-ant-test" not in cached  # only a hash of what the key is


def test_opencode_scopes_are_cached_per_provider_and_see_their_key(tmp_path, monkeypatch, isolated):
    monkeypatch.setenv("FAKE_AGENT_OPENCODE_PROVIDERS", "")
    assert check("opencode", "moonshotai/kimi-k2.5", tmp_path).state == "not_ready"
    assert check("opencode", "moonshotai/kimi-k2.6", tmp_path).state == "not_ready"
    assert status_calls(tmp_path, "opencode") == 1
    monkeypatch.setenv("MOONSHOT_API_KEY", "mk-test-0123456789")
    assert check("opencode", "moonshotai/kimi-k2.5", tmp_path).state == "ready"
    assert status_calls(tmp_path, "opencode") == 2
    auth = isolated / ".local" / "share" / "opencode" / "auth.json"
    before = readiness.fingerprint("opencode", "zhipuai/glm-5")
    auth.parent.mkdir(parents=True)
    auth.write_text("{}")
    assert readiness.fingerprint("opencode", "zhipuai/glm-5") != before


def test_the_fingerprint_follows_the_executable_files_and_keys_never_their_values(tmp_path, monkeypatch, isolated):
    fp = readiness.fingerprint("codex", "gpt-5.4")
    assert fp == readiness.fingerprint("codex", "gpt-5.4")  # stable
    assert readiness.fingerprint("codex", "o3") == fp  # one scope, whatever the model
    monkeypatch.setenv("CODEX_API_KEY", "sk-test-codex-0123456789")
    with_key = readiness.fingerprint("codex", "gpt-5.4")
    assert with_key != fp and "sk-test" not in with_key
    monkeypatch.setenv("CODEX_API_KEY", "sk-test-codex-another-one")
    assert readiness.fingerprint("codex", "gpt-5.4") != with_key  # another value, another fingerprint
    monkeypatch.delenv("CODEX_API_KEY")
    (isolated / ".codex").mkdir()
    (isolated / ".codex" / "auth.json").write_text("{}")
    assert readiness.fingerprint("codex", "gpt-5.4") != fp
    bin_dir = tmp_path / "bin"  # another codex executable first on PATH
    bin_dir.mkdir()
    exe = bin_dir / "codex"
    exe.write_text((FAKES / "codex").read_text())
    exe.chmod(0o755)
    now = readiness.fingerprint("codex", "gpt-5.4")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert readiness.fingerprint("codex", "gpt-5.4") != now
    assert readiness.fingerprint("claude", "x") != readiness.fingerprint("codex", "x")


def test_a_damaged_cache_is_only_a_slower_check(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "readiness.json").write_text("{not json")
    assert check("claude", "claude-opus-4-6", tmp_path).state == "ready"
    assert json.loads((tmp_path / "cache" / "readiness.json").read_text())["scopes"]["claude"]["readiness"]["state"] \
        == "ready"


# --------------------------------------------------------------------------- acr doctor


def doctor(*args, env=None):
    return acr("doctor", *args, env={**(env or {}), "COLUMNS": "200"})


def test_doctor_counts_ready_arms_and_says_what_to_do(tmp_path, isolated):
    conf = isolated / ".config" / "opencode"
    conf.mkdir(parents=True)
    (conf / "opencode.json").write_text(json.dumps({"provider": {"alibaba": {"options": {"apiKey": "k"}}}}))
    env = {"FAKE_AGENT_LOGGED_OUT": "codex", "FAKE_AGENT_OPENCODE_PROVIDERS": "zhipuai,moonshotai"}
    r = doctor("--json", env=env)
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)["profile"]
    assert prof["readiness"] == {"total": 8, "ready": 4, "unknown": 2, "not_ready": 2, "held": 0}
    by_arm = {a["arm"]: a for a in prof["arms"]}
    assert by_arm["codex:gpt-5.4"]["state"] == "not_ready" and "codex login" in by_arm["codex:gpt-5.4"]["fix"]
    assert by_arm["opencode:alibaba/qwen3-max"]["state"] == "unknown"
    assert by_arm["opencode:minimax/MiniMax-M2.7"]["fix"] == ("run `opencode auth login` and choose MiniMax "
                                                              "(minimax.io), or set MINIMAX_API_KEY")
    assert by_arm["claude:claude-opus-4-6"] | {"reason": None} == {
        "arm": "claude:claude-opus-4-6", "agent": "claude", "model": "claude-opus-4-6", "scope": "claude",
        "usable": True, "installed": True, "version": "2.1.197 (Claude Code)", "state": "ready", "reason": None,
        "fix": None, "priced": True, "price_note": None, "health": None}
    r = doctor(env=env)
    assert r.returncode == 0
    assert "profile balanced: 4 of 8 arms ready, 2 unknown, 2 not ready" in r.stdout
    text = " ".join(r.stdout.split())
    assert "✗ codex:gpt-5.4 not ready codex: not logged in (codex login status) fix: run `codex login`" in text
    assert ("✗ opencode:minimax/MiniMax-M2.7 not ready opencode: no credentials for provider minimax "
            "(opencode auth list) fix: run `opencode auth login` and choose MiniMax (minimax.io)") in text
    assert "? opencode:alibaba/qwen3-max unknown" in text and "still tried" in text


def test_doctor_runs_each_status_command_once_then_uses_the_cache(tmp_path):
    r = doctor("--json")
    assert r.returncode == 0 and json.loads(r.stdout)["profile"]["readiness"]["ready"] == 8
    # one per scope, and `opencode auth list` once for its five providers
    assert (status_calls(tmp_path, "claude"), status_calls(tmp_path, "codex"), status_calls(tmp_path, "opencode")) \
        == (1, 1, 1)
    r = doctor("--json", env={"FAKE_AGENT_LOGGED_OUT": "codex"})  # the fake's state is no credential file...
    assert json.loads(r.stdout)["profile"]["readiness"]["ready"] == 8 and status_calls(tmp_path) == 3
    r = doctor("--json", "--refresh", env={"FAKE_AGENT_LOGGED_OUT": "codex"})  # ...--refresh asks again
    assert json.loads(r.stdout)["profile"]["readiness"] == {"total": 8, "ready": 7, "unknown": 0, "not_ready": 1, "held": 0}
    assert status_calls(tmp_path) == 6


def test_doctor_exits_1_when_no_arm_is_ready_or_unknown(tmp_path, isolated):
    everyone = {"FAKE_AGENT_LOGGED_OUT": "claude,codex,opencode"}
    r = doctor(env=everyone)
    assert r.returncode == 1
    assert "profile balanced: 0 of 8 arms ready, 8 not ready" in r.stdout
    assert "no arm of this profile is ready" in " ".join(r.stdout.split())
    assert doctor("--json", env=everyone).returncode == 1
    codex_home = tmp_path / "codex-home"  # one arm that may run (unknown) is enough
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('model_provider = "local"\n')
    r = doctor(env={**everyone, "CODEX_HOME": str(codex_home)})
    assert r.returncode == 0 and "0 of 8 arms ready, 1 unknown, 7 not ready" in r.stdout


def test_doctor_shows_an_arm_without_a_price(tmp_path):
    prof = tmp_path / "mine.yaml"
    prof.write_text("description: mine\narms:\n  - agent: claude\n    model: claude-opus-4-6\n"
                    "  - agent: codex\n    model: gpt-5.4\n    price: {input: 2.5, output: 15}\n"
                    "  - agent: codex\n    model: no-such-model-9\n")
    arms = json.loads(doctor("--json", "--profile", str(prof)).stdout)["profile"]["arms"]
    assert [(a["arm"], a["priced"], a["price_note"]) for a in arms] == [
        ("claude:claude-opus-4-6", True, "priced from the catalog (genai-prices)"), ("codex:gpt-5.4", True, None),
        ("codex:no-such-model-9", False, "no price in the profile or the catalog")]
    r = doctor("--profile", str(prof))
    assert r.returncode == 0 and "profile mine: 3 of 3 arms ready" in r.stdout  # no price is not "not ready"
    assert "no price in the profile or the catalog" in r.stdout


# --------------------------------------------------------------------------- the fakes' error modes


@pytest.mark.parametrize("mode,expected", [
    ("login", {"claude": "Not logged in · Please run /login",
               "codex": "401 Unauthorized: Missing bearer or basic authentication in header",
               "opencode": "Unexpected server error"}),
    ("403", {"claude": "API Error: 403 Your API key", "codex": "does not have access to model `m1`",
             "opencode": "API error 403: Your account is not authorized"}),
    ("quota", {"claude": "Credit balance is too low", "codex": "Quota exceeded. Check your plan and billing details.",
               "opencode": "API error 429: You exceeded your current quota"}),
    ("unknown_model", {"claude": "issue with the selected model (m1)",
                       "codex": "The model `m1` does not exist or you do not have access to it.",
                       "opencode": "Unexpected server error"}),
    ("unknown_model_named", {"opencode": "ProviderModelNotFoundError"}),
    ("503", {"claude": "API Error: 503 Service Unavailable", "codex": "503 Service Unavailable", "opencode": "API error 503"}),
    ("overloaded", {"claude": "API Error: 529 Overloaded", "codex": "overloaded",
                    "opencode": "API error 529"}),
])
def test_the_fakes_error_modes_speak_each_cli_format(tmp_path, monkeypatch, mode, expected):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"rules": [{"error": mode}]}))
    monkeypatch.setenv("FAKE_AGENT_SCENARIO", str(scenario))
    argv = {"claude": ["claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "m1", "--", "hi"],
            "codex": ["codex", "exec", "--json", "-m", "m1", "hi"],
            "opencode": ["opencode", "run", "--format", "json", "-m", "prov/m1"]}
    adapters = {"claude": ClaudeAdapter(), "codex": CodexAdapter(), "opencode": OpencodeAdapter()}
    for agent, want in expected.items():
        p = subprocess.run(argv[agent], capture_output=True, text=True, input="hi", cwd=tmp_path, timeout=30)
        assert p.returncode == 1, (agent, p.stderr)
        assert list(agent_base.json_lines(p.stdout)), agent  # the CLI's own JSON events
        res = adapters[agent].parse(p.stdout, p.stderr, p.returncode)
        assert res.error and want in res.error, (agent, res.error)
        assert not re.search(r"API error (\d+): API Error: \1", res.error), res.error  # the status said once


def test_codex_saying_not_logged_in_is_not_ready_whatever_its_exit_status(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"  # a version whose `login status` exits 0 either way
    codex.write_text("#!/bin/sh\n[ \"$1\" = login ] && { echo 'Not logged in' >&2; exit 0; }\necho codex-cli 9.9\n")
    codex.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert check("codex", "gpt-5.4", tmp_path).state == "not_ready"
    codex.write_text("#!/bin/sh\n[ \"$1\" = login ] && { printf '\\x00\\x01garbage'; exit 0; }\necho codex-cli 9.9\n")
    assert check("codex", "gpt-5.4", tmp_path, refresh=True).state == "unknown"  # not "ready" on exit 0 alone


def test_opencode_readiness_is_the_same_seen_from_any_folder_of_the_project(tmp_path, isolated):
    """Its project config is looked for from the working directory up: files that are absent everywhere must
    not make a set-aside arm, or a cached answer, look new from a sub-folder."""
    here = readiness.fingerprint("opencode", "moonshotai/kimi-k2.5")
    sub = Path.cwd() / "src" / "deep"
    sub.mkdir(parents=True)
    os.chdir(sub)
    assert readiness.fingerprint("opencode", "moonshotai/kimi-k2.5") == here
    (Path.cwd().parent / "opencode.json").write_text("{}")  # a config that appears on the way up does count
    assert readiness.fingerprint("opencode", "moonshotai/kimi-k2.5") != here


def test_an_arm_doctor_found_not_logged_in_is_skipped_by_run_and_route(tmp_path, isolated, scenario):
    from conftest import GOOD, init_repo

    project = init_repo(Path.cwd() / "proj", {"calc.py": "def add(a, b):\n    return a * b\n"})
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    logged_out = {"FAKE_AGENT_LOGGED_OUT": "opencode"}
    assert doctor(env=logged_out).returncode == 0  # finds opencode not logged in (and caches it)
    arms = "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4"
    route = acr("route", "fix add", "--arms", arms, "--json", cwd=project, env=logged_out)
    assert route.returncode == 0, route.stderr
    assert "not ready (opencode" in json.dumps(json.loads(route.stdout))  # listed as what cannot run, and why
    r = acr("run", "fix add", "--verify", "grep -q 'a + b' calc.py", "--arms", arms, "--json", cwd=project,
            env=logged_out)
    assert r.returncode == 0, r.stderr
    assert [a["agent"] for a in json.loads(r.stdout)["attempts"]] == ["codex"]  # no attempt spent on opencode
    assert "skip opencode:moonshotai/kimi-k2.5: not ready (opencode" in " ".join(r.stderr.split())


@pytest.mark.parametrize("shebang", ["#!/usr/bin/env acr-test-no-such-interpreter", "#!/nonexistent/acr-test/node"])
def test_a_cli_whose_interpreter_is_missing_is_not_ready_and_run_does_not_retry_it(tmp_path, monkeypatch, scenario,
                                                                                   shebang):
    """`codex` is on PATH but the interpreter its first line names is not (an npm CLI without Node.js): it cannot
    start, so it is not ready, doctor shows why, and a run that tried it sets it aside until `doctor --reset`."""
    from conftest import GOOD, calls, init_repo

    broken = tmp_path / "broken-bin"
    broken.mkdir()
    (broken / "codex").write_text(f"{shebang}\nconsole.log('hi')\n")
    (broken / "codex").chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}{os.pathsep}{os.environ['PATH']}")  # shadows the fake codex
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "not_ready" and not r.runnable and "cannot start" in r.reason, r
    assert "interpreter" in r.fix and "npm install -g @openai/codex" in r.fix
    line = next(x for x in doctor().stdout.splitlines() if " codex " in x)
    assert "✗" in line and "cannot start" in line and str(broken / "codex") in line  # not ✓ with the error as version
    arms = json.loads(doctor("--json").stdout)["profile"]["arms"]
    assert [a["state"] for a in arms if a["agent"] == "codex"] == ["not_ready"]

    project = init_repo(Path.cwd() / "proj", {"calc.py": "def add(a, b):\n    return a * b\n"})
    log = scenario({"write": {"calc.py": GOOD}})
    home = {"ACR_HOME": str(tmp_path / "fresh-home")}  # no answer of doctor's cached: the run finds out itself
    run = ("run", "fix add", "--verify", "grep -q 'a + b' calc.py", "--arms", "codex:gpt-5.4,claude:claude-sonnet-4-6",
           "--json")
    out = json.loads(acr(*run, cwd=project, env=home).stdout)
    assert [(a["agent"], a["verdict"]) for a in out["attempts"]] == [("codex", "error"), ("claude", "passed")]
    assert out["attempts"][0]["problem"] == "setup" and "interpreter" in out["attempts"][0]["health"]
    (project / "calc.py").write_text("def add(a, b):\n    return a * b\n")
    out = json.loads(acr(*run, cwd=project, env=home).stdout)
    assert [a["agent"] for a in out["attempts"]] == ["claude"]  # set aside: no second attempt that cannot start
    assert "cannot start" in " ".join(s["reason"] for s in out["skipped"])
    assert [c["agent"] for c in calls(log)] == ["claude", "claude"]


def test_a_cli_found_through_a_relative_path_entry_is_checked_not_taken_for_one_that_cannot_start(tmp_path,
                                                                                                   monkeypatch):
    (Path.cwd() / "node_modules" / ".bin").mkdir(parents=True)
    (Path.cwd() / "node_modules" / ".bin" / "codex").write_text(
        f"#!/bin/sh\nFAKE_AGENT_NAME=codex exec {sys.executable} {FAKES / 'fakeagent.py'} \"$@\"\n")
    (Path.cwd() / "node_modules" / ".bin" / "codex").chmod(0o755)
    monkeypatch.setenv("PATH", f"node_modules/.bin{os.pathsep}{os.environ['PATH']}")
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "ready" and r.version == "codex-cli 0.169.0", r  # its status command ran, from elsewhere


def test_an_agent_that_ran_and_failed_is_not_taken_for_one_that_cannot_start(tmp_path, scenario):
    """A line about a missing interpreter after the CLI ran (a plugin, a tool it started) is not its own start."""
    from conftest import init_repo

    project = init_repo(Path.cwd() / "proj", {"calc.py": "def add(a, b):\n    return a * b\n"})
    scenario({"match": {"agent": "opencode"}, "exit": 1, "stderr": "/usr/bin/env: 'python': No such file or directory"})
    r = acr("run", "fix add", "--verify", "grep -q 'a + b' calc.py", "--arms", "opencode:zhipuai/glm-5", "--json",
            cwd=project)
    out = json.loads(r.stdout)
    assert out["attempts"][0]["verdict"] == "error" and out["attempts"][0]["problem"] is None, out["attempts"][0]
    r = acr("run", "fix add", "--verify", "grep -q 'a + b' calc.py", "--arms", "opencode:zhipuai/glm-5", "--json",
            cwd=project)
    assert len(json.loads(r.stdout)["attempts"]) == 1  # tried again: not set aside


def test_removing_the_interpreter_of_a_cli_makes_doctor_check_it_again(tmp_path, monkeypatch):
    interp_dir = tmp_path / "interp"
    interp_dir.mkdir()
    (interp_dir / "acr-test-node").symlink_to(os.path.realpath(sys.executable))  # stands in for node
    bin_dir = tmp_path / "npmbin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text(f"#!/usr/bin/env acr-test-node\nimport os, runpy\nos.environ['FAKE_AGENT_NAME'] = 'codex'\n"
                                   f"runpy.run_path({str(FAKES / 'fakeagent.py')!r}, run_name='__main__')\n")
    (bin_dir / "codex").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{interp_dir}{os.pathsep}{os.environ['PATH']}")
    assert check("codex", "gpt-5.4", tmp_path).state == "ready"
    (interp_dir / "acr-test-node").unlink()  # Node.js uninstalled: the cached "ready" no longer holds
    r = check("codex", "gpt-5.4", tmp_path)
    assert r.state == "not_ready" and "cannot start" in r.reason, r
