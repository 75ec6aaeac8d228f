"""``acr run`` and ``acr route``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from acr_cli.cli.common import (
    JSON_HELP,
    MEMORY_HELP,
    PROFILE_HELP,
    check_kind,
    finite,
    json_error,
    load_profile,
    open_memory,
    print_json,
    project_dir,
)
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_CHECK_CHANGED, EXIT_NOT_PASSED, AcrError, Reported
from acr_cli.routing import registry

_ARMS_HELP = ("Exactly these arms, in this order: AGENT:MODEL,AGENT:MODEL,... "
              "(the model part may contain ':' or '/').")


_PROMPT_HELP = ("The coding request, in plain words; `-` reads it from stdin (so does a piped stdin when no "
                "request is given).")
_PROMPT_FILE_HELP = "Read the request from a file (UTF-8, at most 4 MiB)."
RACE_HELP = ("N: start the plan's first N arms at once, each in its own git worktree (1: no race); auto (auto:M): "
             "the plan chooses how many, up to 3 (M). The verifier picks the winner. Default: the race setting.")
_POLICY_HELP = (f"Routing policy (default: the profile's, learned): {registry.help_text(live=True)}. "
                "linucb, lints, knn, random and always make one attempt per task.")
PROMPT_MAX_BYTES = 4 << 20  # 4 MiB: past the context window of any model a profile names (~1M tokens)
_STDIN = "-"


def _prompt(prompt: Optional[str], prompt_file: Optional[Path], command: str = "run") -> str:
    """The request: the argument, ``--prompt-file``, or stdin (``-``, or a piped stdin and no argument)."""
    example = ('acr run "describe the change you want" --verify "pytest -q"' if command == "run" else
               'acr route "describe the change you want" --explain')
    if prompt_file is not None:
        if prompt:
            how = "on stdin (`-`)" if prompt == _STDIN else "as an argument"
            raise AcrError(f"give the request either {how} or with --prompt-file, not both")
        try:
            with open(prompt_file, "rb") as f:
                data = f.read(PROMPT_MAX_BYTES + 1)
        except OSError as e:
            raise AcrError(f"--prompt-file {prompt_file}: {e.strerror}") from None
        text = _request_text(data, f"--prompt-file {prompt_file}")
    elif prompt == _STDIN or (prompt is None and _stdin_is_piped()):
        text = _request_text(_read_stdin(command, example), "the request on stdin")
        if not text.strip():
            raise AcrError("the request on stdin is empty", hint=f"echo \"describe the change\" | acr {command} -")
    elif prompt is None:  # nothing given, and stdin is a terminal (or closed): never wait on it
        raise AcrError("no request given", hint=f"{example}; or pipe it in: echo \"...\" | acr {command} -")
    else:
        text = prompt
    if not text.strip():
        raise AcrError("the request is empty", hint=example)
    if "\0" in text:  # no program can receive it in an argument, and no agent reads it as text
        line = text.count("\n", 0, text.index("\0")) + 1
        raise AcrError(f"the request contains a NUL byte (line {line})", hint="remove it; a request is plain text")
    return text


def _is_terminal(stream) -> bool:
    """``stream`` is open and a terminal (a closed stdin or stdout is None, or raises)."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def _stdin_is_piped() -> bool:
    """stdin is open and not a terminal (a pipe, a file, /dev/null): the request may come from it."""
    try:
        return sys.stdin is not None and not sys.stdin.isatty()
    except (ValueError, OSError):  # closed
        return False


def _read_stdin(command: str, example: str) -> bytes:
    if sys.stdin is None:
        raise AcrError("`-` reads the request from stdin, but stdin is closed", hint=example)
    if sys.stdin.isatty():  # asked for with `-`: read what the user types, and say how to end it
        echo(f"acr {command}: type the request, then Ctrl-D on a line of its own", err=True)
    stream = getattr(sys.stdin, "buffer", None)
    try:
        if stream is None:  # a text-only stdin (an embedding program's)
            return sys.stdin.read(PROMPT_MAX_BYTES + 1).encode("utf-8", "surrogateescape")
        return stream.read(PROMPT_MAX_BYTES + 1)
    except OSError as e:
        raise AcrError(f"the request could not be read from stdin: {e.strerror or e}") from None


def _request_text(data: bytes, where: str) -> str:
    """Bytes read for the request, as text: bounded and UTF-8, or an error naming where they came from."""
    if len(data) > PROMPT_MAX_BYTES:
        raise AcrError(f"{where} is over {PROMPT_MAX_BYTES >> 20} MiB, more than any model reads",
                       hint="give the agent the part that matters; it can read the project's files itself")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        what = "not a UTF-8 text file" if where.startswith("--prompt-file") else "not UTF-8 text"
        raise AcrError(f"{where}: {what} (byte {e.start + 1}, line {line})",
                       hint="convert it first, e.g. iconv -f latin1 -t utf-8") from None


def _policy(policy: Optional[str]) -> Optional[str]:
    if policy is not None:
        registry.parse(policy, live=True)
    return policy


_KIND_HELP = ("Task kind, instead of classifying the prompt: bug_fix, feature, test_generation, refactor, explain, "
              "data_science, algorithm, docs or multi_file.")


def run(
    prompt: Optional[str] = typer.Argument(None, help=_PROMPT_HELP, show_default=False),
    verify: Optional[str] = typer.Option(None, "--verify", "-v",
                                         help="Command that checks the result (exit 0 = pass), e.g. \"pytest -q\". "
                                              "Default: .acr.toml, then config.toml, then the profile; "
                                              "--verify \"\" runs none."),
    arms: Optional[str] = typer.Option(None, "--arms", help=_ARMS_HELP),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    policy: Optional[str] = typer.Option(None, "--policy", help=_POLICY_HELP),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, callback=finite,
                                             help="USD budget for the task: no attempt starts once it is spent, nor one "
                                                  "the learned policy expects to go over it. An attempt's real cost is "
                                                  "known only when it ends."),
    max_attempts: Optional[int] = typer.Option(None, "--max-attempts", min=1, help="Attempts at most (profile default: 3)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, callback=finite,
                                            help="Seconds per attempt before the agent is killed."),
    verify_timeout: Optional[float] = typer.Option(None, "--verify-timeout", min=1, callback=finite,
                                                   help="Seconds for the verifier."),
    kind: Optional[str] = typer.Option(None, "--kind", help=_KIND_HELP),
    project: Optional[Path] = typer.Option(None, "--project", "-C", help="Project directory (default: current)."),
    permissions: Optional[str] = typer.Option(None, "--permissions",
                                              help="read-only, workspace-write (default) or full."),
    no_rollback: bool = typer.Option(False, "--no-rollback", help="Do not checkpoint/restore the work tree (no git needed)."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Open the chosen agent's own interactive screen."),
    prompt_file: Optional[Path] = typer.Option(None, "--prompt-file", help=_PROMPT_FILE_HELP),
    no_baseline: bool = typer.Option(False, "--no-baseline",
                                     help="Do not run the verifier on the untouched tree before the first attempt."),
    yes: bool = typer.Option(False, "--yes", "-y",
                             help="Run even when the verifier already passes before any change."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live output; only the answer and the summary."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
    sandbox: Optional[str] = typer.Option(None, "--sandbox", metavar="bwrap|none",
                                          help="bwrap: run the agent and its verifier in bubblewrap, writing only "
                                               "the work tree, the agent's own directories and a private temp "
                                               "(Linux; default: the sandbox setting, else none)."),
    race: Optional[str] = typer.Option(None, "--race", metavar="N|auto[:M]", help=RACE_HELP),
    race_pick: str = typer.Option("first", "--race-pick",
                                  help="first (the first pass wins, the others are stopped), cheapest or smallest "
                                       "(wait for all; the cheapest or smallest passing change wins)."),
    race_setup: Optional[str] = typer.Option(None, "--race-setup", metavar="CMD",
                                             help="Command run in each race worktree before its agent, as the "
                                                  "verifier runs (e.g. \"npm ci\"); ACR_RACE_SLOT (0..N-1) and "
                                                  "ACR_RACE_WORKTREE are set for it, the agent and the verifier. "
                                                  "Default: the race_setup setting; \"\" runs none."),
) -> None:
    """Route a coding request to an agent, verify, roll back and escalate on failure, remember.

    Examples:

      acr run "fix the failing parser test" --verify "pytest -q"

      acr run --arms codex:gpt-5.4,claude:claude-opus-4-6 "port the CSV reader"

    Exit codes: 0 an attempt passed, 1 none passed, 2 usage/configuration error, 3 the check passed
    but the attempt had changed what it reads (its work is kept, unverified), 130 Ctrl-C (143 SIGTERM,
    129 SIGHUP: each cancels like Ctrl-C, with the work tree rolled back).
    """
    from acr_cli.session import RunRequest, prepare

    text = _prompt(prompt, prompt_file)
    proj = project_dir(project)
    kind, policy = check_kind(kind), _policy(policy)
    if interactive:
        _check_interactive(text)
    req = RunRequest(text, proj, verify=verify, arms=arms, profile=profile, policy=policy, kind=kind,
                     max_cost=max_cost, max_attempts=max_attempts, timeout=timeout, verify_timeout=verify_timeout,
                     permissions=permissions, baseline="off" if no_baseline else ("accept" if yes else None),
                     rollback=not no_rollback, interactive=interactive, memory=memory, sandbox=_sandbox(sandbox),
                     race=_race(race), race_pick=race_pick, race_setup=race_setup)
    report = _execute(prepare(req, load_profile=load_profile, open_memory=open_memory), quiet, json_out)
    _show_report(report, json_out)
    _exit(report)


def _sandbox(mode: Optional[str]) -> Optional[str]:
    """--sandbox as given, checked: bwrap or none."""
    from acr_cli.config import SANDBOX_MODES as MODES

    if mode is not None and mode not in MODES:
        raise AcrError(f"--sandbox {mode!r}: expected bwrap or none", hint="acr run --sandbox bwrap \"...\"")
    return mode


def _race(value: Optional[str]) -> Optional[str]:
    """--race as given, checked (N, auto or auto:M; acr_cli.routing.race.parse_ask)."""
    from acr_cli.routing.race import parse_ask

    if value is None:
        return None
    try:
        parse_ask(value)
    except ValueError as e:
        raise AcrError(f"--race: {e}", hint="acr run --race 3 \"...\", or --race auto") from None
    return value.strip().lower()


def _check_interactive(text: str) -> None:
    """--interactive needs a terminal, and the request as one argument (the agent's stdin is the terminal)."""
    from acr_cli.agents.base import ARGV_PROMPT_MAX, prompt_fits_argv

    if not (_is_terminal(sys.stdin) and _is_terminal(sys.stdout)):
        raise AcrError("--interactive needs a terminal (stdin and stdout); run without it to use the "
                       "agents' non-interactive mode")
    if not prompt_fits_argv(text):
        raise AcrError(f"--interactive passes the request to the agent as one argument, at most "
                       f"{ARGV_PROMPT_MAX // 1000} KB; this one is {len(text.encode()) // 1000} KB",
                       hint="run without --interactive: a long request then goes to the agent's stdin")


def _execute(run, quiet: bool, json_out: bool):
    """The prepared run to its end (warnings, the baseline, the attempts), closed whatever happens; Ctrl-C
    before an attempt started, or between two, ends it with nothing of the agents' to undo."""
    from acr_cli import interrupts
    from acr_cli.cli.render import LiveView

    view = LiveView(quiet=quiet)
    try:
        for warning in run.warnings:
            echo(f"acr: warning: {warning}", err=True)
        _baseline(run, quiet)
        return run.execute(on_event=view.event, on_output=view.output)
    except KeyboardInterrupt:
        echo(f"acr: cancelled ({interrupts.describe()}); no attempt was running", err=True)
        if json_out:
            json_error(f"cancelled ({interrupts.describe()}); no attempt was running", None, interrupts.exit_code())
        raise Reported(interrupts.exit_code()) from None
    finally:
        run.close()


def _baseline(run, quiet: bool) -> None:
    """The verifier on the untouched tree; one that already passes runs the agents only when the user says so."""
    from acr_cli.cli.render import print_baseline

    base = run.baseline()
    if base is None:
        return
    print_baseline(base, run.verify, quiet=quiet)
    if base.passed and run.options["baseline"].value == "check" and not _confirm_passing_baseline():
        raise AcrError("the verifier already passes before any change: it cannot tell whether the work "
                       "gets done; no agent was run",
                       hint="give a check that fails until the work is done, or pass --yes to run anyway "
                            "(`baseline = \"accept\"` in .acr.toml or config.toml does that for good)")


def _show_report(report, json_out: bool) -> None:
    """The answer and the summary (or the --json object), then what the user should know after the run."""
    from acr_cli.cli.render import print_run_summary

    if json_out:
        print_json(report.to_json())
    else:
        print_run_summary(report)
    if report.pruned is not None and report.pruned.count:
        echo(f"acr: {report.pruned.line()} (`acr gc`, at most once a day)", err=True)
    result = report.result
    if result.forgotten:
        echo(f"acr: warning: task {result.task_id} was forgotten (`acr memory forget`) while it ran; its "
             "attempts from then on are not in memory", err=True)


def _exit(report) -> None:
    """The exit code: 0 accepted (passed, or unverified), 1 none passed, 3 kept but its check changed, and a
    cancelled run's signal code."""
    from acr_cli import interrupts

    result = report.result
    if result.cancelled:
        raise Reported(interrupts.exit_code())
    if not result.accepted:  # an unverified attempt ends the task like a pass: exit 0 (--json says which)
        raise Reported(EXIT_NOT_PASSED)
    if report.final is not None and report.final.check_changed:  # kept, but no check the user gave judged it
        raise Reported(EXIT_CHECK_CHANGED)


def _confirm_passing_baseline() -> bool:
    """Ask on a terminal whether to run although the verifier already passes; without one (CI, a pipe): no."""
    if not _is_terminal(sys.stdin):  # (None: stdin closed)
        return False
    return typer.confirm("acr: the verifier already passes before any change, so it cannot tell whether the "
                         "work gets done. Run the agents anyway?", default=False, err=True)


def route(
    prompt: Optional[str] = typer.Argument(None, help=_PROMPT_HELP, show_default=False),
    explain: bool = typer.Option(False, "--explain", "-e", help="Show the context and the numbers behind the ranking."),
    arms: Optional[str] = typer.Option(None, "--arms", help=_ARMS_HELP),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    policy: Optional[str] = typer.Option(None, "--policy", help=_POLICY_HELP),
    kind: Optional[str] = typer.Option(None, "--kind", help=_KIND_HELP),
    project: Optional[Path] = typer.Option(None, "--project", "-C", help="Project directory (default: current)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    prompt_file: Optional[Path] = typer.Option(None, "--prompt-file", help=_PROMPT_FILE_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
    race: Optional[str] = typer.Option(None, "--race", metavar="N|auto[:M]", help=RACE_HELP),
) -> None:
    """Decide only: classify the request and show the order acr would try arms in. Runs nothing.

    Example: acr route "add type hints to utils.py" --explain

    With --race (or the race setting) it also shows the race acr run would start: which arms, the chance that at
    least one passes, what they are expected to cost and take, and, for --race N, what the plan would choose.

    The request may also come from stdin: git log -1 --format=%B | acr route -
    """
    from acr_cli.cli.render import print_race, print_route
    from acr_cli.plan import RunRequest, plan

    text = _prompt(prompt, prompt_file, command="route")
    proj = project_dir(project)
    kind, policy = check_kind(kind), _policy(policy)
    req = RunRequest(text, proj, arms=arms, profile=profile, policy=policy, kind=kind, memory=memory, race=_race(race))
    made = plan(req, load_profile=load_profile,
                open_memory=lambda where, **kw: open_memory(where, create=False, read_only=True, **kw))
    for note in made.notes:
        echo(f"acr: warning: {note}", err=True)
    try:
        order = made.order()
        similar = made.similar() if explain or json_out else ([], {})
        raced = made.race_choice(order)
    finally:
        made.close()
    if json_out:
        print_json({**route_json(made, order, similar), **({"race": race_json(raced)} if raced else {})})
    else:
        print_route(made, order, explain, similar=similar)
        if raced:
            print_race(raced, explain)
    if order and all(p.blocked for p in order):
        raise AcrError("no arm of the plan can run here", hint="`acr doctor` says what each one needs")


def race_json(choice) -> dict:
    """The race in ``acr route --json`` (acr_cli.routing.race.RaceChoice): as asked, the raced arms (empty: one
    at a time) and their figures, the expected reward of each race size the plan weighed (1: escalation), why
    fewer race than asked (the budget), and beside a forced race what the plan would choose."""
    plan = choice.plan
    weighed = choice.planner or plan
    return {"ask": choice.ask.label, "forced": not choice.ask.auto, **_race_figures(plan), "joint": plan.joint,
            "expected_reward": {str(k): o.reward for k, o in weighed.options.items()}, "note": choice.note,
            "planner": _race_figures(choice.planner) if choice.planner is not None else None}


def _race_figures(plan) -> dict:
    return {"arms": list(plan.arms), "p_any": plan.p_any, "expected_cost": plan.usd, "expected_minutes": plan.minutes}


def route_json(made, order, similar) -> dict:
    """The ``acr route --json`` object: how the request was read, the order, the arms that cannot run now
    (with the reset time of a usage limit), those the settings took out, and the similar earlier tasks."""
    from acr_cli.context import context_json

    near, moved = similar
    return {
        "context": context_json(made.ctx),
        "profile": made.profile.name,
        "policy": made.policy.name,
        "order": [{"agent": r.arm.agent, "model": r.arm.model, "mean": r.mean, "interval90": list(r.interval),
                   "expected_cost": r.cost, "expected_reward": r.reward, "attempts": r.attempts, "why": r.why}
                  for r in (p.ranked for p in order if not p.blocked)],
        "cannot_run": [{"agent": p.arm.agent, "model": p.arm.model, "reason": p.blocked.reason,
                        "held_until": p.blocked.held_until} for p in order if p.blocked],
        "excluded": [{"arm": arm_id, "by": why} for arm_id, why in made.routing.excluded.items()],
        "similar": [{"task": n.task.task_id, "similarity": round(n.task.similarity, 4),
                     "same_project": n.task.same_project, "created_at": n.task.created_at,
                     "request": n.task.prompt, "outcome": n.task.outcome} for n in near],
        "moved_by_similar": {arm: {"without": a, "with": b} for arm, (a, b) in moved.items()},
    }
