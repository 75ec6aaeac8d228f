"""``acr show``: everything about one task, for a person (or ``--json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import typer

from acr_cli.cli.common import (
    JSON_HELP,
    MEMORY_HELP,
    fmt_money,
    open_local_memory,
    open_memory,
    paths,
    print_json,
    task_state,
)
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_NOT_PASSED, AcrError

TASK_HELP = "The task's id (or the start of it, from `acr memory log`). Default: the latest task in this project."


def show(
    task: Optional[str] = typer.Argument(None, help=TASK_HELP, show_default=False),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """The request, how acr read it, why each arm was chosen, each attempt's verdict, cost, time, answer,
    verifier output, log and kept work, and the change that was kept.

    Examples:

      acr show

      acr show 20261124-101500-a1b2c3 --json
    """
    found = None
    # a team's memory: this machine's own record first (it keeps the texts share_prompts kept back)
    local = open_local_memory(read_only=True, memory=memory) if paths().memory_choice(memory).is_server else None
    if local is not None:
        try:
            found = find_task(local, task, Path.cwd())
        except AcrError as e:
            if e.exit_code != EXIT_NOT_PASSED:
                raise
        finally:
            local.close()
    if found is None:
        mem = open_memory(memory, create=False, read_only=True)
        try:
            found = find_task(mem, task, Path.cwd())
        finally:
            mem.close()
    data = task_json(found)
    if json_out:
        print_json(data)
    else:
        render(data, unreadable=found.get("unreadable") or ())


def find_task(mem, task: str | None, cwd: Path) -> dict[str, Any]:
    """The task named by ``task`` (an id or an unambiguous start of one), else the newest of the project
    ``cwd`` is in. An AcrError (exit 1: nothing to show; 2: an ambiguous id) says what to do."""
    from acr_cli.context import project_root
    from acr_cli.project import identity

    if task is not None:
        task = task.strip()
        hits = mem.tasks(source=None, id_prefix=task, limit=2, mark_unreadable=True) if task else []
        exact = [t for t in hits if t["id"] == task] or mem.tasks(source=None, ids=[task], mark_unreadable=True)
        if exact:
            return exact[0]
        if len(hits) > 1:
            raise AcrError(f"more than one task starts with {task!r}", hint="give more of the id (`acr memory log`)")
        if not hits:
            raise AcrError(f"no task {task!r} in memory", hint="`acr memory log` lists the tasks acr recorded",
                           exit_code=EXIT_NOT_PASSED)
        return hits[0]
    root = project_root(cwd.resolve())
    project = identity(root)
    latest = mem.tasks(project=project, limit=1, mark_unreadable=True)
    if not latest:
        raise AcrError(f"no task recorded for {root} (project {project}) yet",
                       hint="run `acr run ...` here, or name a task: `acr show ID` (`acr memory log` lists them)",
                       exit_code=EXIT_NOT_PASSED)
    return latest[0]


def task_json(t: dict[str, Any]) -> dict[str, Any]:
    """A task as ``acr show --json`` prints it: memory's fields, JSON columns decoded, each attempt in the
    shape ``acr run --json`` gives it (:mod:`acr_cli.attempt_json`)."""
    from acr_cli.attempt_json import stored_attempt_json
    from acr_cli.memory.shapes import SHAPES, load

    attempts = [stored_attempt_json(a) for a in t["attempts"]]
    final = attempts[-1] if attempts else None
    kept = final["changes"] if final and final["verdict"] in ("passed", "unverified") else []
    return {
        "id": t["id"], "created_at": t["created_at"], "finished_at": t["finished_at"], "state": task_state(t),
        "passed": None if t["passed"] is None else bool(t["passed"]), "cost_usd": t["cost_usd"],
        "project": t["project"], "prompt": t["prompt"], "policy": t["policy"],
        # how the request was read, as kept; the task's own columns over it
        "context": {**{k: v for k, v in (load("context", t.get("context")) or {}).items() if k in SHAPES["context"]},
                    **{k: t[k] for k in ("kind", "language", "size", "groups") if t.get(k) is not None}},
        "baseline": load("baseline", t.get("baseline")),
        "answer": final["text"] if final else None,
        "changes": [{"path": p, "added": a, "deleted": d} for p, a, d in kept],
        "attempts": attempts,
    }


def _block(text: str | None, indent: str = "    │ ") -> list[str]:
    return [indent + line for line in (text or "").rstrip("\n").splitlines()]


def _section(title: str, text: str) -> None:
    echo(f"  {title}:")
    for line in _block(text):
        echo(line)


def _request_lines(d: dict[str, Any]) -> None:
    """The task line, the project, the request and how acr read it (kind, language, size, reasons, groups)."""
    ctx = d["context"]
    echo(f"task {d['id']} · {d['state']} · {fmt_money(d['cost_usd'], None)} · {d['created_at']}")
    if d["project"]:
        echo(f"project: {d['project']}")
    echo("request:")
    for line in _block(d["prompt"] or "(not kept)", "  "):
        echo(line)
    echo(f"read as: {ctx.get('kind')} · {ctx.get('language') or 'unknown language'} · {ctx.get('size')}"
         f" · policy {d['policy']}")
    for reason in ctx.get("reasons") or []:
        echo(f"  - {reason}")
    if ctx.get("groups"):
        echo(f"  - groups (coarse to fine): {' > '.join(ctx['groups'])}")


def _baseline_line(d: dict[str, Any], unreadable: Sequence[str]) -> str:
    """What the verifier did before any change: its result, why it is missing, or that there was none."""
    b = d["baseline"]
    verifier = next((a["verifier"] for a in d["attempts"] if a.get("verifier")), None) or (b or {}).get("command")
    if b is not None:
        exit_code = f" (exit {b['exit_code']})" if b.get("exit_code") is not None else ""
        how = "passed" if b["passed"] else ("timed out" if b.get("timed_out") else f"failed{exit_code}")
        return f"baseline: `{verifier}` {how} before any change, {b['duration_s']:.1f}s"
    if "baseline" in unreadable:
        return "baseline: not kept (its record in memory cannot be read)"
    if verifier:
        return f"baseline: not run (verifier `{verifier}`)"
    return "verifier: none (attempts were accepted unverified)"


def _attempt_lines(a: dict[str, Any]) -> None:
    """One attempt: arm, verdict, cost and time; why it was chosen and how it ended; its answer, the verifier's
    last lines when it did not pass, where its work is kept and its log."""
    from acr_cli.cli.render import answer_label
    from acr_cli.session import kept_line

    echo("")
    echo(f"attempt {a['seq']}: {a['agent']}:{a['model']} · {a['verdict']} · {fmt_money(a['cost_usd'], None)}"
         f" ({a['cost_source'] or 'unknown'}) · {a['duration_s'] or 0:.1f}s")
    if a["reason"]:
        echo(f"  chosen: {a['reason']}")
    if a["detail"]:
        echo(f"  ended: {a['detail']}")
    label = answer_label(a["verdict"], a["text"], a["detail"])
    if label:
        _section(label, a["text"])
    if a["verifier_tail"] and a["verdict"] not in ("passed", "unverified"):
        _section("the verifier printed (last lines)", a["verifier_tail"])
    kept = kept_line(a.get("base_tree"), a["attempt_ref"])
    if kept:
        echo(f"  {kept}")
    if a["log_path"]:
        echo(f"  log: {a['log_path']}")


def render(d: dict[str, Any], unreadable: Sequence[str] = ()) -> None:
    """Plain lines (they survive a pipe and a copy), in the order a person asks about them. ``unreadable``:
    memory's columns of the task that cannot be read, so not kept (a baseline among them ran: not "not run").
    Every line goes through ``echo``: memory's text may hold what a request or an agent planted for a
    terminal, and echo escapes it."""
    from acr_cli.cli.render import diffstat_lines

    _request_lines(d)
    echo(_baseline_line(d, unreadable))
    if not d["attempts"] and d["state"] != "running":
        echo("")
        echo("no attempt was recorded: acr stopped while the first one ran (killed; `acr recover` put the work "
             "tree back and ended the task)")
    for a in d["attempts"]:
        _attempt_lines(a)
    if d["changes"]:
        echo("")
        echo("kept change (uncommitted in the work tree when the run ended):")
        for line in diffstat_lines([(c["path"], c["added"], c["deleted"]) for c in d["changes"]]):
            echo(line)
