"""A generic adapter for any other agent CLI, described in the profile's ``agents:``.

::

    agents:
      aider:
        command: [aider, --model, "{model}", --yes-always, --message, "{prompt}"]
        output: text            # text | json | jsonl
        fields:                 # dotted paths into the (last) JSON object; all optional
          tokens_in: usage.input_tokens
          tokens_out: usage.output_tokens
          cost_usd: cost
          text: result
          session_id: session
          error: error.message
        env: {AIDER_ANALYTICS: "false"}
        version: [aider, --version]

Placeholders ``{prompt}``, ``{model}`` and ``{workdir}`` are substituted inside
argv elements; the command is never given to a shell. With ``output: jsonl``
each field is read from the last line that has it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acr_cli.agents.base import Adapter, AgentResult, Invocation, as_float, as_int, dig, json_lines, last_json_object, short
from acr_cli.domain import Arm

FIELDS = ("tokens_in", "tokens_out", "cost_usd", "text", "session_id", "error")
OUTPUTS = ("text", "json", "jsonl")
KEYS = {"command", "output", "fields", "env", "version"}


Problem = tuple[tuple, str]  # (the sub-key it is about, what is wrong)


def validate_spec(spec: Any) -> Problem | None:
    """None if ``spec`` is a valid generic agent, else (sub-key, problem): the first one found, in the order
    of the checks below."""
    if not isinstance(spec, dict):
        return (), "expected a mapping with at least `command`"
    for check in (_keys, _command, _output, _fields, _env, _version):
        problem = check(spec)
        if problem is not None:
            return problem
    return None


def _keys(spec: dict) -> Problem | None:
    unknown = [k for k in spec if k not in KEYS]
    return ((unknown[0],), f"unknown field; expected one of {', '.join(sorted(KEYS))}") if unknown else None


def _command(spec: dict) -> Problem | None:
    cmd = spec.get("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, (str, int, float)) for c in cmd):
        return ("command",), "expected a non-empty list of strings (argv, no shell)"
    if not any("{prompt}" in str(c) for c in cmd):
        return ("command",), "no element contains {prompt}: the agent would never see the request"
    return None


def _output(spec: dict) -> Problem | None:
    return None if spec.get("output", "text") in OUTPUTS else (("output",), f"expected one of {', '.join(OUTPUTS)}")


def _fields(spec: dict) -> Problem | None:
    fields = spec.get("fields", {})
    if not isinstance(fields, dict):
        return ("fields",), "expected a mapping of field -> dotted JSON path"
    for k, v in fields.items():
        if k not in FIELDS:
            return ("fields", k), f"unknown field; expected one of {', '.join(FIELDS)}"
        if not isinstance(v, str):
            return ("fields", k), "expected a dotted path such as usage.input_tokens"
    return None


def _env(spec: dict) -> Problem | None:
    env = spec.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
        return ("env",), "expected a mapping of NAME: value"
    return None


def _version(spec: dict) -> Problem | None:
    ver = spec.get("version")
    if ver is not None and (not isinstance(ver, list) or not ver):
        return ("version",), "expected a list of strings (argv)"
    return None


class CommandAdapter(Adapter):
    def __init__(self, name: str, spec: dict[str, Any]):
        self.name = name
        self.spec = spec
        self.executable = str(spec["command"][0])

    def _argv(self, template: list, prompt: str, arm: Arm, workdir: Path) -> list[str]:
        # Substitute with str.replace, not str.format: a prompt containing braces stays intact.
        out = []
        for item in template:
            s = str(item)
            s = s.replace("{model}", arm.model).replace("{workdir}", str(workdir))
            out.append(s.replace("{prompt}", prompt))
        return out

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = self._argv(self.spec["command"], prompt, arm, workdir)
        argv = argv[:1] + list(arm.args) + argv[1:]
        env = {str(k): str(v) for k, v in (self.spec.get("env") or {}).items()}
        return Invocation(argv, env)

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        return Invocation([self.executable] + list(arm.args))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        res = AgentResult()
        fields = self.spec.get("fields") or {}
        mode = self.spec.get("output", "text")
        values: dict[str, Any] = {}
        if mode == "json":
            obj = last_json_object(stdout) or {}
            values = {f: dig(obj, p) for f, p in fields.items()}
        elif mode == "jsonl":
            for obj in json_lines(stdout):
                for f, p in fields.items():
                    v = dig(obj, p)
                    if v is not None:
                        values[f] = v
        else:
            res.text = stdout.strip()[-4000:] or None
        res.tokens_in = as_int(values.get("tokens_in"))
        res.tokens_out = as_int(values.get("tokens_out"))
        res.cost_usd = as_float(values.get("cost_usd"))
        res.session_id = str(values["session_id"]) if values.get("session_id") is not None else None
        if values.get("text") is not None:
            res.text = str(values["text"])
        if values.get("error"):
            res.error = short(str(values["error"]))
        elif exit_code:
            lines = [ln for ln in (stderr or stdout or "").splitlines() if ln.strip()]
            res.error = short(lines[-1] if lines else f"{self.name} exited with {exit_code}")
        return res

    def version_argv(self) -> list[str]:
        return [str(x) for x in (self.spec.get("version") or [self.executable, "--version"])]
