"""A settings file with a value acr cannot use is an error naming the file, the setting and what it expects."""

from __future__ import annotations

import pytest

from acr_cli.config import read_toml
from acr_cli.errors import ConfigError


@pytest.mark.parametrize("line, message", [
    ("timeout = 0", "setting 'timeout': expected at least 1 (seconds), got 0"),
    ("verify_timeout = 0.5", "setting 'verify_timeout': expected at least 1 (seconds), got 0.5"),
    ("max_attempts = 0", "setting 'max_attempts': expected at least 1, got 0"),
    ("max_cost = -1", "setting 'max_cost': expected 0 or more (USD), got -1"),
    ("max_cost = nan", "setting 'max_cost': expected a finite number, got nan"),
    ("time_weight = -0.1", "setting 'time_weight': expected 0 or more (USD a minute), got -0.1"),
    ('baseline = "maybe"', "setting 'baseline': expected check, accept or off, got 'maybe'"),
    ('permissions = "all"', "setting 'permissions': expected one of read-only, workspace-write, full, got 'all'"),
    ('protect = ["tests/**", " "]', 'setting \'protect\': expected globs such as "tests/**", got an empty one'),
    ('arms = ["codex", ""]', "setting 'arms': expected agents or arms such as \"codex\" or \"codex:gpt-5.4\", got an "
                             "empty one"),
    ("arms = []", "setting 'arms': expected at least one arm (leave the setting out to use every arm of the profile)"),
    ('exclude = [""]', "setting 'exclude': expected agents or arms such as"),
    ('policy = "nosuch"', "setting 'policy': policy 'nosuch': expected one of learned, fixed"),
    ('profile = " "', "setting 'profile': expected a non-empty string"),
    ('memory = ""', "setting 'memory': expected a non-empty string"),
    ('memory = "mysql://db/acr"', "setting 'memory': expected a file path or a postgresql:// URL, got 'mysql://db/acr'"),
])
def test_a_value_out_of_bounds_is_explained(tmp_path, line, message):
    path = tmp_path / "config.toml"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError) as e:
        read_toml(path)
    assert e.value.message.startswith(f"{path}: {message}")


@pytest.mark.parametrize("line", ["timeout = 1", "max_cost = 0", 'baseline = "off"', 'arms = ["codex:gpt-5.4"]',
                                  'memory = "postgresql://db/acr"', 'memory = "~/acr.sqlite"', 'policy = "fixed"'])
def test_a_value_within_bounds_is_read(tmp_path, line):
    path = tmp_path / "config.toml"
    path.write_text(line + "\n")
    assert len(read_toml(path)) == 1
