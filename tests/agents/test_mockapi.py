"""The mock model API used by `acr doctor --check` and the real-CLI tests."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from acr_cli.agents.mockapi import MockServer, plan_limit, text, tool_call


def _post(url: str, body: dict, timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "x-api-key": "secret-key"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _sse_data(raw: bytes) -> list[Any]:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            d = line[6:]
            out.append(d if d == "[DONE]" else json.loads(d))
    return out


def test_mock_api_speaks_three_protocols_and_scripted_failures() -> None:
    cmd = "echo hi > created.txt"
    tools_a = [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                                                 "required": ["command"]}}]
    tools_r = [{"type": "function", "name": "exec_command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]
    tools_c = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command", "description"]}}}]

    # Anthropic: probe, tool call, tool result -> final, usage, count_tokens, models.
    with MockServer(script=[tool_call(cmd, final="All done."), text("second")], lifetime=30) as srv:
        with urllib.request.urlopen(urllib.request.Request(srv.url + "/", method="HEAD"), timeout=5) as r:
            assert r.status == 200
        st, raw = _post(srv.url + "/v1/messages?beta=true", {"model": "m", "stream": True, "tools": tools_a,
                                                             "messages": [{"role": "user", "content": "go"}]})
        ev = _sse_data(raw)
        assert st == 200 and ev[1]["content_block"]["type"] == "tool_use", ev
        args = json.loads("".join(e["delta"]["partial_json"] for e in ev if e["type"] == "content_block_delta"))
        assert args == {"command": cmd}, args
        assert ev[-2]["usage"]["output_tokens"] == 56 and ev[0]["message"]["usage"]["input_tokens"] == 1234
        tid = ev[1]["content_block"]["id"]
        msgs = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": args}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": ""}]}]
        st, raw = _post(srv.url + "/v1/messages", {"model": "m", "stream": True, "tools": tools_a, "messages": msgs})
        txt = "".join(e["delta"].get("text", "") for e in _sse_data(raw) if e["type"] == "content_block_delta")
        assert txt == "All done.", txt
        st, raw = _post(srv.url + "/v1/messages", {"model": "m", "tools": tools_a,
                                                   "messages": [{"role": "user", "content": "again"}]})
        assert json.loads(raw)["content"][0]["text"] == "second"
        st, raw = _post(srv.url + "/v1/messages/count_tokens", {"model": "m", "messages": []})
        assert json.loads(raw) == {"input_tokens": 1234}
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=5) as r:
            assert json.loads(r.read())["data"]
        assert "secret-key" not in json.dumps(srv.requests)
        assert srv.requests[1]["query"] == {"beta": "true"}

    # Responses: function_call exec_command, then function_call_output -> final text + usage.
    with MockServer(script=[tool_call(cmd, final="Created.")], lifetime=30) as srv:
        st, raw = _post(srv.url + "/v1/responses", {"model": "gpt-5.5", "stream": True, "tools": tools_r,
                                                    "input": [{"type": "message", "role": "user",
                                                               "content": [{"type": "input_text", "text": "go"}]}]})
        ev = _sse_data(raw)
        item = [e for e in ev if e["type"] == "response.output_item.done"][0]["item"]
        assert item["type"] == "function_call" and item["name"] == "exec_command", item
        assert json.loads(item["arguments"]) == {"cmd": cmd}
        st, raw = _post(srv.url + "/v1/responses", {"model": "gpt-5.5", "stream": True, "tools": tools_r, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}, item,
            {"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}]})
        ev = _sse_data(raw)
        done = ev[-1]
        assert done["type"] == "response.completed" and done["response"]["usage"]["input_tokens"] == 1234
        assert done["response"]["output"][0]["content"][0]["text"] == "Created."

    # Chat completions: aux request (no tools) does not consume the tool step.
    with MockServer(script=[tool_call(cmd, final="Finished.")], lifetime=30) as srv:
        st, raw = _post(srv.url + "/v1/chat/completions", {"model": "mock", "stream": True,
                                                           "messages": [{"role": "user", "content": "title?"}]})
        ev = _sse_data(raw)
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in ev[:-1] if c["choices"]) == \
            "Mock session title"
        st, raw = _post(srv.url + "/v1/chat/completions", {"model": "mock", "stream": True, "tools": tools_c,
                                                           "messages": [{"role": "user", "content": "go"}]})
        ev = _sse_data(raw)
        assert ev[-1] == "[DONE]" and ev[-2]["usage"]["prompt_tokens"] == 1234
        assert [c for c in ev[:-1] if c["choices"] and c["choices"][0]["finish_reason"]][0]["choices"][0][
            "finish_reason"] == "tool_calls"
        argstr = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                         for c in ev[:-1] if c["choices"] and "tool_calls" in c["choices"][0]["delta"])
        assert json.loads(argstr) == {"command": cmd, "description": "Run a shell command"}
        st, raw = _post(srv.url + "/v1/chat/completions", {"model": "mock", "tools": tools_c, "messages": [
            {"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_mock_2", "content": "ok"}]})
        assert json.loads(raw)["choices"][0]["message"]["content"] == "Finished."

    # Errors and stall.
    for status in (500, 401):
        with MockServer(mode=str(status), lifetime=30) as srv:
            for url, b in ((srv.url + "/v1/messages", {"tools": tools_a, "messages": []}),
                           (srv.url + "/v1/responses", {"tools": tools_r, "input": []}),
                           (srv.url + "/v1/chat/completions", {"tools": tools_c, "messages": []})):
                st, raw = _post(url, b)
                assert st == status and "error" in json.loads(raw), (st, raw)
    with MockServer(mode="stall", lifetime=30) as srv:
        t0 = time.time()
        req = urllib.request.Request(srv.url + "/v1/responses", method="POST",
                                     data=json.dumps({"tools": tools_r, "input": []}).encode())
        with urllib.request.urlopen(req, timeout=1.0) as r:  # headers arrive...
            assert r.status == 200
            try:
                r.read()  # ...the body never does
                raise AssertionError("stall returned a body")
            except TimeoutError:
                pass
        assert time.time() - t0 < 3
    with MockServer(mode="hang", lifetime=30) as srv:  # not even a status line
        req = urllib.request.Request(srv.url + "/v1/chat/completions", method="POST",
                                     data=json.dumps({"tools": tools_c, "messages": []}).encode())
        try:
            urllib.request.urlopen(req, timeout=0.5)
            raise AssertionError("hang answered")
        except (TimeoutError, urllib.error.URLError):
            pass
        assert srv.requests[-1]["response"]["kind"] == "stall"
    # Lifetime: the server stops by itself.
    srv = MockServer(lifetime=0.5).start()
    assert srv.wait(5), "lifetime did not stop the server"


def test_a_plan_limit_is_answered_as_each_provider_does_with_its_reset() -> None:
    """What each real CLI reads (see limit_response; tests/agents/test_real_clis.py runs the CLIs against it)."""
    reset = int(time.time()) + 7200
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    with MockServer(script=[plan_limit(reset)], lifetime=30) as srv:
        answers = {}
        for path in ("/v1/messages", "/v1/responses", "/v1/chat/completions"):
            req = urllib.request.Request(srv.url + path, data=json.dumps({"model": "m", "tools": tools}).encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=5)
            except urllib.error.HTTPError as e:
                answers[path] = (e.code, e.headers, json.loads(e.read()))
    assert {status for status, _, _ in answers.values()} == {429}
    _, headers, body = answers["/v1/messages"]  # claude on a claude.ai plan reads the headers
    assert headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert int(headers["anthropic-ratelimit-unified-reset"]) == reset and body["error"]["type"] == "rate_limit_error"
    _, headers, body = answers["/v1/responses"]  # codex: the usage_limit_reached error
    assert body["error"]["type"] == "usage_limit_reached" and body["error"]["resets_at"] == reset
    assert 7190 <= body["error"]["resets_in_seconds"] <= 7200 and headers["x-codex-primary-used-percent"] == "100"
    _, _, body = answers["/v1/chat/completions"]  # a coding plan's words, the reset in UTC+8
    assert "usage quota" in body["error"]["message"] and "+0800" in body["error"]["message"]
    assert [q["response"]["kind"] for q in srv.model_requests()] == ["limit"] * 3
