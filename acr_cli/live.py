"""The live environment: an attempt is an agent CLI run in the project, then the verifier.

Per attempt: checkpoint the work tree, build the prompt (with what the
previous attempt's verifier said), run the agent through the process runner
(log file, live output, timeout), parse its output, run the verifier, and
roll the work tree back unless the attempt passed.
"""

from __future__ import annotations

import os
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from acr_cli import agents, interrupts, process
from acr_cli.agents.base import Adapter, AgentResult, short
from acr_cli.checks import Changes, check_inputs, describe, protected, stray_bytecode
from acr_cli.context import Context
from acr_cli.domain import (
    CANCELLED,
    COST_CATALOG,
    COST_PLAN,
    COST_PRICED,
    COST_REPORTED,
    COST_UNKNOWN,
    ERROR,
    FAILED,
    PASSED,
    TIMEOUT,
    UNVERIFIED,
    Arm,
    AttemptAborted,
    Feedback,
    TaskState,
)
from acr_cli.errors import WorkspaceError
from acr_cli.health import limits
from acr_cli.health.errors import Problem, usage_limit
from acr_cli.health.errors import classify as classify_error
from acr_cli.health.state import HealthBook
from acr_cli.pricing import catalog_price
from acr_cli.profiles import Profile
from acr_cli.redact import redact
from acr_cli.sandbox import Sandbox, writable_in
from acr_cli.verify import VerifierResult, run_verifier
from acr_cli.workspace import Guard, Workspace
from acr_cli.workspace.kept import command as kept_command
from acr_cli.workspace.refs import few

OutputCallback = Callable[[Adapter, str, str], None]  # (adapter, stream, line)

# said of a failed attempt whose check printed what it printed on the untouched tree (timings and temporary paths
# aside): the files may well have changed; what did not is the check's failure
SAME_FAILURE = "the check failed as it did before the attempt (same output): the attempt's changes did not change its result"


def build_prompt(prompt: str, tried: list[Feedback], verify: str | None, tell_verifier: bool = True) -> str:
    """The request; on the first attempt, the command that will check the work (unless the profile's
    ``tell_verifier`` is off); after a failure, what the last failed attempt's verifier said."""
    last = next((fb for fb in reversed(tried) if fb.verdict in (FAILED, TIMEOUT, ERROR)), None)
    if last is None:
        if not (verify and tell_verifier):
            return prompt
        return "\n".join([prompt, "", "---",
                          f"Note from acr: when you are done, acr checks the work by running `{verify}` in this "
                          "directory; the work is accepted when that command exits 0."])
    lines = [prompt, "", "---",
             f"Note from acr: an earlier attempt at this request ({last.arm.id}) did not succeed "
             f"({last.verdict}: {short(last.reason, 300)}). Its changes were rolled back; the files are as "
             "they were before it."]
    if last.verifier_tail and verify:
        lines += [f"The check `{verify}` printed (last lines):", "```", last.verifier_tail, "```"]
        if last.verifier_unchanged:
            lines.append("That is what the check printed before the attempt too: the attempt's changes did not "
                         "change the check's result.")
    # a NUL the check or the agent printed cannot be passed in an argument (the request itself has none)
    return "\n".join(lines).replace("\0", "\ufffd")


def _drop_stray_bytecode(root: Path, changes: Changes, log) -> None:
    """Remove the ignored ``__pycache__`` bytecode a kept attempt wrote or changed (acr_cli.checks.stray_bytecode):
    Python compiles it again from the source, and a planted file cannot answer for its source later."""
    removed = []
    inside = os.path.realpath(root) + os.sep
    for path in stray_bytecode(changes):
        target = root / path
        try:  # a regular file in the project, never one a symlinked folder leads out to
            if target.is_file() and not target.is_symlink() and os.path.realpath(target).startswith(inside):
                target.unlink()
                removed.append(path)
        except OSError:
            pass
    if removed:
        log.write(f"--- removed {len(removed)} bytecode file(s) the attempt wrote in ignored __pycache__ folders "
                  f"(Python compiles them again from the source): {few(removed, 10)}\n")


def _utf8(text: str | None) -> str | None:
    """``text`` as UTF-8 can carry it: a lone surrogate becomes U+FFFD."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


@dataclass(frozen=True)
class Usage:
    """What an agent's output says it used and answered: tokens, cost (and where the cost comes from), its
    session and final message."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    cost_source: str = COST_UNKNOWN
    api_cost_usd: float | None = None
    session_id: str | None = None
    final_text: str | None = None


@dataclass(frozen=True)
class Verdict:
    """How an attempt ended (Feedback's verdict, reason, score and the check's findings); ``problem``: an
    error's kind, when the run already knows it (a usage limit)."""

    verdict: str
    reason: str = ""
    score: float | None = None
    problem: Problem | None = None
    verifier_tail: str | None = None
    verifier_unchanged: bool | None = None
    check_changed: list[tuple[str, str]] = field(default_factory=list)
    tests_added: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AgentRun:
    """The agent's run: its exit code and usage, and its verdict when the run decides it (an error, a
    timeout, a failure it reported); ``verdict`` None: it finished, the check decides."""

    exit_code: int | None
    usage: Usage
    verdict: Verdict | None


@dataclass(frozen=True)
class WorkspaceReport:
    """What the work tree says of an attempt (from its :class:`Guard`): what it changed beside the work tree,
    where the user's work before a kept attempt is, where a rolled-back attempt's work is kept, and a kept
    attempt's change (``diffstat``; ``apply_ok``: did it change the work tree; None without a checkpoint)."""

    side_effects: list[str] = field(default_factory=list)
    kept_before: str | None = None
    attempt_ref: str | None = None
    base_tree: str | None = None
    diffstat: list = field(default_factory=list)
    apply_ok: bool | None = None


def usage_of(arm: Arm, parsed: AgentResult) -> Usage:
    """What the parsed output says the attempt used, priced: the profile's $0 wins, then the agent's own
    report, the profile's prices, the price catalog. An arm on a plan costs $0 an attempt; what the API would
    have charged is kept in ``api_cost_usd``."""
    if arm.free:  # $0 in the profile wins over a CLI's own table: claude prices a local model it does not know
        cost, source = 0.0, COST_PRICED
    elif parsed.cost_usd is not None:
        cost, source = parsed.cost_usd, COST_REPORTED
    else:
        cost, source = arm.price(parsed.tokens_in, parsed.tokens_out), COST_PRICED
        if cost is None:  # no price in the profile: the catalog's, else unknown
            cost = catalog_price(arm.agent, arm.model, parsed.tokens_in, parsed.tokens_out)
            source = COST_CATALOG if cost is not None else COST_UNKNOWN
    api = None
    if arm.on_plan:  # paid by a subscription: nothing more to pay for this attempt
        api, cost, source = (cost if source != COST_UNKNOWN else None), 0.0, COST_PLAN
    return Usage(parsed.tokens_in, parsed.tokens_out, cost, source, api, parsed.session_id, parsed.text)


def agent_verdict(parsed: AgentResult) -> Verdict | None:
    """The verdict the agent's own output decides: an error (a usage limit it reported: a problem with its
    reset time), a failure it reported; None when it finished and the check decides."""
    if parsed.error:
        problem = None
        if parsed.limit_resets_at is not None:  # a limit the CLI reported in a structured event
            at = parsed.limit_resets_at
            problem = usage_limit(parsed.error, datetime.fromtimestamp(at, timezone.utc) if at else
                                  limits.reset_time(parsed.error))
        return Verdict(ERROR, parsed.error, problem=problem)
    if parsed.failed:
        return Verdict(FAILED, parsed.failed)
    return None


def stalled_verdict(stalled: str) -> Verdict:
    """An agent killed by its watchdog: silent (a retry loop out of quota) or a limit read in the CLI's log."""
    said = limits.is_limit(stalled)  # the watchdog read the provider's limit in the CLI's log
    return Verdict(ERROR, f"{stalled}; the agent's process group was killed",
                   problem=usage_limit(stalled, limits.reset_time(stalled) if said else None,
                                       what="usage limit reached" if said else
                                       "no answer from the model (a silent retry: out of quota?)"))


def assemble(arm: Arm, log_path: str, started: float, run: AgentRun | None, verdict: Verdict | None,
             workspace: WorkspaceReport) -> Feedback:
    """The attempt's outcome from its parts; no verdict: an error that said nothing (a workspace failure)."""
    verdict = verdict or Verdict(ERROR)
    return Feedback(arm=arm, log_path=log_path, duration_s=time.monotonic() - started,
                    exit_code=run.exit_code if run else None, **vars(run.usage if run else Usage()),
                    **vars(verdict), **vars(workspace))


class AttemptLog:
    """An attempt's log file that never stops the attempt: a write that fails (a full disk, an I/O
    error) ends logging for the attempt and is remembered in ``problem``, the agent's output keeps
    being read. Created 0600: an agent's output may quote the user's files."""

    def __init__(self, path: Path):
        self.path, self.problem, self._f = path, None, None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            self._f = os.fdopen(fd, "w", encoding="utf-8")
        except OSError as e:
            self.problem = f"could not be written: {e.strerror or e}"

    def write(self, text: str) -> None:
        if self._f is None:
            return
        try:
            self._f.write(text)
        except (OSError, ValueError) as e:
            self._stop(e)

    def tell(self) -> int:
        """Bytes in the file so far: process.run's budget for the output it logs counts them."""
        try:
            return self._f.tell() if self._f is not None else 0
        except (OSError, ValueError):
            return 0

    def _stop(self, e: Exception) -> None:
        self.problem = self.problem or f"logging stopped: {getattr(e, 'strerror', None) or e}"
        f, self._f = self._f, None
        try:
            f.close()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> "AttemptLog":
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            try:
                self._f.close()
            except OSError as e:
                self._f = None
                self.problem = self.problem or f"logging stopped: {e.strerror or e}"


class LiveEnvironment:
    def __init__(self, *, profile: Profile, project: Path, logs_dir: Path, workspace: Workspace | None,
                 verify: str | None, timeout: float, verify_timeout: float, permissions: str,
                 interactive: bool = False, on_output: OutputCallback | None = None, health: HealthBook | None = None,
                 baseline: VerifierResult | None = None, tell_verifier: bool = True,
                 protect: tuple[str, ...] = (), sandbox: Sandbox | None = None):
        self.profile = profile
        self.project = project
        self.logs_dir = logs_dir
        self.workspace = workspace
        self.verify = verify
        self.timeout = timeout
        self.verify_timeout = verify_timeout
        self.permissions = permissions
        self.interactive = interactive
        self.on_output = on_output
        self.health = health  # arm health in memory: set-up errors set arms aside, transient ones cool them
        self.baseline = baseline  # the verifier on the untouched tree: a failure to compare with
        self.tell_verifier = tell_verifier
        self.protect = tuple(protect)  # globs: an attempt that changes a matching path fails (acr_cli.checks)
        self.sandbox = sandbox  # the agent and its verifier run in it (acr_cli.sandbox); None: no sandbox
        # asked while the agent or its verifier runs: a reason it returns cancels the attempt (a race another arm
        # won), the running process group killed at once
        self.stop: Callable[[], str | None] | None = None
        # variables added to the environment of the agent, its verifier and set-up (a race lane's slot)
        self.extra_env: dict[str, str] = {}
        # run before each attempt's checkpoint (with its log and marker): a reason it returns fails the attempt
        # without starting its agent (a race worktree's set-up command that failed); see :meth:`_prepare`
        self.before_agent: Callable[[AttemptLog, str], str | None] | None = None

    def adapter(self, arm: Arm) -> Adapter:
        return agents.get(arm.agent, self.profile.agents)

    def unavailable(self, arm: Arm) -> str | None:
        """Why ``arm`` cannot be tried now (acr_cli.plan.ArmGate: the one place that says so), or None."""
        from acr_cli.plan import ArmGate

        return ArmGate(self.profile, self.health).why_not(arm)

    def attempt(self, arm: Arm, ctx: Context, state: TaskState, task_id: str, seq: int) -> Feedback:
        """Run one attempt and return its outcome. A workspace failure (e.g. the attempt deleted .git, or its
        rollback failed) raises :class:`AttemptAborted` carrying the outcome: the loop records it, then stops."""
        adapter = self.adapter(arm)
        log_path = self.logs_dir / task_id / f"{seq}-{arm.agent}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        prompt = build_prompt(ctx.prompt, state.tried, self.verify, self.tell_verifier)
        started = time.monotonic()
        run = verdict = abort = None
        workspace = WorkspaceReport()
        marker = secrets.token_hex(8)  # in the agent's environment: says nothing of where the checkpoint is
        with AttemptLog(log_path) as log:
            early = self._prepare(log, marker)
            if early is not None:  # no agent ran: nothing to roll back, nothing the arm did
                fb = assemble(arm, str(log_path), started, None, early, workspace)
                log.write(f"--- verdict: {fb.verdict} ({redact(fb.reason)})\n")
                return fb
            with self._guarded(f"{task_id}-{seq}", marker) as guard:
                if guard is not None and guard.cp.unprotected:
                    log.write("--- ignored entries not kept for rollback (over its budget, or a nested "
                              f"repository), left as the attempt makes them: {', '.join(guard.cp.unprotected)}\n")
                try:
                    run = self._run(adapter, arm, prompt, log, marker)
                    verdict, changes = run.verdict, None
                    if verdict is None:  # the agent finished: the check decides
                        verdict, changes, problem = self._judge(guard, log, marker)
                        if problem is not None:  # judged as before, then the task stops
                            raise problem
                    if guard is not None:
                        # first: a signal from here on keeps a passing attempt's work, as its verdict says
                        guard.passed = verdict.verdict in (PASSED, UNVERIFIED)
                        with interrupts.deferred():  # (the report is kept whatever signal arrives)
                            workspace = self._survey(guard, changes, log)
                except (process.Cancelled, KeyboardInterrupt) as e:
                    run, verdict = self._cancelled(e, adapter, arm, run, verdict, log)
                except WorkspaceError as e:  # e.g. the attempt deleted .git: record the attempt, then stop
                    abort = e
                    if guard is not None:
                        guard.abandon()
                if guard is not None:
                    workspace, failed = self._finish_guard(guard, workspace, log)
                    abort = abort or failed
            fb = assemble(arm, str(log_path), started, run, verdict, workspace)
            log.write(f"--- verdict: {fb.verdict} ({redact(fb.reason)})\n")
        if log.problem:  # said in the attempt itself: memory and the run's output
            fb = replace(fb, reason=f"{fb.reason} (its log is incomplete: {log.problem})".lstrip())
        fb = self._note_health(arm, fb)
        if abort is not None:
            raise AttemptAborted(fb, abort)
        return fb

    def _prepare(self, log: AttemptLog, marker: str) -> Verdict | None:
        """Run :attr:`before_agent`: None when there is none or it went well, else the attempt's verdict without
        an agent: an error saying why (not the arm's doing: no health is noted, no skill is judged, it cost
        nothing), or cancelled when the race was stopped (or Ctrl-C came) while it ran."""
        if self.before_agent is None:
            return None
        try:
            why = self.before_agent(log, marker)
        except (process.Cancelled, KeyboardInterrupt):
            stopped = self.stop() if self.stop is not None else None
            return Verdict(CANCELLED, f"cancelled {stopped or 'with ' + interrupts.describe()} before its agent "
                                      "started (its set-up's process group was killed)")
        if why is None:
            return None
        return Verdict(ERROR, f"{why}; its agent was not started")

    def _cancelled(self, e: BaseException, adapter: Adapter, arm: Arm, run: AgentRun | None, verdict: Verdict | None,
                   log) -> tuple[AgentRun | None, Verdict]:
        """The run and verdict of an attempt a signal stopped. Its own verdict stands if it had one (the signal
        came during its rollback); else it is cancelled, with what the agent reported if it was cut off."""
        verdict = verdict or (run.verdict if run is not None else None)
        if verdict is not None:
            return run, verdict
        agent_done = run is not None  # the agent had finished: the check (its verifier) was what was stopped
        if isinstance(e, process.Cancelled):  # cut off while the agent ran: what it reported so far
            run = AgentRun(None, self._read_output(adapter, arm, e.result.stdout, e.result.stderr, None)[0], None)
            self._log_leftovers(e.result, log)
        why = self.stop() if self.stop is not None else None
        killed = ("the agent had finished; its check was stopped, its process group killed" if agent_done
                  else "the agent's process group was killed")
        return run, Verdict(CANCELLED, f"cancelled {why or 'with ' + interrupts.describe()}; {killed}")

    @staticmethod
    def _survey(guard: Guard, changes: Changes | None, log) -> WorkspaceReport:
        """Before the rollback: a kept attempt's change (its stray bytecode removed first), or whether a
        rolled-back one changed anything."""
        if not guard.passed:
            return WorkspaceReport(apply_ok=bool(guard.changes()))
        if changes is not None:  # kept: what a person will review
            _drop_stray_bytecode(guard.ws.root, changes, log)
        diffstat = guard.diffstat()
        return WorkspaceReport(diffstat=diffstat, apply_ok=bool(diffstat))

    def _finish_guard(self, guard: Guard, survey: WorkspaceReport, log) -> tuple[WorkspaceReport, Exception | None]:
        """Roll the attempt back (or survey the kept work) and log it: the workspace's report, and the rollback's
        error, which ends the task. A signal waits for both; the attempt is then recorded all the same (the loop
        stops on interrupts.received)."""
        report = survey
        try:
            with interrupts.deferred():
                guard.finish()
                report = self._log_guard(guard, survey, log)
        except KeyboardInterrupt:
            pass
        return report, guard.error

    def _note_health(self, arm: Arm, fb: Feedback) -> Feedback:
        """What an error says about the arm (not about the model's skill), kept in memory for later runs: the
        outcome with its problem and what acr now does about the arm."""
        if fb.verdict == ERROR and fb.problem is None:
            ran = fb.exit_code not in (None, 126, 127) or bool(fb.tokens_in or fb.tokens_out or fb.final_text
                                                                or fb.session_id)
            fb = replace(fb, problem=classify_error(arm.agent, arm.model, fb.reason, ran=ran))
        if self.health is None:
            return fb
        with interrupts.deferred():
            if fb.problem is not None:
                fb = replace(fb, health=self.health.record(arm, fb.problem, fb.reason).describe())
            elif fb.verdict != ERROR:
                self.health.ran(arm)
        return fb

    @contextmanager
    def _guarded(self, name: str, marker: str) -> Iterator[Guard | None]:
        if self.workspace is None:
            yield None
            return
        with self.workspace.attempt(name, marker) as guard:
            yield guard

    @staticmethod
    def _log_leftovers(res, log) -> None:
        for line in res.leftovers:
            log.write(f"--- a process of the attempt outlived the agent and was ended: {line}\n")
        if res.log_problem:
            log.write(f"--- {res.log_problem}\n")

    @staticmethod
    def _log_guard(guard: Guard, survey: WorkspaceReport, log) -> WorkspaceReport:
        """The finished guard's report, said in the log: a rollback's paths and where its work is kept, the
        user's work kept before the attempt, what it changed beside the work tree."""
        if guard.error is not None:
            log.write(f"--- rollback failed: {guard.error.message}\n")
            return survey
        report = survey
        if guard.report is not None:
            r = guard.report
            log.write(f"--- rolled back {r.paths} changed path(s)")
            if r.saved_as:
                report = replace(report, attempt_ref=r.saved_as, base_tree=guard.cp.tree)
                log.write(f"; what it undid is kept, secrets masked, in acr's store (`{kept_command(r.saved_as)}` "
                          "shows the attempt's changes)")
            log.write("\n")
            for line in r.lines():
                log.write(f"--- {line}\n")
            report = replace(report, side_effects=r.side_effects())
        if guard.kept_before:
            report = replace(report, kept_before=guard.kept_before)
            log.write(f"--- {guard.kept_before}\n")
        if guard.report is None and guard.side_effects:
            report = replace(report, side_effects=list(guard.side_effects))
            log.write("--- besides the work tree the attempt changed (kept with its work):\n"
                      + "".join(f"---   {line}\n" for line in guard.side_effects))
        return report

    def _run(self, adapter: Adapter, arm: Arm, prompt: str, log, marker: str) -> AgentRun:
        """Run the agent (under a pty with ``interactive``, else headless) and read what it reported."""
        if self.interactive:
            inv = adapter.interactive(prompt, arm, self.project, self.permissions)
        else:
            inv = adapter.invocation(prompt, arm, self.project, self.permissions)
        env = process.child_env(self.project, {**self.extra_env, **inv.env})
        log.write(f"--- agent: {arm.id}\n--- argv: {redact(' '.join(repr(a) for a in inv.argv))}\n")
        with self._sandboxed(inv.argv, env, adapter, log) as (argv, env):
            inv = replace(inv, argv=argv)
            if self.interactive:
                return self._run_interactive(adapter, arm, inv, env, log, marker)
            return self._run_headless(adapter, arm, inv, env, log, marker)

    @contextmanager
    def _sandboxed(self, argv: list[str], env: dict[str, str], adapter: Adapter,
                   log) -> Iterator[tuple[list[str], dict[str, str]]]:
        """The agent's argv and environment, inside the run's sandbox when it has one (acr_cli.sandbox)."""
        if self.sandbox is None:
            yield argv, env
            return
        with self.sandbox.wrap(argv, env, self.project, adapter) as (wrapped, wrapped_env):
            log.write(f"--- sandbox: bwrap; writable: {', '.join(writable_in(wrapped))}\n")
            yield wrapped, wrapped_env

    def _run_interactive(self, adapter: Adapter, arm: Arm, inv, env, log, marker: str) -> AgentRun:
        """The agent's own screen: its usage read from its session files, an error from its exit."""
        wall = time.time()
        res = process.run_interactive(inv.argv, cwd=self.project, env=env, marker=marker)
        self._log_leftovers(res, log)
        usage = adapter.session_usage(self.project, wall - 1)
        parsed = AgentResult(*(usage or (None, None)))
        if res.not_started or res.exit_code not in (0, None):
            parsed.error = short(res.stderr) or f"{adapter.executable} exited with {res.exit_code}"
        return AgentRun(res.exit_code, usage_of(arm, parsed), agent_verdict(parsed))

    def _run_headless(self, adapter: Adapter, arm: Arm, inv, env, log, marker: str) -> AgentRun:
        """The agent's non-interactive run: live output, timeout, watchdog; then its output parsed."""
        dog = adapter.watchdog(self.profile.settings.model_silence)
        on_line = _lines(dog.line if dog else None,
                         (lambda stream, line: self.on_output(adapter, stream, line)) if self.on_output else None)
        res = process.run(inv.argv, cwd=self.project, env=env, timeout=self.timeout, on_line=on_line, log=log,
                          stdin_text=inv.stdin, marker=marker, stalled=_first_reason(self.stop, dog.check if dog else None))
        self._log_leftovers(res, log)
        if res.stalled and self.stop is not None and self.stop():  # stopped from outside: cancelled, as by Ctrl-C
            raise process.Cancelled(res)
        if res.stalled:  # a silent retry: what the CLI does when out of quota (its watchdog's docstring)
            verdict = stalled_verdict(res.stalled)
            log.write(f"--- {verdict.reason}\n")
            return AgentRun(res.exit_code, self._read_output(adapter, arm, res.stdout, res.stderr, None)[0], verdict)
        if res.timed_out:
            usage = self._read_output(adapter, arm, res.stdout, res.stderr, res.exit_code)[0]
            return AgentRun(res.exit_code, usage, Verdict(TIMEOUT, f"no result within {self.timeout:g}s; the agent's "
                                                                   "process group was killed"))
        if res.not_started:
            return AgentRun(res.exit_code, Usage(), Verdict(ERROR, res.stderr))
        usage, parsed = self._read_output(adapter, arm, res.stdout, res.stderr, res.exit_code)
        return AgentRun(res.exit_code, usage, agent_verdict(parsed))

    def _judge(self, guard: Guard | None, log, marker: str) -> tuple[Verdict, Changes | None, WorkspaceError | None]:
        """The verdict of an attempt whose agent finished: a change to a ``protect``ed path fails it; else
        the verifier decides (:meth:`_verify`). What the attempt changed is read before the verifier runs (what
        the verifier itself writes is not the attempt's); returned (None without a checkpoint), with the error
        reading it raised (the attempt deleted .git): judged all the same, then the task stops."""
        changes, problem = self._touched(guard, log)
        if changes is not None and self.protect:
            hit = protected(changes, self.protect, self._prefix(guard))
            if hit:
                verdict = Verdict(FAILED, f"it changed protected files: {few(hit, 10)} (protect = "
                                          f"{', '.join(self.protect)}): such an attempt fails, whatever the check says")
                log.write(f"--- {verdict.reason}\n")
                return verdict, changes, None
        if not self.verify:
            return Verdict(UNVERIFIED, "no verifier: accepted on the agent's own word (unverified)"), changes, problem
        return self._verify(changes, guard, log, marker), changes, problem

    def _touched(self, guard: Guard | None, log) -> tuple[Changes | None, WorkspaceError | None]:
        """What the attempt changed, when a check or ``protect`` needs it; or the error reading it raised."""
        if guard is None or not (self.verify or self.protect):
            return None, None
        try:
            changes = guard.touched()
        except WorkspaceError as e:
            return None, e
        if changes.unexamined:
            log.write(f"--- new ignored directories too large to look into for what the check reads: "
                      f"{', '.join(changes.unexamined)}\n")
        return changes, None

    def _verify(self, changes: Changes | None, guard: Guard | None, log, marker: str) -> Verdict:
        """The verifier's verdict: a failure compared with the untouched tree's, a pass checked for changes
        to what the check reads (:mod:`acr_cli.checks`)."""
        try:
            v = run_verifier(self.verify, self.project, self.verify_timeout, log, marker=marker, sandbox=self.sandbox,
                             env=self.extra_env, stop=self.stop)
        except process.Cancelled:  # its output is the verifier's, not the agent's: keep the agent's usage
            raise KeyboardInterrupt from None
        verdict = Verdict(PASSED if v.passed else (TIMEOUT if v.timed_out else FAILED), v.summary(), score=v.score,
                          verifier_tail=v.tail)
        if verdict.verdict == FAILED and self.baseline is not None and not self.baseline.passed:
            unchanged = v.same_output(self.baseline)
            verdict = replace(verdict, verifier_unchanged=unchanged)
            if unchanged:
                verdict = replace(verdict, reason=f"{verdict.reason}; {SAME_FAILURE}")
                log.write("--- the verifier printed what it printed before the attempt (timings aside)\n")
        if verdict.verdict == PASSED and changes is not None:
            verdict = self._passed_inputs(verdict, v.exit_code, changes, guard, log)
        return verdict

    def _passed_inputs(self, verdict: Verdict, exit_code: int | None, changes: Changes, guard: Guard | None,
                       log) -> Verdict:
        """A pass whose check's inputs the attempt changed is unverified; test files it added are named."""
        inputs = check_inputs(changes, self.verify, self._prefix(guard))
        verdict = replace(verdict, tests_added=inputs.tests_added)
        if inputs.changed:  # the check passed, but not the check the user gave: nobody verified the work
            verdict = replace(verdict, verdict=UNVERIFIED, score=None, check_changed=inputs.changed,
                              reason=f"the check passed (exit {exit_code}), but the attempt changed what it reads: "
                                     f"{few(describe(inputs.changed), 10)}; not a verified pass (unverified)")
        elif inputs.tests_added:
            verdict = replace(verdict, reason=f"{verdict.reason}; the attempt added test files: "
                                              f"{few(inputs.tests_added, 10)}")
        log.write(f"--- {verdict.reason}\n" if inputs.changed or inputs.tests_added else "")
        return verdict

    def _prefix(self, guard: Guard | None) -> str:
        """Where the verifier runs (the project directory), relative to the repository's top."""
        if guard is None:
            return ""
        rel = os.path.relpath(os.path.realpath(self.project), os.path.realpath(guard.ws.root))
        return "" if rel == "." else rel.replace(os.sep, "/")

    @staticmethod
    def _read_output(adapter: Adapter, arm: Arm, stdout: str, stderr: str,
                     exit_code: int | None) -> tuple[Usage, AgentResult]:
        """The agent's output parsed (an output its parser cannot read: an error) and priced."""
        try:
            parsed = adapter.parse(stdout, stderr, exit_code)
        except Exception as e:  # output in a shape its parser does not know (a field of another type...)
            parsed = AgentResult(error=f"acr could not read {adapter.executable}'s output ({type(e).__name__}: "
                                       f"{short(str(e), 120)}); the attempt's log has it")
        if not isinstance(parsed.session_id, (str, type(None))):
            parsed.session_id = str(parsed.session_id) if isinstance(parsed.session_id, int) else None
        # half an emoji (a lone surrogate: JSON allows "\ud83d", UTF-8 does not) shown and stored as U+FFFD
        parsed.text, parsed.error, parsed.session_id = (_utf8(parsed.text), _utf8(parsed.error),
                                                        _utf8(parsed.session_id))
        return usage_of(arm, parsed), parsed


def _lines(*callbacks):
    """One line callback calling each of ``callbacks`` that is not None (None when there is none)."""
    live = [c for c in callbacks if c is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def each(stream: str, line: str) -> None:
        for c in live:
            c(stream, line)
    return each


def _first_reason(*checks):
    """One ``stalled`` check asking each of ``checks`` that is not None in turn: the first reason given."""
    live = [c for c in checks if c is not None]
    if len(live) <= 1:
        return live[0] if live else None

    def first() -> str | None:
        return next((why for why in (c() for c in live) if why), None)
    return first
