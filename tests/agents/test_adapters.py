"""Adapters: argv (never a shell string), and parsing each CLI's machine-readable output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES

from acr_cli import agents
from acr_cli.agents.command import CommandAdapter
from acr_cli.domain import Arm
from acr_cli.errors import ConfigError

PROMPT = "fix \"it\" $(rm -rf /) `x`; && \n -- --help"


@pytest.mark.parametrize("name, model", [("claude", "claude-opus-4-6"), ("codex", "gpt-5.4")])
def test_argv_ends_with_the_prompt_after_double_dash(name, model, tmp_path):
    inv = agents.get(name).invocation(PROMPT, Arm(name, model, args=("--extra",)), tmp_path, "workspace-write")
    assert inv.argv[0] == name
    assert inv.argv[-2:] == ["--", PROMPT]
    assert model in inv.argv and "--extra" in inv.argv and inv.stdin is None


def test_opencode_gets_the_prompt_on_stdin(tmp_path):
    # `opencode run` re-quotes message arguments that contain spaces; stdin arrives untouched
    inv = agents.get("opencode").invocation(PROMPT, Arm("opencode", "p/m", args=("--extra",)), tmp_path,
                                            "workspace-write")
    assert inv.stdin == PROMPT and PROMPT not in inv.argv
    assert inv.argv[:2] == ["opencode", "run"] and "--extra" in inv.argv


def test_permissions_map_to_each_cli(tmp_path):
    c = agents.get("claude").invocation("p", Arm("claude", "m"), tmp_path, "workspace-write").argv
    assert c[c.index("--permission-mode") + 1] == "acceptEdits" and any(a.startswith("--allowedTools=") for a in c)
    x = agents.get("codex").invocation("p", Arm("codex", "m"), tmp_path, "read-only").argv
    assert x[x.index("-s") + 1] == "read-only"
    o = agents.get("opencode").invocation("p", Arm("opencode", "m"), tmp_path, "workspace-write")
    assert json.loads(o.env["OPENCODE_PERMISSION"]) == {"edit": "allow", "bash": "allow"}
    assert o.env["PWD"] == str(tmp_path)


def test_unknown_agent_lists_valid_names():
    with pytest.raises(ConfigError) as e:
        agents.get("aider")
    assert "claude" in e.value.hint and "codex" in e.value.hint


def lines(*objs):
    return "\n".join(json.dumps(o) for o in objs)


def test_claude_stream_json():
    out = lines(
        {"type": "system", "subtype": "init", "session_id": "s1"},
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s1",
         "total_cost_usd": 0.042, "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5,
                                            "cache_read_input_tokens": 100, "output_tokens": 7},
         "permission_denials": []})
    r = agents.get("claude").parse(out, "", 0)
    assert (r.tokens_in, r.tokens_out, r.cost_usd, r.session_id, r.text) == (115, 7, 0.042, "s1", "done")
    assert r.error is None and r.failed is None


def test_claude_all_tools_denied_is_failed_and_api_errors_are_errors():
    denied = lines(
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Write", "input": {}}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "I could not write",
         "permission_denials": [{"tool_name": "Write"}], "usage": {"input_tokens": 1, "output_tokens": 1}})
    r = agents.get("claude").parse(denied, "", 0)
    assert r.failed and "denied" in r.failed and r.error is None
    err = lines({"type": "result", "subtype": "success", "is_error": True, "api_error_status": 500,
                 "result": "API Error: 500"})
    assert "500" in agents.get("claude").parse(err, "", 1).error
    assert agents.get("claude").parse("", "Error: Invalid API key", 1).error == "Error: Invalid API key"


def test_codex_events():
    out = lines({"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
                {"type": "item.completed", "item": {"type": "command_execution", "command": "ls", "exit_code": 0}},
                {"type": "item.completed", "item": {"type": "agent_message", "text": "ok"}},
                {"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 100,
                                                     "output_tokens": 20}},
                {"type": "turn.completed", "usage": {"input_tokens": 50, "output_tokens": 5}})
    r = agents.get("codex").parse(out, "Reading additional input from stdin...", 0)
    assert (r.tokens_in, r.tokens_out, r.cost_usd, r.session_id, r.text, r.error) == (350, 25, None, "t1", "ok", None)
    failed = lines({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}})
    assert "401" in agents.get("codex").parse(failed, "", 1).error


def test_opencode_events_sum_steps_and_zero_cost_is_unknown():
    step = {"type": "step_finish", "sessionID": "ses", "part": {"tokens": {"input": 100, "output": 10,
                                                                          "cache": {"read": 50, "write": 0}},
                                                               "cost": 0.01}}
    out = lines({"type": "text", "sessionID": "ses", "part": {"text": "hello"}}, step, step)
    r = agents.get("opencode").parse(out, "", 0)
    assert (r.tokens_in, r.tokens_out, r.cost_usd, r.session_id, r.text) == (300, 20, 0.02, "ses", "hello")
    zero = lines({**step, "part": {**step["part"], "cost": 0}})
    assert agents.get("opencode").parse(zero, "", 0).cost_usd is None
    err = lines({"type": "error", "error": {"name": "APIError", "data": {"message": "boom", "statusCode": 500}}})
    assert agents.get("opencode").parse(err, "", 1).error == "API error 500: boom"


def test_generic_command_adapter(tmp_path):
    spec = {"command": ["mycli", "--model", "{model}", "--msg={prompt}"], "output": "json",
            "fields": {"tokens_in": "usage.in", "tokens_out": "usage.out", "cost_usd": "cost", "text": "answer"}}
    a = CommandAdapter("mycli", spec)
    inv = a.invocation("use {braces} $(x)", Arm("mycli", "m1", args=("-v",)), tmp_path, "workspace-write")
    assert inv.argv == ["mycli", "-v", "--model", "m1", "--msg=use {braces} $(x)"]
    r = a.parse('noise\n{"usage": {"in": 5, "out": 2}, "cost": 0.5, "answer": "ok"}', "", 0)
    assert (r.tokens_in, r.tokens_out, r.cost_usd, r.text, r.error) == (5, 2, 0.5, "ok", None)
    assert a.parse("", "boom\n", 3).error == "boom"




@pytest.mark.skipif(not SAMPLES.is_dir(), reason="no recorded CLI samples")
@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.stdout")) if SAMPLES.is_dir() else [])
def test_recorded_real_cli_output_parses(sample):
    """Outputs recorded from the real CLIs against a mock API (see tests/samples/README.md)."""
    meta = json.loads((SAMPLES / sample.replace(".stdout", ".json")).read_text())
    r = agents.get(meta["agent"]).parse((SAMPLES / sample).read_text(), "", meta["exit_code"])
    for field, want in meta["expect"].items():
        got = getattr(r, field)
        if field in ("error", "failed") and isinstance(want, bool):
            assert bool(got) == want, (field, got)
        else:
            assert got == want, (field, got)


def test_interactive_sessions_yield_tokens_from_the_cli_session_files():
    """Recorded session files of the real CLIs (claude transcript, codex rollout, opencode export) after a tool call."""
    from acr_cli.agents.claude import transcript_usage
    from acr_cli.agents.codex import rollout_usage
    from acr_cli.agents.opencode import export_usage

    assert transcript_usage((SAMPLES / "claude_tool.transcript.jsonl").read_text()) == (2468, 112)
    assert rollout_usage((SAMPLES / "codex_tool.rollout.jsonl").read_text()) == (2468, 112)
    assert rollout_usage("not json\n") is None
    assert export_usage((SAMPLES / "opencode_tool.export.json").read_text()) == (2468, 112)
    assert export_usage("Exporting session: x\n") is None


def test_opencode_session_is_the_newest_of_this_project_since_the_start():
    from acr_cli.agents.opencode import newest_session

    listing = json.loads((SAMPLES / "opencode_tool.sessions.json").read_text())
    project, updated = Path(listing[0]["directory"]), listing[0]["updated"] / 1000
    older = {**listing[0], "id": "ses_older", "updated": listing[0]["updated"] - 60_000}
    other = {**listing[0], "id": "ses_elsewhere", "directory": "/somewhere/else", "updated": 2e12}
    text = json.dumps([other, older, *listing])
    assert newest_session(text, project, updated - 5) == listing[0]["id"]
    assert newest_session(text, project, updated + 5) is None  # the session ended before this run started
    assert newest_session(json.dumps([older]), project, updated - 5) is None
    assert newest_session("not json", project, 0) is None


@pytest.mark.parametrize("name", ["claude", "codex", "opencode"])
def test_the_live_progress_line_of_each_cli_names_its_tool_calls_and_skips_what_it_cannot_read(name):
    """`acr run` shows one line per agent event; an event of a shape the CLI never documented (or a
    line that is not an object at all) is skipped, never a crash mid-run."""
    stream = (SAMPLES / f"{name}_tool{'_stream' if name == 'claude' else ''}.stdout").read_text().splitlines()
    shown = [s for s in (agents.get(name).describe(line) for line in stream) if s]
    assert shown, name
    assert any(":" in s or s.startswith("$ ") for s in shown), shown  # a tool call with what it ran or touched
    odd = ["", "not json", "[1, 2]", "42", '"text"', "{", '{"type": "assistant", "message": "x"}',
           '{"type": "assistant", "message": {"content": ["x", 3]}}', '{"type": "item.completed", "item": [1]}',
           '{"type": "tool_use", "part": "x"}', '{"type": "tool_use", "part": {"state": []}}']
    for line in odd:
        out = agents.get(name).describe(line)
        assert out is None or isinstance(out, str), (name, line)
