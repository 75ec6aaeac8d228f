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
    Feedback,
    TaskState,
)
from acr_cli.errors import WorkspaceError
from acr_cli.health import limits
from acr_cli.health.errors import classify as classify_error
from acr_cli.health.errors import usage_limit
from acr_cli.health.state import HealthBook
from acr_cli.pricing import catalog_price
from acr_cli.profiles import Profile
from acr_cli.redact import redact
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
                 protect: tuple[str, ...] = ()):
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

    def adapter(self, arm: Arm) -> Adapter:
        return agents.get(arm.agent, self.profile.agents)

    def unavailable(self, arm: Arm) -> str | None:
        """Why ``arm`` cannot be tried now (acr_cli.plan.ArmGate: the one place that says so), or None."""
        from acr_cli.plan import ArmGate

        return ArmGate(self.profile, self.health).why_not(arm)

    def attempt(self, arm: Arm, ctx: Context, state: TaskState, task_id: str, seq: int) -> Feedback:
        adapter = self.adapter(arm)
        log_path = self.logs_dir / task_id / f"{seq}-{arm.agent}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        prompt = build_prompt(ctx.prompt, state.tried, self.verify, self.tell_verifier)
        started = time.monotonic()
        fb = Feedback(arm=arm, verdict=ERROR, log_path=str(log_path))
        name = f"{task_id}-{seq}"
        marker = secrets.token_hex(8)  # in the agent's environment: says nothing of where the checkpoint is
        with AttemptLog(log_path) as log:
            with self._guarded(name, marker) as guard:
                if guard is not None and guard.cp.unprotected:
                    log.write("--- ignored entries not kept for rollback (over its budget, or a nested "
                              f"repository), left as the attempt makes them: {', '.join(guard.cp.unprotected)}\n")
                try:
                    fb, changes = self._run(adapter, arm, prompt, log, fb, started, marker, guard)
                    if guard is not None:
                        # first: a signal from here on keeps a passing attempt's work, as its verdict says
                        guard.passed = fb.accepted
                        with interrupts.deferred():
                            if fb.accepted:  # kept: what a person will review
                                if changes is not None:
                                    _drop_stray_bytecode(guard.ws.root, changes, log)
                                fb.diffstat = guard.diffstat()
                                fb.apply_ok = bool(fb.diffstat)
                            else:
                                fb.apply_ok = bool(guard.changes())
                except (process.Cancelled, KeyboardInterrupt) as e:
                    # The attempt's own verdict stands if it had one (the signal came during its rollback).
                    if fb.verdict == ERROR and not fb.reason:
                        fb.verdict = CANCELLED
                        fb.reason = f"cancelled with {interrupts.describe()}; the agent's process group was killed"
                        if isinstance(e, process.Cancelled):  # cut off while the agent ran: what it reported so far
                            self._fill_from_output(adapter, arm, fb, e.result.stdout, e.result.stderr, None)
                            self._log_leftovers(e.result, log)
                except WorkspaceError as e:  # e.g. the attempt deleted .git: record the attempt, then stop
                    fb.abort = e
                    if guard is not None:
                        guard.abandon()
                if guard is not None:
                    try:  # a signal now waits for the rollback (or the kept work's survey) and its log line
                        with interrupts.deferred():
                            guard.finish()
                            self._log_guard(guard, fb, log)
                    except KeyboardInterrupt:  # the attempt is recorded all the same; the loop then stops on
                        pass  # interrupts.received
            fb.duration_s = time.monotonic() - started
            log.write(f"--- verdict: {fb.verdict} ({redact(fb.reason)})\n")
        if log.problem:  # said in the attempt itself: memory and the run's output
            fb.reason = f"{fb.reason} (its log is incomplete: {log.problem})".lstrip()
        self._note_health(arm, fb)
        return fb

    def _note_health(self, arm: Arm, fb: Feedback) -> None:
        """What an error says about the arm (not about the model's skill), kept in memory for later runs."""
        if fb.verdict == ERROR and fb.problem is None:
            ran = fb.exit_code not in (None, 126, 127) or bool(fb.tokens_in or fb.tokens_out or fb.final_text
                                                                or fb.session_id)
            fb.problem = classify_error(arm.agent, arm.model, fb.reason, ran=ran)
        if self.health is None:
            return
        with interrupts.deferred():
            if fb.problem is not None:
                fb.health = self.health.record(arm, fb.problem, fb.reason).describe()
            elif fb.verdict != ERROR:
                self.health.ran(arm)

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

    def _log_guard(self, guard: Guard, fb: Feedback, log) -> None:
        if guard.error is not None:
            fb.abort = fb.abort or guard.error
            log.write(f"--- rollback failed: {guard.error.message}\n")
            return
        if guard.report is not None:
            r = guard.report
            log.write(f"--- rolled back {r.paths} changed path(s)")
            if r.saved_as:
                fb.attempt_ref, fb.base_tree = r.saved_as, guard.cp.tree
                log.write(f"; what it undid is kept, secrets masked, in acr's store (`{kept_command(r.saved_as)}` "
                          "shows the attempt's changes)")
            log.write("\n")
            for line in r.lines():
                log.write(f"--- {line}\n")
            fb.side_effects = r.side_effects()
        if guard.kept_before:
            fb.kept_before = guard.kept_before
            log.write(f"--- {guard.kept_before}\n")
        if guard.report is None and guard.side_effects:
            fb.side_effects = list(guard.side_effects)
            log.write("--- besides the work tree the attempt changed (kept with its work):\n"
                      + "".join(f"---   {line}\n" for line in guard.side_effects))

    def _run(self, adapter: Adapter, arm: Arm, prompt: str, log, fb: Feedback, started: float,
             marker: str, guard: Guard | None = None) -> tuple[Feedback, Changes | None]:
        """Run the agent, then judge what it did (:meth:`_judge`). Returns the feedback, and what the attempt
        changed when that was read (None: no checkpoint, or the agent did not finish)."""
        if self.interactive:
            inv = adapter.interactive(prompt, arm, self.project, self.permissions)
        else:
            inv = adapter.invocation(prompt, arm, self.project, self.permissions)
        env = process.child_env(self.project, inv.env)
        log.write(f"--- agent: {arm.id}\n--- argv: {redact(' '.join(repr(a) for a in inv.argv))}\n")
        if self.interactive:
            wall = time.time()
            res = process.run_interactive(inv.argv, cwd=self.project, env=env, marker=marker)
            self._log_leftovers(res, log)
            usage = adapter.session_usage(self.project, wall - 1)
            parsed = AgentResult(*(usage or (None, None)))
            if res.not_started or res.exit_code not in (0, None):
                parsed.error = short(res.stderr) or f"{adapter.executable} exited with {res.exit_code}"
            fb.exit_code = res.exit_code
            self._apply_usage(arm, fb, parsed)
        else:
            dog = adapter.watchdog(self.profile.settings.model_silence)
            on_line = _lines(dog.line if dog else None,
                             (lambda stream, line: self.on_output(adapter, stream, line)) if self.on_output else None)
            res = process.run(inv.argv, cwd=self.project, env=env, timeout=self.timeout, on_line=on_line, log=log,
                              stdin_text=inv.stdin, marker=marker, stalled=dog.check if dog else None)
            self._log_leftovers(res, log)
            fb.exit_code = res.exit_code
            if res.stalled:  # a silent retry: what the CLI does when out of quota (its watchdog's docstring)
                self._fill_from_output(adapter, arm, fb, res.stdout, res.stderr, None)
                fb.verdict, fb.reason = ERROR, f"{res.stalled}; the agent's process group was killed"
                said = limits.is_limit(res.stalled)  # the watchdog read the provider's limit in the CLI's log
                fb.problem = usage_limit(res.stalled, limits.reset_time(res.stalled) if said else None,
                                         what="usage limit reached" if said else
                                         "no answer from the model (a silent retry: out of quota?)")
                log.write(f"--- {fb.reason}\n")
                return fb, None
            if res.timed_out:
                self._fill_from_output(adapter, arm, fb, res.stdout, res.stderr, res.exit_code)
                fb.verdict = TIMEOUT
                fb.reason = f"no result within {self.timeout:g}s; the agent's process group was killed"
                return fb, None
            if res.not_started:
                fb.verdict, fb.reason = ERROR, res.stderr
                return fb, None
            parsed = self._fill_from_output(adapter, arm, fb, res.stdout, res.stderr, res.exit_code)
        if parsed.error:
            fb.verdict, fb.reason = ERROR, parsed.error
            if parsed.limit_resets_at is not None:  # a limit the CLI reported in a structured event
                at = parsed.limit_resets_at
                fb.problem = usage_limit(parsed.error, datetime.fromtimestamp(at, timezone.utc) if at else
                                         limits.reset_time(parsed.error))
            return fb, None
        if parsed.failed:
            fb.verdict, fb.reason = FAILED, parsed.failed
            return fb, None
        return fb, self._judge(fb, guard, log, marker)

    def _judge(self, fb: Feedback, guard: Guard | None, log, marker: str) -> Changes | None:
        """The verdict of an attempt whose agent finished: a change to a ``protect``ed path fails it; else
        the verifier decides, and a pass of a check whose inputs the attempt changed is unverified
        (:mod:`acr_cli.checks`). What the attempt changed is read before the verifier runs (what the
        verifier itself writes is not the attempt's); returned, or None without a checkpoint."""
        changes = problem = None
        if guard is not None and (self.verify or self.protect):
            try:
                changes = guard.touched()
            except WorkspaceError as e:  # (the attempt deleted .git): judged as before, then the task stops
                problem = e
        if changes is not None and changes.unexamined:
            log.write(f"--- new ignored directories too large to look into for what the check reads: "
                      f"{', '.join(changes.unexamined)}\n")
        if changes is not None and self.protect:
            hit = protected(changes, self.protect, self._prefix(guard))
            if hit:
                fb.verdict = FAILED
                fb.reason = (f"it changed protected files: {few(hit, 10)} (protect = "
                             f"{', '.join(self.protect)}): such an attempt fails, whatever the check says")
                log.write(f"--- {fb.reason}\n")
                return changes
        if not self.verify:
            fb.verdict, fb.score = UNVERIFIED, None
            fb.reason = "no verifier: accepted on the agent's own word (unverified)"
            if problem is not None:
                raise problem
            return changes
        try:
            v = run_verifier(self.verify, self.project, self.verify_timeout, log, marker=marker)
        except process.Cancelled:  # its output is the verifier's, not the agent's: keep the agent's usage
            raise KeyboardInterrupt from None
        fb.verdict = PASSED if v.passed else (TIMEOUT if v.timed_out else FAILED)
        fb.score, fb.verifier_tail, fb.reason = v.score, v.tail, v.summary()
        if fb.verdict == FAILED and self.baseline is not None and not self.baseline.passed:
            fb.verifier_unchanged = v.same_output(self.baseline)
            if fb.verifier_unchanged:
                fb.reason += f"; {SAME_FAILURE}"
                log.write("--- the verifier printed what it printed before the attempt (timings aside)\n")
        if fb.verdict == PASSED and changes is not None:
            inputs = check_inputs(changes, self.verify, self._prefix(guard))
            fb.tests_added = inputs.tests_added
            if inputs.changed:  # the check passed, but not the check the user gave: nobody verified the work
                fb.verdict, fb.score, fb.check_changed = UNVERIFIED, None, inputs.changed
                fb.reason = (f"the check passed (exit {v.exit_code}), but the attempt changed what it reads: "
                             f"{few(describe(inputs.changed), 10)}; not a verified pass (unverified)")
            elif inputs.tests_added:
                fb.reason += f"; the attempt added test files: {few(inputs.tests_added, 10)}"
            log.write(f"--- {fb.reason}\n" if inputs.changed or inputs.tests_added else "")
        if problem is not None:
            raise problem
        return changes

    def _prefix(self, guard: Guard | None) -> str:
        """Where the verifier runs (the project directory), relative to the repository's top."""
        if guard is None:
            return ""
        rel = os.path.relpath(os.path.realpath(self.project), os.path.realpath(guard.ws.root))
        return "" if rel == "." else rel.replace(os.sep, "/")

    def _fill_from_output(self, adapter: Adapter, arm: Arm, fb: Feedback, stdout: str, stderr: str,
                          exit_code: int | None) -> AgentResult:
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
        self._apply_usage(arm, fb, parsed)
        return parsed

    @staticmethod
    def _apply_usage(arm: Arm, fb: Feedback, parsed: AgentResult) -> None:
        LiveEnvironment._price(arm, fb, parsed)
        if arm.on_plan:  # paid by a subscription: nothing more to pay for this attempt; what the API would charge kept
            fb.api_cost_usd = fb.cost_usd if fb.cost_source != COST_UNKNOWN else None
            fb.cost_usd, fb.cost_source = 0.0, COST_PLAN

    @staticmethod
    def _price(arm: Arm, fb: Feedback, parsed: AgentResult) -> None:
        fb.tokens_in, fb.tokens_out = parsed.tokens_in, parsed.tokens_out
        fb.session_id = parsed.session_id
        fb.final_text = parsed.text
        if arm.free:  # $0 in the profile wins over a CLI's own table: claude prices a local model it does not know
            fb.cost_usd, fb.cost_source = 0.0, COST_PRICED
        elif parsed.cost_usd is not None:
            fb.cost_usd, fb.cost_source = parsed.cost_usd, COST_REPORTED
        else:
            priced = arm.price(parsed.tokens_in, parsed.tokens_out)
            if priced is not None:
                fb.cost_usd, fb.cost_source = priced, COST_PRICED
            else:  # no price in the profile: the catalog's, else unknown
                listed = catalog_price(arm.agent, arm.model, parsed.tokens_in, parsed.tokens_out)
                fb.cost_usd, fb.cost_source = (listed, COST_CATALOG) if listed is not None else (None, COST_UNKNOWN)


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
