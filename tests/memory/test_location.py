"""Where the memory is: one typed value made by Paths.memory_choice, a file or a server, never a bare string."""

from __future__ import annotations

import pytest

from acr_cli.errors import MemoryFileError
from acr_cli.memory.opening import open_memory
from acr_cli.paths import MemoryLocation, Paths

URL = "postgresql://alice:s3cret@db.example:5432/acr"


def test_a_url_is_a_server_whose_password_no_display_shows(monkeypatch):
    monkeypatch.setenv("ACR_MEMORY", URL)
    location = Paths.from_env().memory_choice()
    assert location.is_server and location.path is None and location.source == "ACR_MEMORY"
    assert location.url == URL  # what acr connects with
    for shown in (location.label, str(location), repr(location), f"{location}"):
        assert "s3cret" not in shown
    assert location.label == "postgresql://alice:***@db.example:5432/acr"


def test_a_file_named_in_config_is_relative_to_the_config_dir_and_says_what_named_it(acr_home):
    p = Paths.from_env()
    p.config_dir.mkdir(parents=True)
    p.config_file.write_text('memory = "team.sqlite"\n')
    location = p.memory_choice()
    assert not location.is_server and location.path == p.config_dir / "team.sqlite"
    assert location.source == str(p.config_file)
    assert p.memory_choice("/tmp/other.sqlite") == MemoryLocation.named("/tmp/other.sqlite", "--memory")


def test_the_default_memory_missing_is_empty_and_a_named_one_missing_is_an_error(tmp_path):
    missing = tmp_path / "nothing.sqlite"
    mem = open_memory(MemoryLocation(missing, source="default"), create=False)
    try:
        assert mem.counts()["tasks"] == 0 and not missing.exists()
    finally:
        mem.close()
    with pytest.raises(MemoryFileError, match="named by --memory"):
        open_memory(MemoryLocation(missing, source="--memory"), create=False)
    assert not missing.exists()
