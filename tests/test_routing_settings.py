"""A project's routing settings in ``.acr.toml`` (acr_cli.routing_settings): ``arms``, ``exclude``, ``policy``,
``time_weight`` and the limits, honoured alike by ``acr run`` and ``acr route``; an untrusted file may only
narrow; a name that is no arm is an error naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import BAD, GOOD, VERIFY, acr, calls


def _toml(project: Path, text: str) -> None:
    (project / ".acr.toml").write_text(text)


def _arms_called(log: Path) -> list[str]:
    return [f"{c['agent']}:{c['model']}" for c in calls(log)]


def test_a_trusted_project_excludes_an_agent_and_sets_the_policy_for_run_and_route(project, fakes_on_path, scenario):
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
                   {"match": {"agent": "claude"}, "write": {"calc.py": GOOD}})
    _toml(project, f'verify = "{VERIFY}"\npolicy = "fixed"\nexclude = ["codex"]\n')
    assert acr("trust", cwd=project).returncode == 0
    route = json.loads(acr("route", "fix add", "--json", cwd=project).stdout)
    assert route["policy"].startswith("fixed")
    order = [f"{a['agent']}:{a['model']}" for a in route["order"]]
    assert order[0] == "claude:claude-sonnet-4-6" and not any(a.startswith("codex:") for a in order)
    assert route["excluded"] == [{"arm": "codex:gpt-5.4", "by": f"exclude = 'codex' ({project / '.acr.toml'})"}]
    explained = acr("route", "fix add", "--explain", cwd=project).stdout
    assert "codex:gpt-5.4: excluded by exclude = 'codex'" in explained
    r = acr("run", "fix add", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert _arms_called(log) == ["claude:claude-sonnet-4-6"]  # the profile's first arm, codex, never ran
    # the command line outranks the project: --arms names exactly what to run
    assert acr("run", "fix add", "--arms", "codex:gpt-5.4", "--yes", cwd=project).returncode == 0
    assert _arms_called(log)[-1] == "codex:gpt-5.4"


def test_trusted_arms_are_the_only_arms_and_its_limits_apply(project, fakes_on_path, scenario):
    log = scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    _toml(project, f'verify = "{VERIFY}"\npolicy = "fixed"\nmax_attempts = 2\ntime_weight = 0.5\n'
                   'arms = ["claude:claude-opus-4-6", "opencode:moonshotai/kimi-k2.5", "opencode:zhipuai/glm-5"]\n')
    assert acr("trust", cwd=project).returncode == 0
    route = json.loads(acr("route", "fix add", "--json", cwd=project).stdout)
    assert [f"{a['agent']}:{a['model']}" for a in route["order"]] == [
        "opencode:zhipuai/glm-5", "opencode:moonshotai/kimi-k2.5", "claude:claude-opus-4-6"]  # the profile's order
    assert len(route["excluded"]) == 5 and all("does not list it" in e["by"] for e in route["excluded"])
    shown = json.loads(acr("config", "show", "--json", cwd=project).stdout)["settings"]
    assert shown["time_weight"] == {"value": 0.5, "source": str(project / ".acr.toml")}
    r = acr("run", "fix add", "--json", cwd=project)
    assert r.returncode == 1
    assert _arms_called(log) == ["opencode:zhipuai/glm-5", "opencode:moonshotai/kimi-k2.5"]  # max_attempts = 2


def test_an_untrusted_project_may_narrow_but_not_steer(project, fakes_on_path, scenario):
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
                   {"match": {"agent": "claude"}, "write": {"calc.py": BAD}},
                   {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    assert acr("config", "set", "max_attempts", "3").returncode == 0
    _toml(project, f'verify = "{VERIFY}"\nexclude = ["codex"]\nmax_attempts = 1\nmax_cost = 100.0\n'
                   'policy = "always:claude:claude-opus-4-6"\narms = ["claude:claude-opus-4-6"]\ntime_weight = 9.0\n')
    shown = json.loads(acr("config", "show", "--json", cwd=project).stdout)
    values = {k: (v["value"], v["source"]) for k, v in shown["settings"].items()}
    assert values["max_attempts"] == (1, str(project / ".acr.toml"))  # lower than the user's 3: applies
    assert values["max_cost"] == (5.0, "profile balanced")  # higher than the profile's $5: does not
    assert values["policy"] == ("learned", "profile balanced") and values["time_weight"][0] == 0.05
    assert set(shown["ignored"]) == {"policy", "arms", "time_weight"}
    r = acr("run", "fix add", "--json", cwd=project)
    assert "not trusted" in r.stderr and "policy = 'always:claude:claude-opus-4-6'" in r.stderr
    assert len(calls(log)) == 1 and not _arms_called(log)[0].startswith("codex:")  # excluded even untrusted
    shown = json.loads(acr("show", "--json", cwd=project).stdout)
    assert shown["attempts"][0]["policy"].startswith("learned")


def test_a_name_that_is_no_arm_is_an_error_naming_the_file_and_key(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {}, "write": {"calc.py": GOOD}})
    _toml(project, f'verify = "{VERIFY}"\nexclude = ["claud"]\n')
    for command in (["route", "fix add"], ["run", "fix add"]):
        r = acr(*command, cwd=project)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"{project / '.acr.toml'}: exclude: 'claud' is neither an agent" in r.stderr
    _toml(project, 'arms = ["codex:gpt-9"]\n')
    acr("trust", cwd=project)
    r = acr("route", "fix add", cwd=project)
    assert r.returncode == 2 and "arms: 'codex:gpt-9' is not an arm of profile balanced" in r.stderr
    assert acr("config", "set", "exclude", "codex, claude").returncode == 0  # the user's own list ...
    _toml(project, 'exclude = ["opencode"]\n')  # ... and the project's add up
    acr("trust", cwd=project)
    shown = json.loads(acr("config", "show", "--json", cwd=project).stdout)["settings"]["exclude"]
    assert shown["value"] == ["opencode", "codex", "claude"]
    r = acr("run", "fix add", "--verify", VERIFY, cwd=project)
    assert r.returncode == 2 and "no arm of profile balanced is left" in r.stderr
    assert str(acr_home / "config" / "config.toml") in r.stderr
    assert calls(log) == []  # refused before any agent (and before the baseline)


def test_config_set_help_lists_every_key_with_its_meaning():
    from acr_cli.setting_keys import TABLE

    out = acr("config", "set", "--help", env={"COLUMNS": "200"}).stdout
    for key, (_, meaning) in TABLE.items():
        assert f"{key}: {meaning}" in out, key
    assert acr("config", "set", "exclude", "opencode, claude:claude-opus-4-6").returncode == 0
    shown = json.loads(acr("config", "show", "--json").stdout)["settings"]
    assert shown["exclude"]["value"] == ["opencode", "claude:claude-opus-4-6"]
    r = acr("config", "set", "policy", "nonsense")
    assert r.returncode == 2 and "expected one of" in r.stderr
