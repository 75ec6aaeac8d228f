#!/usr/bin/env python3
"""A fake coding-agent CLI for acr's tests and demos.

Installed as ``claude``, ``codex``, ``opencode`` and ``gemini`` (small wrapper scripts in
this folder): it parses the command line the way the real CLI does, then
acts out a *scenario* and prints the real CLI's machine-readable output
format (Claude Code stream-json, Codex ``exec --json`` events, opencode
``run --format json`` events, Gemini CLI ``--output-format stream-json`` events; gemini's API errors
go to stderr as ``[API Error: MESSAGE (Status: STATUS)]`` with exit 1, as its ``handleError`` prints them).

The scenario is a JSON file named by ``FAKE_AGENT_SCENARIO``::

    {"log": "/tmp/calls.jsonl",            # optional: every call appended here
     "rules": [                             # first rule whose `match` fits wins
        {"match": {"agent": "codex", "model": "gpt-5.4"},   # also "call": N, the Nth call of this
                                                            # scenario (1-based, counted from its log)
         "write": {"calc.py": "def add(a, b):\\n    return a + b\\n"},
         "append": {}, "delete": [],
         "commands": [["git", "stash", "pop"]],   # run in the project before the files above, as its shell tool would
         "tokens": [12000, 800], "cost": 0.05,      # cost null: not reported
         "text": "Fixed add()",
         "error": null,        # an API error in the CLI's own format, exit 1: "500" | "401" | "rate_limit" |
                               # "login" | "403" | "quota" | "unknown_model" | "unknown_model_named" |
                               # "503" | "overloaded" (see ERRORS below) | "usage_limit" (a plan's limit, below)
         "resets_at": null,    # usage_limit: its reset, epoch seconds (default: two hours from now)
         "error_message": null,  # codex: that error with this message instead; "{prompt}" in it is the
                                 # request (an API error that quotes the request back)
         "deny": false,        # claude: every tool call denied (exit 0, permission_denials)
         "hang": false,        # sleep forever after the first event (and start a sleeping child)
         "sleep": 0,           # seconds before finishing
         "stderr": null,       # a line written to stderr after the run
         "exit": 0}]}

Without a scenario every call succeeds without touching any file.

A plan's usage limit (``"error": "usage_limit"``), in each CLI's own format, with its reset time:

* claude: a ``rate_limit_event`` with ``rate_limit_info`` ``{"status": "rejected", "resetsAt": <epoch>,
  "rateLimitType": "five_hour"}``, then the result ``You've hit your session limit · resets 2pm (Europe/Paris)``
  (``is_error``, exit 1); ``"usage_limit_legacy"``: only the result ``Claude AI usage limit reached|<epoch>``.
  A healthy claude run also prints the event, with status "allowed", as the real one does.
* codex: an ``error`` event and ``turn.failed`` with ``You've hit your usage limit. ... or try again at 3:04 PM.``
  (the machine's local time; with the date, ``Jul 5th, 2026 8:19 PM``, when not today), exit 1.
* opencode: an ``error`` event, APIError 429 ``You have exceeded the 5-hour usage quota. It will reset at
  2026-07-30 16:11:46 +0800 CST.`` (the reset in UTC+8), exit 1; ``"silent_retry"``: what opencode does out of
  quota on providers whose 429 it retries: prints nothing on stdout and never exits (with ``--print-logs``, it
  logs each refused try on stderr: the quota's reset with ``resets_at``, else a bare 429).

Login status commands (``claude auth status``, ``codex login status``, ``opencode auth list``)
answer like the real ones (claude 2.1.197, codex-cli 0.169.0, opencode 1.18.33), driven by:

* ``FAKE_AGENT_LOGGED_OUT=claude,codex,opencode``: those report not logged in (claude still
  reports a login from ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN, as the
  real one does; opencode lists no stored credential). Default: logged in.
* ``FAKE_AGENT_OPENCODE_PROVIDERS=anthropic,openai``: the providers ``opencode auth list`` shows as
  stored (empty: none). Default: every provider of :data:`OPENCODE_PROVIDERS`. Provider keys in the
  environment are listed in a second section, as the real one does.
* ``FAKE_AGENT_STATUS_HANG=codex``: the status command sleeps (an hour).
* ``FAKE_AGENT_STATUS_UNSUPPORTED=claude``: the status command is refused like a CLI version without
  it would (usage error on stderr).
* ``FAKE_AGENT_STATUS_LOG=/path``: each status call appends a JSON line ``{"agent", "argv"}``.

The executables beside this file run it with ``$FAKE_AGENT_PYTHON`` (the tests' interpreter), else ``python3``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path


def parse_args(agent: str, argv: list[str]) -> dict:
    """Read argv like the real CLI would; exit 2 on a command line it would refuse."""
    out = {"model": None, "prompt": None, "dir": None, "flags": []}
    args = list(argv)
    if agent == "codex":
        if not args or args[0] != "exec":
            die(2, "fake codex: only `codex exec` is supported")
        args = args[1:]
    if agent == "opencode":
        if not args or args[0] != "run":
            die(2, "fake opencode: only `opencode run` is supported")
        args = args[1:]
    takes_value = {"--model", "-m", "--output-format", "--permission-mode", "--approval-mode", "-C", "--cd", "-s", "--sandbox",
                   "-c", "--config", "--format", "--dir", "-o", "--output-last-message"}
    positional = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            positional += args[i + 1:]
            break
        if a.startswith("--") and "=" in a:
            out["flags"].append(a)
        elif a in takes_value:
            if i + 1 >= len(args):
                die(2, f"fake {agent}: {a} needs a value")
            val = args[i + 1]
            if a in ("--model", "-m"):
                out["model"] = val
            elif a in ("-C", "--cd", "--dir"):
                out["dir"] = val
            out["flags"].append(f"{a}={val}")
            i += 1
        elif a.startswith("-"):
            out["flags"].append(a)
        else:
            positional.append(a)
        i += 1
    if agent == "opencode":
        # like `opencode run`: arguments with a space are re-quoted, then stdin (when not a tty) is appended
        message = " ".join('"' + p.replace('"', '\\"') + '"' if " " in p else p for p in positional)
        if not sys.stdin.isatty():
            message += "\n" + sys.stdin.read()
        out["prompt"] = message.strip("\n") or None
    elif agent == "gemini":  # --prompt=TEXT; without it, stdin when it is not a terminal
        given = [f.split("=", 1)[1] for f in out["flags"] if f.startswith("--prompt=")]
        out["prompt"] = given[-1] if given else ((sys.stdin.read() if not sys.stdin.isatty() else "") or None)
    elif positional:
        out["prompt"] = "\n".join(positional)
    else:  # like `claude -p` and `codex exec` without a prompt argument: the prompt is stdin
        out["prompt"] = (sys.stdin.read() if not sys.stdin.isatty() else "") or None
    flags = out["flags"]
    if agent == "claude":
        if "-p" not in flags and "--print" not in flags:
            die(2, "fake claude: interactive mode is not supported; pass -p")
        if "--output-format=stream-json" in flags and "--verbose" not in flags:
            die(1, "Error: When using --print, --output-format=stream-json requires --verbose")
    if agent == "codex" and "--json" not in flags:
        die(2, "fake codex: pass --json")
    if agent == "opencode" and "--format=json" not in flags:
        die(2, "fake opencode: pass --format json")
    if agent == "gemini" and "--output-format=stream-json" not in flags:
        die(42, "fake gemini: pass --output-format stream-json")
    if out["prompt"] is None:
        die(2, f"fake {agent}: no prompt given")
    return out


def die(code: int, msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.exit(code)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def pick_rule(scenario: dict, agent: str, model: str | None) -> dict:
    log = scenario.get("log")
    call = 1 + (len(Path(log).read_text().splitlines()) if log and Path(log).exists() else 0)
    for rule in scenario.get("rules", []):
        m = rule.get("match", {})
        if m.get("agent") not in (None, agent):
            continue
        if m.get("model") not in (None, model):
            continue
        if m.get("call") not in (None, call):
            continue
        return rule
    return {}


def apply_files(rule: dict, root: Path) -> list[str]:
    touched = []
    for argv in rule.get("commands") or []:
        subprocess.run(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    for rel, content in (rule.get("write") or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        touched.append(rel)
    for rel, content in (rule.get("append") or {}).items():
        with open(root / rel, "a") as f:
            f.write(content)
        touched.append(rel)
    for rel in rule.get("delete") or []:
        (root / rel).unlink(missing_ok=True)
        touched.append(rel)
    return touched


def hang(first_event) -> None:
    first_event()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    pidfile = os.environ.get("FAKE_AGENT_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(f"{os.getpid()}\n{child.pid}\n")
    while True:
        time.sleep(1)


# --------------------------------------------------------------------------- login status commands

# id -> (display name, API-key variable), as opencode 1.18.33's catalogue names them
OPENCODE_PROVIDERS = {
    "anthropic": ("Anthropic", "ANTHROPIC_API_KEY"), "openai": ("OpenAI", "OPENAI_API_KEY"),
    "zhipuai": ("Zhipu AI", "ZHIPU_API_KEY"), "zai": ("Z.AI", "ZHIPU_API_KEY"),
    "alibaba": ("Alibaba", "DASHSCOPE_API_KEY"), "moonshotai": ("Moonshot AI", "MOONSHOT_API_KEY"),
    "minimax": ("MiniMax (minimax.io)", "MINIMAX_API_KEY"), "openrouter": ("OpenRouter", "OPENROUTER_API_KEY"),
    "deepseek": ("DeepSeek", "DEEPSEEK_API_KEY"), "google": ("Google", "GEMINI_API_KEY"),
}
STATUS_COMMANDS = {"claude": [["auth", "status"]], "codex": [["login", "status"]],
                   "opencode": [["auth", "list"], ["auth", "ls"], ["providers", "list"], ["providers", "ls"]]}
GREY, RESET = "\x1b[90m", "\x1b[0m"


def _listed(var: str) -> list[str]:
    return [x.strip() for x in os.environ.get(var, "").split(",") if x.strip()]


def status_command(agent: str, argv: list[str]) -> int | None:
    """Answer a login status command like the real CLI; None when ``argv`` is not one."""
    if not any(argv[:len(c)] == c for c in STATUS_COMMANDS.get(agent, [])):
        return None
    log = os.environ.get("FAKE_AGENT_STATUS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"agent": agent, "argv": argv}) + "\n")
    if agent in _listed("FAKE_AGENT_STATUS_HANG"):
        time.sleep(3600)
    if agent in _listed("FAKE_AGENT_STATUS_UNSUPPORTED"):
        sys.stderr.write({"claude": f"error: unknown command '{argv[0]}'\n",
                          "codex": f"error: unrecognized subcommand '{argv[0]}'\n\nUsage: codex [OPTIONS] [PROMPT]\n",
                          "opencode": "opencode [project]\n\nstart opencode tui\n"}[agent])
        return {"claude": 1, "codex": 2, "opencode": 1}[agent]
    logged_out = agent in _listed("FAKE_AGENT_LOGGED_OUT")
    if agent == "claude":
        status = {"loggedIn": True, "authMethod": "claude.ai", "apiProvider": "firstParty", "email": None,
                  "subscriptionType": "pro"}
        if logged_out:
            if os.environ.get("ANTHROPIC_API_KEY"):
                status = {"loggedIn": True, "authMethod": "api_key", "apiProvider": "firstParty",
                          "apiKeySource": "ANTHROPIC_API_KEY"}
            elif os.environ.get("ANTHROPIC_AUTH_TOKEN") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN"):
                status = {"loggedIn": True, "authMethod": "oauth_token", "apiProvider": "firstParty"}
            else:
                status = {"loggedIn": False, "authMethod": "none", "apiProvider": "firstParty"}
        print(json.dumps(status, indent=2))
        return 0 if status["loggedIn"] else 1
    if agent == "codex":  # the real one writes its answer to stderr
        sys.stderr.write("Not logged in\n" if logged_out else "Logged in using ChatGPT\n")
        return 1 if logged_out else 0
    # opencode: stored credentials, then the provider keys found in the environment, with ANSI colours
    if "FAKE_AGENT_OPENCODE_PROVIDERS" in os.environ:
        stored = _listed("FAKE_AGENT_OPENCODE_PROVIDERS")
    else:
        stored = list(OPENCODE_PROVIDERS)
    if logged_out:
        stored = []
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "opencode" / "auth.json"
    out = [f"┌  Credentials {GREY}{str(data).replace(str(Path.home()), '~', 1)}", "│"]
    for pid in stored:
        out += [f"●  {OPENCODE_PROVIDERS.get(pid, (pid,))[0]} {GREY}api", "│"]
    out += [f"└  {len(stored)} credentials", ""]
    env = [(name, var) for name, var in OPENCODE_PROVIDERS.values() if os.environ.get(var)]
    if env:
        out += ["┌  Environment", "│"]
        for name, var in env:
            out += [f"●  {name} {GREY}{var}", "│"]
        out += [f"└  {len(env)} environment variables", ""]
    print("\n".join(out) + RESET)
    return 0


# --------------------------------------------------------------------------- output formats

# Error modes of the scenario's "error" key beyond "500" / "401" / "rate_limit", with what each real CLI
# printed (claude 2.1.197 and codex-cli 0.169.0 against a local server answering with the provider's
# error body; opencode 1.18.33 likewise, and without credentials). {model} is the arm's model.
CLAUDE_ERRORS = {  # mode -> (api_error_status, result text)
    "login": (None, "Not logged in · Please run /login"),
    "403": (403, "Failed to authenticate. API Error: 403 Your API key does not have permission to use the "
                 "specified resource."),
    "quota": (400, "Credit balance is too low"),
    "unknown_model": (404, "There's an issue with the selected model ({model}). It may not exist or you may not "
                           "have access to it. Run --model to pick a different model."),
    "503": (503, "API Error: 503 Service Unavailable. This is a server-side issue, usually temporary — try again "
                 "in a moment."),
    "overloaded": (529, "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in "
                        "a moment."),
}
CODEX_ERRORS = {  # mode -> the message of its error event and turn.failed
    "login": "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header, "
             "url: https://api.openai.com/v1/responses",
    "403": "Project `proj_acr` does not have access to model `{model}`",
    "quota": "Quota exceeded. Check your plan and billing details.",
    "unknown_model": "The model `{model}` does not exist or you do not have access to it.",
    "503": "unexpected status 503 Service Unavailable: Service Unavailable, url: https://api.openai.com/v1/responses",
    "overloaded": "unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., "
                  "url: https://api.openai.com/v1/responses",
}


def opencode_error(mode: str, model: str, rule: dict | None = None) -> dict:
    """The ``error`` of opencode's error event for ``mode``. Without credentials for the provider and
    for a model it does not know, opencode 1.18.33 prints the same UnknownError (its log, with
    --print-logs, says ProviderModelNotFoundError); "unknown_model_named" is that error by name."""
    provider, _, model_id = model.partition("/")
    unexpected = {"name": "UnknownError", "data": {"message": "Unexpected server error. Check server logs for "
                                                              "details.", "ref": "err_" + uuid.uuid4().hex[:8]}}
    if mode in ("login", "unknown_model"):
        return unexpected
    if mode == "unknown_model_named":
        return {"name": "ProviderModelNotFoundError", "data": {"providerID": provider, "modelID": model_id,
                                                               "suggestions": []}}
    if mode == "usage_limit":
        from datetime import datetime, timedelta, timezone

        t = datetime.fromtimestamp(resets_at(rule or {}), timezone(timedelta(hours=8)))
        message = (f"You have exceeded the 5-hour usage quota. It will reset at {t:%Y-%m-%d %H:%M:%S} +0800 CST.")
        return {"name": "APIError", "data": {"message": message, "statusCode": 429, "isRetryable": False,
                                             "responseBody": json.dumps({"error": {"message": message,
                                                                                   "type": "rate_limit_error"}})}}
    status, message, body = {
        "403": (403, "Your account is not authorized to access this model",
                {"error": {"message": "Your account is not authorized to access this model",
                           "type": "permission_denied_error"}}),
        "quota": (429, "You exceeded your current quota, please check your plan and billing details.",
                  {"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                        "details.", "type": "insufficient_quota", "code": "insufficient_quota"}}),
        "503": (503, "Service Unavailable", {"error": {"message": "Service Unavailable", "type": "server_error"}}),
        "overloaded": (529, "Overloaded", {"error": {"message": "Overloaded", "type": "overloaded_error"}}),
    }[mode]
    return {"name": "APIError", "data": {"message": message, "statusCode": status, "isRetryable": status >= 429,
                                         "responseBody": json.dumps(body)}}



def resets_at(rule: dict) -> int:
    """A usage limit's reset (epoch seconds): the rule's, else two hours from now."""
    return int(rule.get("resets_at") or time.time() + 7200)


def claude_limit_text(rule: dict) -> str:
    """claude's words for a reached limit (2.1.197, the 5-hour window): the reset as a clock time in a named zone
    (the legacy form: epoch)."""
    at = resets_at(rule)
    if rule.get("error") == "usage_limit_legacy":
        return f"Claude AI usage limit reached|{at}"
    from datetime import datetime
    from zoneinfo import ZoneInfo

    t = datetime.fromtimestamp(at, ZoneInfo("Europe/Paris"))  # claude names the account's zone, not the machine's
    clock = f"{t.hour % 12 or 12}{':%02d' % t.minute if t.minute else ''}{'am' if t.hour < 12 else 'pm'}"
    if at - time.time() > 86400:  # claude 2.1.197 writes the date of a reset more than a day ahead
        clock = f"{t:%b} {t.day}, {clock}"
    return f"You've hit your session limit · resets {clock} (Europe/Paris)"


def codex_limit_text(rule: dict) -> str:
    """codex's words for a reached limit: the reset in the machine's local time, with its date when not today."""
    t = time.localtime(resets_at(rule))
    clock = f"{t.tm_hour % 12 or 12}:{t.tm_min:02d} {'AM' if t.tm_hour < 12 else 'PM'}"
    if time.strftime("%Y-%m-%d", t) != time.strftime("%Y-%m-%d"):
        suffix = "th" if 10 <= t.tm_mday % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(t.tm_mday % 10, "th")
        clock = f"{time.strftime('%b', t)} {t.tm_mday}{suffix}, {t.tm_year} {clock}"
    return ("You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
            f"https://chatgpt.com/codex/settings/usage to purchase more credits or try again at {clock}.")


def claude(rule: dict, model: str, prompt: str, root: Path) -> int:
    sid = str(uuid.uuid4())
    tin, tout = rule.get("tokens", [1000, 100])
    emit({"type": "system", "subtype": "init", "session_id": sid, "model": model, "cwd": str(root),
          "tools": ["Bash", "Edit", "Write", "Read"], "permissionMode": "acceptEdits"})
    if rule.get("hang"):
        hang(lambda: None)
    time.sleep(rule.get("sleep", 0))
    err = rule.get("error")
    limited = err in ("usage_limit", "usage_limit_legacy")
    if err != "usage_limit_legacy":  # every run says where the plan's window stands (rejected: the limit is reached)
        emit({"type": "rate_limit_event", "session_id": sid, "uuid": str(uuid.uuid4()),
              "rate_limit_info": {"status": "rejected" if limited else "allowed", "rateLimitType": "five_hour",
                                  "resetsAt": resets_at(rule), "isUsingOverage": False}})
    base = {"type": "result", "duration_ms": 1200, "duration_api_ms": 1100, "num_turns": 1, "session_id": sid,
            "total_cost_usd": rule.get("cost", 0.01) or 0, "usage": {"input_tokens": tin, "output_tokens": tout,
                                                                    "cache_creation_input_tokens": 0,
                                                                    "cache_read_input_tokens": 0},
            "modelUsage": {model: {"inputTokens": tin, "outputTokens": tout, "costUSD": rule.get("cost", 0.01)}},
            "permission_denials": []}
    if err:
        if limited:
            status, text = 429, claude_limit_text(rule)
        elif str(err) in CLAUDE_ERRORS:
            status, text = CLAUDE_ERRORS[str(err)]
            text = text.format(model=model)
        else:
            status = 429 if err == "rate_limit" else int(err)
            text = {500: "API Error: 500 Internal server error",
                    401: "Failed to authenticate. API Error: 401 invalid x-api-key",
                    429: "API Error: 429 rate_limit_error: This request would exceed your rate limit"}[status]
        emit({**base, "subtype": "success", "is_error": True, "api_error_status": status, "result": text,
              "total_cost_usd": 0, "usage": {"input_tokens": 0, "output_tokens": 0}})
        return 1
    files = list((rule.get("write") or {}).items()) + list((rule.get("append") or {}).items())
    uses = []
    for i, (rel, content) in enumerate(files):
        uses.append({"type": "tool_use", "id": f"toolu_{i}", "name": "Write",
                     "input": {"file_path": str(root / rel), "content": content}})
    if uses:
        emit({"type": "assistant", "session_id": sid,
              "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": uses,
                          "usage": {"input_tokens": tin, "output_tokens": tout}}})
    denials = []
    if rule.get("deny"):
        denials = [{"tool_name": u["name"], "tool_use_id": u["id"], "tool_input": u["input"]} for u in uses] or [
            {"tool_name": "Bash", "tool_use_id": "toolu_x", "tool_input": {"command": "ls"}}]
    else:
        apply_files(rule, root)
    emit({"type": "assistant", "session_id": sid,
          "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": model,
                      "content": [{"type": "text", "text": rule.get("text", "Done.")}]}})
    emit({**base, "subtype": "success", "is_error": False, "result": rule.get("text", "Done."),
          "permission_denials": denials, "total_cost_usd": rule.get("cost", 0.01)})
    return int(rule.get("exit", 0))


def codex(rule: dict, model: str, prompt: str, root: Path) -> int:
    sys.stderr.write("Reading additional input from stdin...\n")
    emit({"type": "thread.started", "thread_id": str(uuid.uuid4())})
    emit({"type": "turn.started"})
    if rule.get("hang"):
        hang(lambda: None)
    time.sleep(rule.get("sleep", 0))
    err = rule.get("error")
    if err:
        msg = {"500": "unexpected status 500 Internal Server Error", "401": "unexpected status 401 Unauthorized",
               "rate_limit": "exceeded retry limit, last status: 429 Too Many Requests",
               "usage_limit": codex_limit_text(rule).replace("{", "{{").replace("}", "}}"),
               **CODEX_ERRORS}[str(err)].format(model=model)
        if rule.get("error_message"):  # a message of the scenario's own, which may quote the request back
            msg = rule["error_message"].replace("{prompt}", prompt)
        emit({"type": "error", "message": msg})
        emit({"type": "turn.failed", "error": {"message": msg}})
        return 1
    for i, rel in enumerate(apply_files(rule, root)):
        emit({"type": "item.completed", "item": {"id": f"item_{i}", "type": "file_change", "status": "completed",
                                                 "changes": [{"path": str(root / rel), "kind": "update"}]}})
    emit({"type": "item.completed", "item": {"id": "item_m", "type": "agent_message", "text": rule.get("text", "Done.")}})
    tin, tout = rule.get("tokens", [1000, 100])
    emit({"type": "turn.completed", "usage": {"input_tokens": tin, "cached_input_tokens": 0, "output_tokens": tout,
                                              "reasoning_output_tokens": 0}})
    return int(rule.get("exit", 0))


def opencode_retry_log(rule: dict, model: str) -> str:
    """The line opencode 1.18.33 logs (``--print-logs``) for a try its provider refused: with ``resets_at``, a
    coding plan's usage quota naming its reset in UTC+8; else a bare 429."""
    from datetime import datetime, timedelta, timezone

    if rule.get("resets_at"):
        t = datetime.fromtimestamp(resets_at(rule), timezone(timedelta(hours=8)))
        said = f"You have exceeded the 5-hour usage quota. It will reset at {t:%Y-%m-%d %H:%M:%S} +0800 CST."
    else:
        said = "Too Many Requests"
    provider, _, model_id = model.partition("/")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return (f'timestamp={stamp} level=ERROR run=fake message="stream error" providerID={provider} '
            f'modelID={model_id} small=false agent=build mode=primary error.error="AI_APICallError: {said}"')


def opencode(rule: dict, model: str, prompt: str, root: Path) -> int:
    sid = "ses_" + uuid.uuid4().hex[:20]
    ts = int(time.time() * 1000)
    if rule.get("error") == "silent_retry":  # out of quota: it retries with nothing printed, and never exits
        while True:
            if "--print-logs" in sys.argv:  # its log names the provider's answer to each try
                print(opencode_retry_log(rule, model), file=sys.stderr, flush=True)
            time.sleep(1)
    emit({"type": "step_start", "timestamp": ts, "sessionID": sid, "part": {"type": "step-start"}})
    if rule.get("hang"):
        hang(lambda: None)
    time.sleep(rule.get("sleep", 0))
    err = rule.get("error")
    if err:
        if str(err) in ("500", "401", "rate_limit"):
            status = 429 if err == "rate_limit" else int(err)
            error = {"name": "APIError", "data": {"message": f"Request failed with status {status}",
                                                  "statusCode": status, "isRetryable": status != 401}}
        else:
            error = opencode_error(str(err), model, rule)
        emit({"type": "error", "timestamp": ts, "sessionID": sid, "error": error})
        return 1
    for rel in apply_files(rule, root):
        emit({"type": "tool_use", "timestamp": ts, "sessionID": sid,
              "part": {"type": "tool", "tool": "write", "state": {"status": "completed",
                                                                  "input": {"filePath": str(root / rel)},
                                                                  "output": "", "metadata": {}}}})
    tin, tout = rule.get("tokens", [1000, 100])
    emit({"type": "text", "timestamp": ts, "sessionID": sid, "part": {"type": "text", "text": rule.get("text", "Done.")}})
    emit({"type": "step_finish", "timestamp": ts, "sessionID": sid,
          "part": {"type": "step-finish", "reason": "stop", "cost": rule.get("cost", 0.0) or 0,
                   "tokens": {"input": tin, "output": tout, "reasoning": 0, "cache": {"read": 0, "write": 0}}}})
    return int(rule.get("exit", 0))


GEMINI_ERRORS = {  # mode -> what gemini's handleError prints on stderr (parseAndFormatApiError's words)
    "500": "[API Error: Internal error encountered. (Status: INTERNAL)]",
    "401": "[API Error: API key not valid. Please pass a valid API key. (Status: INVALID_ARGUMENT)]",
    "rate_limit": "[API Error: Resource has been exhausted (e.g. check quota). (Status: RESOURCE_EXHAUSTED)]\n"
                  "Please wait and try again later. To increase your limits, request a quota increase through AI "
                  "Studio, or switch to another /auth method",
}


def gemini(rule: dict, model: str, prompt: str, root: Path) -> int:
    def event(kind: str, **fields) -> None:
        emit({"type": kind, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), **fields})

    event("init", session_id=str(uuid.uuid4()), model=model)
    event("message", role="user", content=prompt)
    if rule.get("hang"):
        hang(lambda: None)
    time.sleep(rule.get("sleep", 0))
    err = rule.get("error")
    if err:
        sys.stderr.write("Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json\n")
        sys.stderr.write(GEMINI_ERRORS[str(err)] + "\n")
        return 1
    for i, rel in enumerate(apply_files(rule, root)):
        event("tool_use", tool_name="write_file", tool_id=f"write_file-{i}",
              parameters={"file_path": str(root / rel), "content": "..."})
        event("tool_result", tool_id=f"write_file-{i}", status="success", output="")
    text = rule.get("text", "Done.")
    for chunk in (text[: len(text) // 2], text[len(text) // 2:]):
        event("message", role="assistant", content=chunk, delta=True)
    tin, tout = rule.get("tokens", [1000, 100])
    event("result", status="success", stats={"total_tokens": tin + tout, "input_tokens": tin, "output_tokens": tout,
                                             "cached": 0, "input": tin, "duration_ms": 1200, "tool_calls": 0})
    return int(rule.get("exit", 0))


def interactive(agent: str, argv: list[str], scenario: dict) -> None:
    """A stand-in for the agent's own screen: asks on the terminal, acts, leaves a session file."""
    model = argv[argv.index("-m") + 1] if "-m" in argv else (argv[argv.index("--model") + 1] if "--model" in argv
                                                              else None)
    rule = pick_rule(scenario, agent, model)
    print(f"fake {agent} interactive ({model}); prompt: {argv[-1] if '--' in argv else ''}", flush=True)
    answer = input("type ok to apply the change: ")
    if answer.strip() != "ok":
        sys.exit(1)
    apply_files(rule, Path(os.getcwd()))
    tin, tout = rule.get("tokens", [1000, 100])
    if agent == "codex":  # codex keeps a rollout file per session with running token totals
        day = time.strftime("%Y/%m/%d")
        folder = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions" / day
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rollout-{uuid.uuid4()}.jsonl").write_text(json.dumps(
            {"type": "event_msg", "payload": {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": tin, "output_tokens": tout}}}}) + "\n")
    print("bye", flush=True)


def main() -> None:
    agent = os.environ.get("FAKE_AGENT_NAME") or Path(sys.argv[0]).name
    if len(sys.argv) > 1 and sys.argv[1] in ("--version", "-v"):
        print({"claude": "2.1.197 (Claude Code)", "codex": "codex-cli 0.169.0", "opencode": "1.18.33",
               "gemini": "0.19.4"}.get(agent, "0"))
        return
    status = status_command(agent, sys.argv[1:])
    if status is not None:
        sys.exit(status)
    if (agent == "codex" and sys.argv[1:2] != ["exec"]) or (agent == "claude" and "-p" not in sys.argv):
        scen_path = os.environ.get("FAKE_AGENT_SCENARIO")
        interactive(agent, sys.argv[1:], json.loads(Path(scen_path).read_text()) if scen_path else {})
        return
    args = parse_args(agent, sys.argv[1:])
    root = Path(args["dir"] or os.environ.get("PWD") or os.getcwd()) if agent != "claude" else Path(os.getcwd())
    scen_path = os.environ.get("FAKE_AGENT_SCENARIO")
    scenario = json.loads(Path(scen_path).read_text()) if scen_path else {}
    rule = pick_rule(scenario, agent, args["model"])
    if scenario.get("log"):
        with open(scenario["log"], "a") as f:
            f.write(json.dumps({"agent": agent, "model": args["model"], "prompt": args["prompt"],
                                "argv": sys.argv[1:], "cwd": os.getcwd(), "pwd": os.environ.get("PWD"),
                                "stdin_tty": os.isatty(0)}) + "\n")
    run = {"claude": claude, "codex": codex, "opencode": opencode, "gemini": gemini}[agent]
    code = run(rule, args["model"] or "default", args["prompt"], root)
    if rule.get("stderr"):  # a last line on stderr, as a plugin or tool the CLI ran may leave there
        sys.stderr.write(rule["stderr"] + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
