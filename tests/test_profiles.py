"""Profiles: built-ins load, errors name file, line and field, resolution order."""

from __future__ import annotations

import textwrap

import pytest
from conftest import acr

from acr_cli import profiles
from acr_cli.errors import ConfigError, ProfileError

GOOD = """\
description: test
settings: {cost_weight: 0.2, max_attempts: 2}
arms:
  - agent: codex
    model: gpt-5.4
    price: {input: 2.5, output: 15}
    prior: {bug_fix: 0.6}
  - agent: opencode
    model: openrouter/qwen/qwen3-coder:free
order:
  default: [opencode:openrouter/qwen/qwen3-coder:free, codex:gpt-5.4]
"""


def write(tmp_path, text, name="p.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_builtin_profiles_are_valid(tmp_path):
    names = {n for n, _, origin in profiles.available(tmp_path) if origin == "built-in"}
    assert {"balanced", "cheap", "quality", "coderouterbench"} <= names
    for n in names:
        prof = profiles.load(n, tmp_path)
        assert prof.arms and all(a.price_in is not None for a in prof.arms)


def test_valid_profile_parses(tmp_path):
    prof = profiles.load(str(write(tmp_path, GOOD)), tmp_path)
    assert prof.settings.cost_weight == 0.2 and prof.settings.max_attempts == 2
    assert prof.settings.timeout == profiles.Settings().timeout
    assert [a.id for a in prof.order_for("bug_fix")] == ["opencode:openrouter/qwen/qwen3-coder:free", "codex:gpt-5.4"]
    assert prof.arm("codex:gpt-5.4").prior_for("bug_fix") == 0.6
    assert prof.arm("codex:gpt-5.4").prior_for("docs") is None


@pytest.mark.parametrize("bad, line, field", [
    (GOOD.replace("input: 2.5", "input: cheap"), 6, "arms[0].price.input"),
    (GOOD.replace("agent: opencode", "agent: nope"), 8, "arms[1].agent"),
    (GOOD.replace("max_attempts: 2", "max_attempts: 0"), 2, "settings.max_attempts"),
    (GOOD.replace("cost_weight", "cost_wieght"), 2, "settings.cost_wieght"),
    (GOOD.replace("[opencode:openrouter/qwen/qwen3-coder:free, codex:gpt-5.4]", "[codex:gpt-9]"), 11,
     "order.default[0]"),
    (GOOD.replace("bug_fix: 0.6", "bug_fix: 1.6"), 7, "arms[0].prior.bug_fix"),
    (GOOD + "arms: []\n", 12, "arms"),
    (GOOD.replace("cost_weight: 0.2", "cost_weight: .nan"), 2, "settings.cost_weight"),
    (GOOD.replace("max_attempts: 2", "timeout: 0"), 2, "settings.timeout"),  # every attempt would time out
    (GOOD.replace("input: 2.5", "input: .inf"), 6, "arms[0].price.input"),
    ("description: t\nname: caf\xe9\n", 2, "file"),
    (GOOD.replace("  - agent: codex", "  - agent: codex\n   broken: [", 1), None, "yaml"),
    (GOOD.replace("model: gpt-5.4", 'model: ""'), 5, "arms[0].model"),
    (GOOD + "x: &x [*x]\n", 12, "yaml"),  # an alias inside what it names: no end to it
    (GOOD + "".join(f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 10) if i else 'x'}]\n" for i in range(8)),
     None, "yaml"),  # each line ten times the last: 10^7 values
    ("site_name: docs\ntheme:\n  icon: !!python/name:material.icons\n", 3, "yaml"),  # a mkdocs.yml, say
    ("Resources:\n  Bucket: !Ref Name\n", 2, "yaml"),  # a CloudFormation template
    ("arms:\n  ? [codex, gpt-5.4]\n  : 1\n", 2, "yaml"),  # YAML allows a list as a key
])
def test_errors_name_file_line_and_field(tmp_path, bad, line, field):
    path = write(tmp_path, bad)
    if field == "file":  # the same text in Latin-1: not UTF-8
        path.write_bytes(bad.encode("latin-1"))
    with pytest.raises(ProfileError) as e:
        profiles.load(str(path), tmp_path)
    err = e.value
    assert err.path == str(path) and err.field == field
    if line is not None:
        assert err.line == line
    assert str(path) in err.message and field in err.message


def test_cli_validate_exits_2_with_the_location(tmp_path):
    path = write(tmp_path, GOOD.replace("output: 15", "output: -1"))
    r = acr("profiles", "validate", str(path))
    assert r.returncode == 2
    assert f"{path}:6: arms[0].price.output: must be >= 0" in r.stderr
    r = acr("run", "x", "--profile", str(path), "--no-rollback")
    assert r.returncode == 2 and "arms[0].price.output" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234567890\n",
                                  "sk-proj-abcdefghijklmnop1234567890: 1\n",
                                  "arms:\n  - {agent: codex, model: m, price: {input: 1, output: 1}}\n"
                                  "order: {default: [sk-proj-abcdefghijklmnop1234567890]}\n",
                                  # a key that the 80-character cut of a quoted value would split
                                  "OPENAI_BASE_URL=https://api.openai.com/v1/chat\n"
                                  "GITHUB=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6abcdefghijklmnop\n"])
def test_a_profile_path_naming_a_file_of_secrets_never_prints_them(tmp_path, text):
    path = tmp_path / "project.env"  # --profile (or .acr.toml's profile) given the wrong file
    path.write_text(text)
    r = acr("profiles", "validate", str(path))
    assert r.returncode == 2 and "project.env:" in r.stderr, r.stderr
    assert "abcdefghijklmnop" not in r.stderr + r.stdout and "[REDACTED]" in r.stderr


def test_validate_warns_about_a_kind_that_never_applies(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("extends: balanced\norder:\n  bugfix: [codex:gpt-5.4]\n  test_generation: [codex:gpt-5.4]\n")
    r = acr("profiles", "validate", str(path))
    assert r.returncode == 0
    assert "'bugfix' is not a task kind acr knows" in r.stderr and "did you mean 'bug_fix'" in r.stderr
    assert "test_generation" not in r.stderr
    missing = tmp_path / "orphan.yaml"
    missing.write_text("extends: nosuch\n")
    r = acr("profiles", "validate", str(missing))
    assert r.returncode == 2 and f"{missing}:1: extends: no profile named 'nosuch'" in r.stderr


def test_user_profiles_shadow_builtins_and_unknown_names_list_choices(tmp_path):
    user = tmp_path / "profiles"
    user.mkdir()
    write(user, GOOD, "balanced.yaml")
    assert profiles.load("balanced", user).description == "test"
    with pytest.raises(ConfigError) as e:
        profiles.load("nosuch", user)
    assert "balanced" in e.value.hint and "cheap" in e.value.hint


def test_generic_command_agent_is_validated(tmp_path):
    text = GOOD + "agents:\n  mycli:\n    command: [mycli, --model, '{model}']\n"
    with pytest.raises(ProfileError, match=r"agents.mycli.command.*\{prompt\}"):
        profiles.load(str(write(tmp_path, text)), tmp_path)


@pytest.mark.parametrize("spec, field, message", [
    ("[mycli]", "agents.mycli", "expected a mapping with at least `command`"),
    ("{command: [mycli, '{prompt}'], shell: true}", "agents.mycli.shell", "unknown field; expected one of command"),
    ("{command: []}", "agents.mycli.command", "expected a non-empty list of strings (argv, no shell)"),
    ("{command: [mycli, '{prompt}'], output: xml}", "agents.mycli.output", "expected one of text, json, jsonl"),
    ("{command: [mycli, '{prompt}'], fields: [cost]}", "agents.mycli.fields", "expected a mapping of field"),
    ("{command: [mycli, '{prompt}'], fields: {price: cost}}", "agents.mycli.fields.price",
     "unknown field; expected one of tokens_in"),
    ("{command: [mycli, '{prompt}'], fields: {cost_usd: [a]}}", "agents.mycli.fields.cost_usd",
     "expected a dotted path such as usage.input_tokens"),
    ("{command: [mycli, '{prompt}'], env: {A: [1]}}", "agents.mycli.env", "expected a mapping of NAME: value"),
    ("{command: [mycli, '{prompt}'], version: []}", "agents.mycli.version", "expected a list of strings (argv)"),
])
def test_each_problem_of_a_generic_agent_names_its_field(tmp_path, spec, field, message):
    with pytest.raises(ProfileError) as e:
        profiles.load(str(write(tmp_path, GOOD + f"agents:\n  mycli: {spec}\n")), tmp_path)
    assert e.value.field == field and message in e.value.message, e.value.message


def test_parsed_profiles_are_cached_until_the_file_changes(tmp_path):
    path = write(tmp_path, GOOD)
    cache = tmp_path / "cache"
    first = profiles.load(str(path), tmp_path, cache_dir=cache)
    assert len(list(cache.glob("*.json"))) == 1
    assert profiles.load(str(path), tmp_path, cache_dir=cache) == first
    path.write_text(GOOD.replace("input: 2.5", "input: 9.5"))
    again = profiles.load(str(path), tmp_path, cache_dir=cache)
    assert again.arm("codex:gpt-5.4").price_in == 9.5
    path.write_text(GOOD.replace("input: 2.5", "input: cheap"))
    with pytest.raises(ProfileError, match=r"p.yaml:6: arms\[0\].price.input"):
        profiles.load(str(path), tmp_path, cache_dir=cache)


def test_a_profile_can_extend_another(tmp_path):
    user = tmp_path / "profiles"
    user.mkdir()
    write(user, "extends: balanced\nsettings: {cost_weight: 0.3}\n", "mine.yaml")
    mine, base = profiles.load("mine", user), profiles.load("balanced", user)
    assert mine.settings.cost_weight == 0.3 and mine.settings.max_attempts == base.settings.max_attempts
    assert mine.arms == base.arms and mine.order == base.order
    write(user, "extends: balanced\n", "balanced.yaml")  # shadows the built-in it extends
    assert profiles.load("balanced", user).arms == base.arms
    write(user, "extends: loop\n", "loop.yaml")
    with pytest.raises(ProfileError, match="extends itself"):
        profiles.load("loop", user)


def test_a_relative_profile_path_in_a_settings_file_means_the_same_file_from_anywhere(tmp_path, acr_home, fakes_on_path):
    from conftest import init_repo

    proj = init_repo(tmp_path / "proj", {"a.py": "x = 1\n"})
    write(proj, GOOD, "team.yaml")
    (proj / ".acr.toml").write_text('profile = "./team.yaml"\n')
    assert acr("trust", cwd=proj).returncode == 0  # (an untrusted file may not name a profile file)
    (proj / "sub" / "deeper").mkdir(parents=True)
    r = acr("profiles", "show", "--json", cwd=proj / "sub" / "deeper")
    assert r.returncode == 0, r.stderr
    r = acr("config", "set", "profile", "./team.yaml", cwd=proj)
    assert r.returncode == 0, r.stderr
    stored = (acr_home / "config" / "config.toml").read_text()
    assert f'profile = "{proj / "team.yaml"}"' in stored
    assert acr("route", "fix add", "--json", cwd=tmp_path).returncode == 0  # from outside the project too


def test_an_empty_profile_name_is_refused(tmp_path, acr_home):
    r = acr("profiles", "show", "")
    assert r.returncode == 2 and "empty profile name" in r.stderr and "available profiles" in r.stderr


@pytest.mark.parametrize("broken", ["dangling", "directory"])
def test_a_broken_user_profile_is_an_error_never_the_built_in_it_shadows(tmp_path, broken):
    user = tmp_path / "profiles"
    user.mkdir()
    mine = user / "balanced.yaml"
    if broken == "dangling":
        mine.symlink_to(tmp_path / "dotfiles" / "balanced.yaml")  # dotfiles moved away
    else:
        mine.mkdir()
    with pytest.raises(ConfigError) as e:
        profiles.load("balanced", user)
    assert f"your profile {mine} is" in e.value.message
