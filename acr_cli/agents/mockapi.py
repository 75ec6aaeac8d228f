#!/usr/bin/env python3
"""A scripted mock model API on 127.0.0.1 for running the real agent CLIs offline.

Used by ``acr doctor --check`` (does acr still understand the installed CLI?) and by the
real-CLI integration tests (``pytest -m agents``).

Standard library only (http.server + threading). One server speaks three wire
protocols at once, so the same instance can serve any of the three CLIs:

  * Anthropic Messages     POST /v1/messages[?beta=true]   (claude)
  * OpenAI Responses       POST /v1/responses              (codex)
  * OpenAI Chat Completions POST /v1/chat/completions      (opencode, openai-compatible)

plus the side endpoints the CLIs touch: ``HEAD /`` / ``GET /`` (claude's
connectivity probe), ``POST /v1/messages/count_tokens``, ``GET /v1/models``.
Anything else is answered 404 (JSON) and logged (opencode, for example, asks
``npm_config_registry`` for plugin packages).  Paths are accepted with or
without the ``/v1`` prefix.

Behaviour is scripted.  A *script* is a list of steps consumed in order by
*agent requests*:

  text(t)                    answer with the text ``t``
  tool_call(cmd, final=t)    answer with ONE tool call that runs the shell
                             command ``cmd`` (claude: ``Bash`` tool_use; codex:
                             ``exec_command`` function_call; opencode: ``bash``
                             tool_calls).  The next request carrying
                             the tool result is answered with the text ``t``
                             and only then is the step consumed.
  http_error(status)         answer with an HTTP error (500, 401, 429, ...)
                             with a provider-shaped JSON error body
  stall()                    send 200 + SSE headers, then nothing, until the
                             server shuts down (stall(partial=True): also send
                             the first stream event; stall(headers=False): send
                             nothing at all, not even the status line)
  plan_limit(resets_at)     answer as the provider does when a plan's usage
                             limit is reached, resetting at ``resets_at``
                             (epoch seconds): see limit_response()

How a request is classified (stateless, so retries and concurrency are safe):

  * A request whose body carries no ``tools`` is *auxiliary* (opencode's title
    generation, small helper calls).  It is answered with ``aux_text`` and does
    NOT consume a step.  (Pass ``aux_follows_script=True`` to make errors and
    stalls apply to auxiliary requests too.)
  * A request whose last conversation item is a tool result (Anthropic
    ``tool_result`` block, Responses ``function_call_output`` item, chat
    ``role: tool`` message) is the follow-up of a tool step: it gets the final
    text of the pending tool step, which is then consumed.
  * Any other request takes the current step.  A tool step stays current until
    its result arrives, so a retried first request gets the same tool call.
  * When the script is exhausted the last step is repeated (so ``[http_error(500)]``
    answers every retry with 500), except that an exhausted tool step answers
    with its final text (this avoids endless tool loops).

Requests with ``"stream": false`` get the equivalent non-streaming JSON body
(the CLIs stream; claude falls back to a non-streaming request after its
5-minute stream watchdog fires).

Tool names the real CLIs accept (observed with claude 2.1.197, codex-cli
0.169.0, opencode 1.18.33): claude ``Bash{command}``; codex ``exec_command{cmd}``
(``shell``/``shell_command`` get "unsupported call", ``local_shell_call`` is
ignored); opencode ``bash{command}``.  The mock picks whichever of these the
request's ``tools`` list offers.

Token usage reported in every successful response is ``usage=(input, output)``
(default 1234 / 56), configurable per server and per step, so a caller can
check its token parsing.

Python API::

    with MockServer(script=[tool_call("echo hi > created.txt", final="Done.")]) as srv:
        run_cli(base_url=srv.url)           # e.g. http://127.0.0.1:43123
        assert srv.requests[-1]["path"] == "/v1/messages"

Command line (for trying a CLI by hand)::

    python -m acr_cli.agents.mockapi --port 0 --mode tool --lifetime 600 --log req.jsonl

The command line prints ``MOCKAPI_URL=http://127.0.0.1:PORT`` on its first line.
Modes: text, tool, stall, stall-partial, hang (no response at all), limit (a plan's
usage limit, resetting in two hours), or an HTTP status such as 500 / 401 / 429.

Each logged request (``srv.requests`` and the JSONL file) is a dict:
``{n, time, method, path, query, headers (secrets redacted), body (parsed JSON),
response: {kind: probe|models|count_tokens|not_found|aux|text|tool_call|final|
error|limit|stall, status, ...}}``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator, Optional
from urllib.parse import parse_qs, urlsplit

DEFAULT_USAGE = (1234, 56)
DEFAULT_MODEL_IDS = ("claude-sonnet-4-5", "gpt-5.5", "mock-model")
# Header names whose values never go into the log.
SECRET_HEADERS = {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}


# --------------------------------------------------------------------------- steps


@dataclass
class Step:
    """One scripted behaviour.  Build with text(), tool_call(), http_error(), stall(), plan_limit()."""

    kind: str  # "text" | "tool" | "error" | "stall" | "limit"
    text: str = ""  # answer text (kind text) or final text after the tool result (kind tool)
    command: str = ""  # shell command (kind tool)
    status: int = 200  # HTTP status (kind error)
    usage: Optional[tuple[int, int]] = None  # (input, output) tokens; None = server default
    partial: bool = False  # stall: also send the first stream event before stalling
    headers: bool = True  # stall: send status + headers (False = never answer at all)
    tool_name: Optional[str] = None  # tool: force this tool name instead of picking the shell tool
    tool_args: Optional[dict] = None  # tool: force these arguments (with tool_name)
    resets_at: Optional[int] = None  # limit: when the plan's limit resets (epoch seconds)


def text(answer: str = "Hello from the mock model.", usage: Optional[tuple[int, int]] = None) -> Step:
    return Step("text", text=answer, usage=usage)


def tool_call(command: str, final: str = "Done: the command ran.", usage: Optional[tuple[int, int]] = None,
              tool_name: Optional[str] = None, tool_args: Optional[dict] = None) -> Step:
    """One shell tool call.  tool_name/tool_args force a specific call (e.g. a tool the CLI lacks)."""
    return Step("tool", text=final, command=command, usage=usage, tool_name=tool_name, tool_args=tool_args)


def http_error(status: int = 500) -> Step:
    return Step("error", status=status)


def stall(partial: bool = False, headers: bool = True) -> Step:
    return Step("stall", partial=partial, headers=headers)


def plan_limit(resets_at: int) -> Step:
    """A plan's usage limit reached, resetting at ``resets_at`` (epoch seconds): see limit_response()."""
    return Step("limit", status=429, resets_at=int(resets_at))


def script_for_mode(mode: str, answer: str = "Hello from the mock model.",
                    command: str = "echo hi > created.txt", final: str = "Done: created created.txt.") -> list[Step]:
    """Map a simple mode name (CLI --mode) to a script."""
    if mode == "text":
        return [text(answer)]
    if mode == "tool":
        return [tool_call(command, final=final)]
    if mode == "stall":
        return [stall()]
    if mode == "stall-partial":
        return [stall(partial=True)]
    if mode == "limit":
        return [plan_limit(int(time.time()) + 2 * 3600)]
    if mode == "hang":
        return [stall(headers=False)]
    if mode.isdigit():  # "500", "401", "429", ...
        return [http_error(int(mode))]
    raise ValueError(f"unknown mode {mode!r} (text, tool, stall, stall-partial, hang, limit, or an HTTP status)")


# --------------------------------------------------------------------------- request inspection


def _has_tools(body: dict) -> bool:
    return bool(body.get("tools"))


def _has_pending_tool_result(api: str, body: dict) -> bool:
    """True if the conversation ends with a tool result (i.e. the model must now react to it)."""
    if api == "anthropic":
        msgs = body.get("messages") or []
        if not msgs:
            return False
        last = msgs[-1]
        content = last.get("content")
        return last.get("role") == "user" and isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    if api == "responses":
        items = body.get("input")
        if not isinstance(items, list):
            return False
        # Tool outputs appended after the last user message.
        for item in reversed(items):
            if not isinstance(item, dict):
                continue
            t = item.get("type", "message")
            if t.endswith("_call_output"):  # function_call_output, local_shell_call_output, custom_tool_call_output
                return True
            if t == "message" and item.get("role") == "user":
                return False
        return False
    if api == "chat":
        msgs = body.get("messages") or []
        return bool(msgs) and msgs[-1].get("role") == "tool"
    return False


def _tool_specs(api: str, body: dict) -> list[tuple[str, dict, str]]:
    """(name, json-schema parameters, type) for each tool the request offers."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if api == "anthropic":
            out.append((t.get("name", ""), t.get("input_schema") or {}, t.get("type", "custom")))
        elif api == "chat":
            fn = t.get("function") or {}
            out.append((fn.get("name", ""), fn.get("parameters") or {}, t.get("type", "function")))
        else:  # responses: {"type":"function","name":...,"parameters":...} or {"type":"local_shell"}
            out.append((t.get("name", t.get("type", "")), t.get("parameters") or {}, t.get("type", "function")))
    return out


# Preferred shell tools, in order, per protocol.
SHELL_TOOL_NAMES = ("Bash", "bash", "exec_command", "shell_command", "shell", "local_shell")


def _shell_call(api: str, body: dict, command: str) -> tuple[str, dict, str]:
    """Pick the request's shell tool and build its arguments: (name, arguments, tool type)."""
    specs = _tool_specs(api, body)
    by_name = {name: (params, typ) for name, params, typ in specs}
    name = next((n for n in SHELL_TOOL_NAMES if n in by_name), None)
    if name is None:  # fall back to the protocol's usual name
        name = {"anthropic": "Bash", "chat": "bash", "responses": "exec_command"}[api]
        params, typ = {}, "function"
    else:
        params, typ = by_name[name]
    if typ == "local_shell":
        return name, {"command": ["bash", "-lc", command]}, typ
    props = params.get("properties") or {}
    key = "cmd" if "cmd" in props else "command"
    value: Any = command
    if (props.get(key) or {}).get("type") == "array":  # codex "shell": argv list
        value = ["bash", "-lc", command]
    args: dict[str, Any] = {key: value}
    # Fill other required parameters with harmless values (opencode's bash wants "description").
    for req in params.get("required") or []:
        if req in args:
            continue
        ptype = (props.get(req) or {}).get("type")
        if req == "description":
            args[req] = "Run a shell command"
        elif ptype in ("integer", "number"):
            args[req] = 60000 if "timeout" in req else 0
        elif ptype == "boolean":
            args[req] = False
        elif ptype == "array":
            args[req] = []
        else:
            args[req] = ""
    return name, args, typ


# --------------------------------------------------------------------------- SSE builders


def _sse(event: Optional[str], data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _chunks(s: str, n: int = 12) -> list[str]:
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


def anthropic_events(model: str, msg_id: str, *, answer: Optional[str] = None,
                     tool: Optional[tuple[str, str, dict]] = None, usage=DEFAULT_USAGE) -> Iterator[bytes]:
    """Anthropic Messages SSE.  Either a text answer or one tool_use (name, id, input)."""
    inp, outp = usage
    u0 = {"input_tokens": inp, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": u0}})
    if tool is None:
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        yield _sse("ping", {"type": "ping"})
        for piece in _chunks(answer or ""):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": piece}})
        stop = "end_turn"
    else:
        name, tid, args = tool
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}}})
        for piece in _chunks(json.dumps(args), 20):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta", "partial_json": piece}})
        stop = "tool_use"
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"input_tokens": inp, "output_tokens": outp,
                                           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_message(model: str, msg_id: str, *, answer=None, tool=None, usage=DEFAULT_USAGE) -> dict:
    """Non-streaming Anthropic Messages response."""
    if tool is None:
        content, stop = [{"type": "text", "text": answer or ""}], "end_turn"
    else:
        content, stop = [{"type": "tool_use", "id": tool[1], "name": tool[0], "input": tool[2]}], "tool_use"
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def _responses_usage(usage) -> dict:
    return {"input_tokens": usage[0], "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage[0] + usage[1]}


def responses_output_item(seq: int, *, answer=None, tool=None) -> dict:
    """The completed output item (message, function_call or local_shell_call)."""
    if tool is None:
        return {"id": f"msg_mock_{seq}", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": answer or "", "annotations": []}]}
    name, call_id, args, typ = tool
    if typ == "local_shell":
        return {"id": f"lsh_mock_{seq}", "type": "local_shell_call", "call_id": call_id, "status": "completed",
                "action": {"type": "exec", "command": args["command"], "env": {}}}
    return {"id": f"fc_mock_{seq}", "type": "function_call", "status": "completed", "call_id": call_id,
            "name": name, "arguments": json.dumps(args)}


def responses_events(model: str, resp_id: str, seq: int, *, answer=None, tool=None,
                     usage=DEFAULT_USAGE) -> Iterator[bytes]:
    """OpenAI Responses SSE (what codex consumes).  tool = (name, call_id, args, tool type)."""
    n = 0

    def ev(kind: str, payload: dict) -> bytes:
        nonlocal n
        n += 1
        return _sse(kind, {"type": kind, "sequence_number": n, **payload})

    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
    yield ev("response.created", {"response": {**base, "status": "in_progress", "output": []}})
    yield ev("response.in_progress", {"response": {**base, "status": "in_progress", "output": []}})
    item = responses_output_item(seq, answer=answer, tool=tool)
    if tool is None:
        started = {**item, "status": "in_progress", "content": []}
        yield ev("response.output_item.added", {"output_index": 0, "item": started})
        yield ev("response.content_part.added", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                 "part": {"type": "output_text", "text": "", "annotations": []}})
        for piece in _chunks(answer or ""):
            yield ev("response.output_text.delta", {"item_id": item["id"], "output_index": 0,
                                                    "content_index": 0, "delta": piece})
        yield ev("response.output_text.done", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                               "text": answer or ""})
        yield ev("response.content_part.done", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                "part": item["content"][0]})
    else:
        yield ev("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress"}})
        if item["type"] == "function_call":
            yield ev("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": 0,
                                                                "delta": item["arguments"]})
            yield ev("response.function_call_arguments.done", {"item_id": item["id"], "output_index": 0,
                                                               "arguments": item["arguments"]})
    yield ev("response.output_item.done", {"output_index": 0, "item": item})
    yield ev("response.completed", {"response": {**base, "status": "completed", "output": [item],
                                                 "usage": _responses_usage(usage)}})


def responses_object(model: str, resp_id: str, seq: int, *, answer=None, tool=None, usage=DEFAULT_USAGE) -> dict:
    item = responses_output_item(seq, answer=answer, tool=tool)
    return {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": [item], "usage": _responses_usage(usage)}


def _chat_usage(usage) -> dict:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1],
            "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}


def chat_events(model: str, cid: str, *, answer=None, tool=None, usage=DEFAULT_USAGE) -> Iterator[bytes]:
    """OpenAI chat-completions SSE (what opencode's openai-compatible provider consumes)."""
    created = int(time.time())

    def chunk(delta: Optional[dict], finish=None, usage_obj=None) -> bytes:
        obj: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                               "choices": [] if delta is None else
                               [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage_obj is not None:
            obj["usage"] = usage_obj
        return _sse(None, obj)

    yield chunk({"role": "assistant", "content": ""})
    if tool is None:
        for piece in _chunks(answer or ""):
            yield chunk({"content": piece})
        finish = "stop"
    else:
        name, call_id, args = tool
        yield chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in _chunks(json.dumps(args), 20):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        finish = "tool_calls"
    yield chunk({}, finish)
    yield chunk(None, usage_obj=_chat_usage(usage))  # usage chunk (stream_options.include_usage style)
    yield _sse(None, "[DONE]")


def chat_object(model: str, cid: str, *, answer=None, tool=None, usage=DEFAULT_USAGE) -> dict:
    if tool is None:
        msg, finish = {"role": "assistant", "content": answer or ""}, "stop"
    else:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": tool[1], "type": "function", "function": {"name": tool[0], "arguments": json.dumps(tool[2])}}]}
        finish = "tool_calls"
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": _chat_usage(usage)}


def error_body(api: str, status: int) -> dict:
    """A provider-shaped JSON error body."""
    if api == "anthropic":
        etype = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                 429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        msg = "invalid x-api-key" if status == 401 else f"mock error {status}"
        return {"type": "error", "error": {"type": etype, "message": msg}}
    if status == 401:
        return {"error": {"message": "Incorrect API key provided (mock).", "type": "invalid_request_error",
                          "param": None, "code": "invalid_api_key"}}
    etype = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": f"mock error {status}", "type": etype, "param": None, "code": None}}


# --------------------------------------------------------------------------- server


def limit_response(api: str, resets_at: int, now: Optional[float] = None) -> tuple[dict[str, str], dict]:
    """Headers and JSON body of the 429 a provider sends when a plan's usage limit is reached.

    Each API's own shape, as its CLI reads it:

    * Anthropic (claude on a claude.ai plan): ``anthropic-ratelimit-unified-status: rejected`` with
      ``anthropic-ratelimit-unified-reset`` (epoch seconds) and the window that ran out
      (``...-representative-claim``); claude reads these headers, not the body.
    * OpenAI Responses (codex signed in with ChatGPT): an error of type ``usage_limit_reached`` with
      ``plan_type``, ``resets_at`` (epoch seconds) and ``resets_in_seconds``, and the
      ``x-codex-primary-*`` headers of the window that ran out.
    * Chat Completions (opencode's OpenAI-compatible providers): a coding plan's 429 whose message names the
      reset with its offset (the shape of Z.ai's GLM coding plan, written in UTC+8).
    """
    now = time.time() if now is None else now
    seconds = max(int(resets_at - now), 0)
    if api == "anthropic":
        headers = {"anthropic-ratelimit-unified-status": "rejected",
                   "anthropic-ratelimit-unified-reset": str(resets_at),
                   "anthropic-ratelimit-unified-representative-claim": "five_hour",
                   "anthropic-ratelimit-unified-5h-status": "rejected",
                   "anthropic-ratelimit-unified-5h-reset": str(resets_at),
                   "anthropic-ratelimit-unified-5h-utilization": "1.0",
                   "anthropic-ratelimit-unified-fallback": "unavailable",
                   "retry-after": str(seconds)}
        return headers, {"type": "error", "error": {"type": "rate_limit_error",
                                                    "message": "This request would exceed your account's rate limit."}}
    if api == "responses":
        headers = {"x-codex-primary-used-percent": "100", "x-codex-primary-window-minutes": "300",
                   "x-codex-primary-reset-at": str(resets_at), "x-codex-primary-reset-after-seconds": str(seconds)}
        return headers, {"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
                                   "plan_type": "plus", "resets_at": resets_at, "resets_in_seconds": seconds}}
    local = datetime.fromtimestamp(resets_at, timezone(timedelta(hours=8)))
    message = (f"You have exceeded the 5-hour usage quota. It will reset at {local:%Y-%m-%d %H:%M:%S} +0800 CST.")
    return {}, {"error": {"code": "1308", "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, fmt, *args):  # keep stderr quiet; requests go to MockServer.requests
        if self.server.mock.verbose:
            sys.stderr.write("mockapi: " + (fmt % args) + "\n")

    # ---- plumbing

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc == "gzip":
            data = gzip.decompress(data)
        elif enc == "deflate":
            data = zlib.decompress(data)
        return data

    def _send_json(self, status: int, obj: Any, head_only: bool = False,
                   extra_headers: Optional[dict[str, str]] = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, events: Iterable[bytes]) -> None:
        self._start_stream()
        try:
            for e in events:
                self._write_chunk(e)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stall(self, first_event: Optional[bytes], headers: bool = True) -> None:
        """Headers (and maybe one event), then silence until the server stops."""
        if not headers:  # never answer at all
            self.server.mock._stop.wait()
            self.close_connection = True
            return
        self._start_stream()
        try:
            if first_event:
                self._write_chunk(first_event)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.server.mock._stop.wait()
        self.close_connection = True

    # ---- verbs

    def do_HEAD(self):
        self.server.mock._log(self, None, {"kind": "probe", "status": 200})
        self._send_json(200, {}, head_only=True)

    def do_GET(self):
        path = urlsplit(self.path).path
        p = path[3:] if path.startswith("/v1/") else path
        if path in ("/", ""):
            self.server.mock._log(self, None, {"kind": "probe", "status": 200})
            return self._send_json(200, {"ok": True})
        if p == "/models":
            ids = self.server.mock.model_ids
            data = [{"id": m, "object": "model", "type": "model", "display_name": m, "created": 1700000000,
                     "created_at": "2025-01-01T00:00:00Z", "owned_by": "mock"} for m in ids]
            self.server.mock._log(self, None, {"kind": "models", "status": 200})
            return self._send_json(200, {"object": "list", "data": data, "has_more": False,
                                         "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None})
        self.server.mock._log(self, None, {"kind": "not_found", "status": 404})
        self._send_json(404, {"error": {"type": "not_found_error", "message": f"mock: no route GET {path}"}})

    def do_POST(self):
        mock = self.server.mock
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = urlsplit(self.path).path
        p = path[3:] if path.startswith("/v1/") else path
        api = {"/messages": "anthropic", "/responses": "responses", "/chat/completions": "chat"}.get(p)
        if p == "/messages/count_tokens":
            mock._log(self, body, {"kind": "count_tokens", "status": 200})
            return self._send_json(200, {"input_tokens": mock.usage[0]})
        if api is None:
            mock._log(self, body, {"kind": "not_found", "status": 404})
            return self._send_json(404, {"error": {"type": "not_found_error", "message": f"mock: no route POST {path}"}})
        self._answer(api, body)

    # ---- model turns

    def _answer(self, api: str, body: dict) -> None:
        mock = self.server.mock
        action, step = mock._decide(api, body)
        seq = mock._next_seq()
        model = str(body.get("model") or "mock-model")
        streaming = bool(body.get("stream", api == "responses"))
        usage = (step.usage if step and step.usage else mock.usage)
        events, whole = _builders(api, model, seq)
        if action == "error":
            mock._log(self, body, {"kind": "error", "status": step.status})
            return self._send_json(step.status, error_body(api, step.status))
        if action == "limit":
            headers, limit_body = limit_response(api, step.resets_at)
            mock._log(self, body, {"kind": "limit", "status": 429, "resets_at": step.resets_at})
            return self._send_json(429, limit_body, extra_headers=headers)
        if action == "stall":
            mock._log(self, body, {"kind": "stall", "status": 200 if step.headers else None})
            return self._stall(next(iter(events(answer=""))) if step.partial else None, step.headers)
        answer, tool = None, None
        if action == "tool":
            tool = self._tool_call(api, body, step, seq)
        else:  # "text", "final", "aux"
            answer = step.text if step else mock.aux_text
            mock._log(self, body, {"kind": action, "status": 200, "text": answer})
        if streaming:
            return self._stream(events(answer=answer, tool=tool, usage=usage))
        return self._send_json(200, whole(answer=answer, tool=tool, usage=usage))

    def _tool_call(self, api: str, body: dict, step: Step, seq: int) -> tuple:
        """The shell call the step asks for, in ``api``'s shape (logged): (name, call id, arguments[, type])."""
        name, args, typ = _shell_call(api, body, step.command)
        if step.tool_name:  # forced call
            name, typ = step.tool_name, ("local_shell" if step.tool_name == "local_shell" else "function")
            if step.tool_args is not None:
                args = step.tool_args
            elif typ == "local_shell":
                args = {"command": ["bash", "-lc", step.command]}
        call_id = {"anthropic": f"toolu_mock_{seq}", "responses": f"call_mock_{seq}", "chat": f"call_mock_{seq}"}[api]
        self.server.mock._log(self, body, {"kind": "tool_call", "status": 200, "tool": name, "arguments": args})
        return (name, call_id, args, typ) if api == "responses" else (name, call_id, args)


def _builders(api: str, model: str, seq: int) -> tuple[Callable[..., Iterable[bytes]], Callable[..., dict]]:
    """``api``'s answer for turn ``seq`` as a stream of events and as one object; each takes ``answer``,
    ``tool`` and ``usage``."""
    if api == "anthropic":
        return (partial(anthropic_events, model, f"msg_mock_{seq}"), partial(anthropic_message, model, f"msg_mock_{seq}"))
    if api == "responses":
        return (partial(responses_events, model, f"resp_mock_{seq}", seq),
                partial(responses_object, model, f"resp_mock_{seq}", seq))
    return partial(chat_events, model, f"chatcmpl-mock-{seq}"), partial(chat_object, model, f"chatcmpl-mock-{seq}")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    mock: "MockServer"

    def handle_error(self, request, client_address):
        # Clients killed mid-request (timeouts, stalls) reset the connection: not worth a traceback.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class MockServer:
    """Scripted mock model API on 127.0.0.1 (see module docstring).

    Args:
        script: list of Step (text(), tool_call(), http_error(), stall()); default [text()].
        mode: alternative to ``script``: "text", "tool", "stall", "stall-partial", "hang", "limit", "500", ...
        port: 0 = ephemeral.
        lifetime: seconds after which the server shuts itself down (None = never).
        log_path: optional JSONL file receiving every logged request.
        usage: (input_tokens, output_tokens) reported by default.
        aux_text: answer to auxiliary requests (requests without tools).
        aux_follows_script: if True, auxiliary requests are treated like agent requests.
    """

    def __init__(self, script: Optional[list[Step]] = None, *, mode: Optional[str] = None, host: str = "127.0.0.1",
                 port: int = 0, lifetime: Optional[float] = 300.0, log_path: Optional[str] = None,
                 usage: tuple[int, int] = DEFAULT_USAGE, aux_text: str = "Mock session title",
                 aux_follows_script: bool = False, model_ids: Iterable[str] = DEFAULT_MODEL_IDS,
                 verbose: bool = False):
        if script is None:
            script = script_for_mode(mode) if mode else [text()]
        if not script:
            raise ValueError("script must not be empty")
        self.script = list(script)
        self.usage = usage
        self.aux_text = aux_text
        self.aux_follows_script = aux_follows_script
        self.model_ids = list(model_ids)
        self.lifetime = lifetime
        self.log_path = log_path
        self.verbose = verbose
        self.requests: list[dict] = []  # every request, in arrival order
        self._lock = threading.Lock()
        self._index = 0  # current step
        self._seq = 0
        self._stop = threading.Event()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.mock = self
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[threading.Timer] = None

    # ---- lifecycle

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base URL without /v1 (claude's ANTHROPIC_BASE_URL); add "/v1" for codex and opencode."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MockServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="mockapi", daemon=True)
        self._thread.start()
        if self.lifetime:
            self._timer = threading.Timer(self.lifetime, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()  # releases stalled handlers
        if self._timer:
            self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the server stops (lifetime elapsed or stop()); True if stopped."""
        return self._stop.wait(timeout)

    def __enter__(self) -> "MockServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- inspection helpers

    def model_requests(self) -> list[dict]:
        """Only the model-turn requests (messages / responses / chat completions)."""
        return [r for r in self.requests if r["response"]["kind"] in ("text", "final", "aux", "tool_call",
                                                                      "error", "stall", "limit")]

    # ---- internals

    def _next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def _decide(self, api: str, body: dict) -> tuple[str, Optional[Step]]:
        """Return (action, step); action in text|final|tool|error|stall|limit|aux."""
        if not _has_tools(body) and not self.aux_follows_script:
            return "aux", None
        result = _has_pending_tool_result(api, body)
        with self._lock:
            last = len(self.script) - 1
            if result:
                # Follow-up of a tool step: answer its final text and consume it.
                i = min(self._index, last)
                step = self.script[i]
                if step.kind == "tool":
                    self._index = i + 1
                    return "final", step
                # A tool result we did not expect (e.g. an earlier step's retry): answer the current step.
            if self._index > last:  # exhausted: repeat the last step (a tool step repeats its final text)
                step = self.script[last]
                return ("final" if step.kind == "tool" else step.kind), step
            step = self.script[self._index]
            if step.kind == "tool":
                return "tool", step  # consumed when its result comes back
            self._index += 1
            return step.kind, step

    def _log(self, handler: BaseHTTPRequestHandler, body: Any, response: dict) -> None:
        parts = urlsplit(handler.path)
        headers = {}
        for k, v in handler.headers.items():
            if k.lower() in SECRET_HEADERS:
                scheme = v.split(" ", 1)[0] if " " in v else ""
                v = (scheme + " " if scheme else "") + "<redacted>"
            headers[k] = v
        rec = {"time": round(time.time(), 3), "method": handler.command, "path": parts.path,
               "query": {k: v if len(v) > 1 else v[0] for k, v in parse_qs(parts.query).items()},
               "headers": headers, "body": body, "response": response}
        with self._lock:
            rec["n"] = len(self.requests) + 1
            self.requests.append(rec)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec) + "\n")


# --------------------------------------------------------------------------- CLI


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Scripted mock model API (Anthropic / OpenAI Responses / chat).")
    ap.add_argument("--port", type=int, default=0, help="port (0 = ephemeral)")
    ap.add_argument("--mode", default="text",
                    help="text | tool | stall | stall-partial | hang | limit | HTTP status (500, 401...)")
    ap.add_argument("--text", default="Hello from the mock model.", help="answer for --mode text")
    ap.add_argument("--command", default="echo hi > created.txt", help="shell command for --mode tool")
    ap.add_argument("--final", default="Done: created created.txt.", help="final text after the tool result")
    ap.add_argument("--usage", default="1234,56", help="input,output tokens reported")
    ap.add_argument("--lifetime", type=float, default=600.0, help="auto-shutdown after N seconds (0 = never)")
    ap.add_argument("--log", default=None, help="append every request to this JSONL file")
    ap.add_argument("--aux-follows-script", action="store_true", help="apply the script to tool-less requests too")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    inp, outp = (int(x) for x in a.usage.split(","))
    srv = MockServer(script_for_mode(a.mode, a.text, a.command, a.final), port=a.port,
                     lifetime=a.lifetime or None, log_path=a.log, usage=(inp, outp),
                     aux_follows_script=a.aux_follows_script, verbose=a.verbose)
    srv.start()
    print(f"MOCKAPI_URL={srv.url}", flush=True)
    try:
        srv.wait()
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
