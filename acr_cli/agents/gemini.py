"""Gemini CLI (``gemini``, npm ``@google/gemini-cli``).

Non-interactive: ``gemini --prompt=PROMPT --output-format stream-json -m M --approval-mode MODE`` (the prompt
as one ``--prompt=`` argument, so a prompt that starts with ``-`` is not read as an option; a prompt too long for
one argument goes to stdin with no ``--prompt``: headless mode starts when stdin is not a terminal).
What acr relies on, and where it was read:

* Headless mode, ``-p/--prompt``, ``--output-format text|json|stream-json``, exit codes 0 success, 1 error or
  API failure, 42 bad input, 53 turn limit: geminicli.com/docs/cli/headless (docs/cli/headless.md in
  google-gemini/gemini-cli).
* The stream-json events (``packages/core/src/output/types.ts``): ``init{session_id, model}``,
  ``message{role, content, delta}`` (the assistant's text comes in deltas), ``tool_use{tool_name, tool_id,
  parameters}``, ``tool_result{tool_id, status, output, error}``, ``error{severity, message}`` (non-fatal),
  ``result{status, error?{type, message}, stats{total_tokens, input_tokens, output_tokens, cached, input,
  duration_ms, tool_calls}}``. ``input_tokens`` is the prompt tokens summed over models, cache reads included
  (``stream-json-formatter.ts``). No cost: acr prices the tokens (provider ``google`` in the catalog).
* An API error ends the run through ``handleError`` (``packages/cli/src/utils/errors.ts``): outside
  ``--output-format json`` it prints ``[API Error: MESSAGE (Status: STATUS)]`` on stderr and exits 1
  (``parseAndFormatApiError``, ``packages/core/src/utils/errorParsing.ts``); with ``json`` the same goes to
  stderr as ``{"error": {type, message, code}}``. A bad key is HTTP 400 ``API key not valid`` (not a 401), and
  a 429 says ``RESOURCE_EXHAUSTED``: :meth:`GeminiAdapter.classify_error` reads both.
* ``--approval-mode default|auto_edit|yolo`` and ``--yolo``; ``-m/--model``: the CLI reference
  (docs/cli/cli-reference.md). acr maps ``read-only`` to ``default`` (headless, a tool that needs approval is
  not run), ``workspace-write`` and ``full`` to ``yolo`` (tests and shell commands must run without a person;
  ``auto_edit`` approves edits only).
* Credentials (docs/get-started/authentication.md): ``GEMINI_API_KEY``, ``GOOGLE_API_KEY`` (also read from
  ``~/.gemini/.env``), a Google sign-in cached in ``~/.gemini/oauth_creds.json``, Vertex AI through
  ``GOOGLE_GENAI_USE_VERTEXAI`` with application-default credentials. The CLI has no login-status command:
  readiness reads the variables and files instead (:meth:`GeminiAdapter.readiness`).

No self-check: acr's mock model API does not speak Gemini's API (``acr doctor --check`` skips gemini).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from acr_cli.agents.base import (
    Adapter,
    AgentResult,
    Invocation,
    as_int,
    home_of,
    json_event,
    json_lines,
    last_json_object,
    limit_reset,
    prompt_fits_argv,
    short,
    tool_call,
)
from acr_cli.domain import Arm

APPROVAL = {"read-only": "default", "workspace-write": "yolo", "full": "yolo"}
KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
ENV = (*KEYS, "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "HOME")
LOGIN_HINT = "run `gemini` and sign in with Google, or set GEMINI_API_KEY"


def gemini_home() -> Path:
    return Path.home() / ".gemini"


class GeminiAdapter(Adapter):
    name = "gemini"
    executable = "gemini"
    install = "npm install -g @google/gemini-cli"
    login_fix = "log in: " + LOGIN_HINT
    price_provider = "google"

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "--output-format", "stream-json", "-m", arm.model,
                "--approval-mode", APPROVAL.get(permissions, "yolo"), *arm.args]
        if prompt_fits_argv(prompt):
            return Invocation(argv + [f"--prompt={prompt}"])
        return Invocation(argv, stdin=prompt)

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "-m", arm.model, "--approval-mode", APPROVAL.get(permissions, "yolo"), *arm.args]
        return Invocation(argv + ([f"--prompt-interactive={prompt}"] if prompt else []))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        res = AgentResult()
        final, text, warning = None, "", None
        for ev in json_lines(stdout):
            kind = ev.get("type")
            res.session_id = ev.get("session_id") or res.session_id
            if kind == "message" and ev.get("role") == "assistant" and isinstance(ev.get("content"), str):
                text = text + ev["content"] if ev.get("delta") else ev["content"]
            elif kind == "tool_use":
                text = ""  # the final message is what the model says after its last tool call
            elif kind == "error" and ev.get("severity") == "error":
                warning = str(ev.get("message") or "error")
            elif kind == "result":
                final = ev
        res.text = text or None
        stats = (final or {}).get("stats") if isinstance((final or {}).get("stats"), dict) else {}
        res.tokens_in, res.tokens_out = as_int(stats.get("input_tokens")), as_int(stats.get("output_tokens"))
        failed = final is None or final.get("status") != "success" or exit_code
        if failed:
            res.error = _error_of(final, stderr, warning, exit_code)
            res.limit_resets_at = limit_reset(res.error)
            res.error = short(res.error)
        return res

    def describe(self, line: str) -> str | None:
        ev = json_event(line)
        if ev is None:
            return None
        if ev.get("type") == "tool_use":
            return tool_call(ev.get("tool_name"), ev.get("parameters"))
        if ev.get("type") == "message" and ev.get("role") == "assistant" and not ev.get("delta"):
            return short(ev.get("content"), 120)
        if ev.get("type") == "result":
            return f"result: {ev.get('status')}"
        return None

    def env_names(self, model: str) -> list[str]:
        return list(ENV)

    def writable_dirs(self, env) -> list[Path]:
        """``~/.gemini``: its login, settings and chats."""
        return [home_of(env) / ".gemini"]

    def credential_files(self, model: str) -> list[Path]:
        return [gemini_home() / "oauth_creds.json", gemini_home() / ".env", gemini_home() / "settings.json"]

    def readiness(self, exe: str, model: str, args, status) -> tuple:
        """Without a status command: a key variable (or one in ``~/.gemini/.env``) or a cached Google sign-in is
        *ready*; Vertex AI or application-default credentials, which acr cannot see, are *unknown*; nothing is
        *not ready*. Runs no command."""
        from acr_cli.health.readiness import NOT_READY, READY, UNKNOWN

        for key in KEYS:
            if os.environ.get(key, "").strip():
                return READY, f"gemini: {key} is set", None, False
        dotenv = _read(gemini_home() / ".env")
        for key in KEYS:
            if re.search(rf"^\s*(export\s+)?{key}\s*=\s*\S", dotenv, re.M):
                return READY, f"gemini: {key} in {gemini_home() / '.env'}", None, False
        if (gemini_home() / "oauth_creds.json").is_file():
            return READY, f"gemini: signed in with Google ({gemini_home() / 'oauth_creds.json'})", None, False
        if any(os.environ.get(k, "").strip() for k in ENV[2:4]):
            return (UNKNOWN, "gemini: Vertex AI or application-default credentials are set up; acr cannot check "
                             "them without spending", None, False)
        return NOT_READY, "gemini: no API key and no Google sign-in (~/.gemini/oauth_creds.json)", LOGIN_HINT, False

    def classify_error(self, text: str, model: str):
        """Gemini's API words a bad key as HTTP 400 "API key not valid", and a 429 as RESOURCE_EXHAUSTED."""
        from acr_cli.health.errors import SETUP, TRANSIENT, Problem, fix_for

        if re.search(r"api key not valid|api_key_invalid|must specify the GEMINI_API_KEY", text, re.I):
            return Problem(SETUP, "credentials refused (API key not valid)", fix_for(self.name, model, "login"))
        if re.search(r"resource_exhausted|resource has been exhausted", text, re.I):
            return Problem(TRANSIENT, "rate limited (429)")
        return None


def _error_of(final: dict | None, stderr: str, warning: str | None, exit_code: int | None) -> str:
    """Why a run failed: the result's error, the CLI's ``[API Error: ...]`` or JSON error on stderr, an error
    event, else the exit."""
    err = (final or {}).get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    obj = last_json_object(stderr or "")
    if obj and isinstance(obj.get("error"), dict) and obj["error"].get("message"):
        return str(obj["error"]["message"])
    api = re.search(r"\[API Error: .*", stderr or "")
    if api:
        return api.group(0)
    lines = [ln for ln in (stderr or "").splitlines() if ln.strip()]
    return warning or (lines[-1] if lines else f"gemini produced no result (exit {exit_code})")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
