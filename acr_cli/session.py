"""One ``acr run`` as a library call: the command line only parses options and renders what this returns.

    prepared = prepare(RunRequest(text, project, verify="pytest -q"))   # checks, lock, warnings
    try:
        base = prepared.baseline()          # the verifier on the untouched tree (or None)
        report = prepared.execute(on_event=..., on_output=...)
    finally:
        prepared.close()

:func:`plan` is what ``acr route`` shows (acr_cli.plan.Plan): the profile, every option with where its
value came from (:func:`resolve_options`), the memory, the policy and the ranked arms. :func:`prepare`
builds on the same plan and does everything else that needs no agent and may refuse the run (exit 2
through :class:`~acr_cli.errors.AcrError`): the verifier's shell syntax and program, an agent that can
start, the work tree's lock, and warnings about earlier runs. Nothing is recorded before
:meth:`Prepared.execute`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from acr_cli import interrupts, process, sandbox
from acr_cli.config import Option, Settings
from acr_cli.context import Context, context_json
from acr_cli.domain import parse_arm_id
from acr_cli.errors import AcrError
from acr_cli.live import LiveEnvironment
from acr_cli.loop import TaskResult, run_task, summary
from acr_cli.paths import Paths
from acr_cli.plan import Plan, RunRequest, open_plan_memory, settle  # (RunRequest: re-exported)
from acr_cli.profiles import Profile
from acr_cli.redact import redact
from acr_cli.sandbox import Sandbox
from acr_cli.verify import VerifierResult, cannot_run, preflight, run_verifier
from acr_cli.workspace import Workspace
from acr_cli.workspace.core import UnwritableGitDir


@dataclass
class RunReport:
    """What a finished run returns: the task, the context it was routed in, the baseline, the answer."""

    result: TaskResult
    ctx: Context
    verify: str | None
    rollback: bool
    baseline: VerifierResult | None = None
    policy: str = ""
    shared: dict[str, Any] | None = None  # a team's shared memory: where routing read, what the sync did
    pruned: Any = None  # acr_cli.workspace.gc.Pruned: the day's automatic prune after this run (None: not due)

    @property
    def final(self):
        """The feedback of the attempt that ended the task (None: no attempt ran)."""
        return self.result.steps[-1][1] if self.result.steps else None

    @property
    def answer(self) -> str | None:
        """The final text of the attempt that ended the task."""
        fb = self.final
        return fb.final_text if fb is not None else None

    @property
    def kept(self) -> list:
        """The accepted attempt's change, kept in the work tree: (path, added, deleted)."""
        return self.final.diffstat if self.result.accepted and self.final is not None else []

    def to_json(self) -> dict[str, Any]:
        """The ``acr run --json`` object (loop.summary, plus what a person reads: answers, checks, refs)."""
        out = summary(self.result, policy=self.policy or None, verifier=self.verify)
        out["answer"] = redact(self.answer) if self.answer else None
        out["changes"] = changes_json(self.kept)
        out["baseline"] = baseline_json(self.baseline, self.verify)
        out["context"] = context_json(self.ctx)
        out["shared_memory"] = self.shared
        return out


def diff_command(base: str | None, ref: str | None) -> str | None:
    """The git command that shows a rolled-back attempt's work: kept in acr's store (acr_cli.workspace.kept), or,
    by acr before that store, under refs/acr/attempts/ in the project."""
    from acr_cli.workspace.kept import command, is_location

    if is_location(ref):
        return command(ref)
    return f"git diff {base} {ref}" if base and ref else None


def kept_line(base: str | None, ref: str | None) -> str | None:
    """Where a rolled-back attempt's work is kept and the command that shows it, for people."""
    cmd = diff_command(base, ref)
    if cmd is None:
        return None
    from acr_cli.workspace.kept import is_location

    where = "acr's store, secrets masked" if is_location(ref) else ref
    return f"its work is kept in {where}; see it with: {cmd}"


def changes_json(diffstat: list) -> list[dict[str, Any]]:
    return [{"path": p, "added": a, "deleted": d} for p, a, d in diffstat]


def baseline_json(b: VerifierResult | None, command: str | None = None) -> dict[str, Any] | None:
    """The verifier's run on the untouched tree, as memory and ``--json`` keep it (``command``: the verifier)."""
    if b is None:
        return None
    return {"command": redact(command), "passed": b.passed, "exit_code": b.exit_code, "score": b.score,
            "timed_out": b.timed_out, "duration_s": round(b.duration_s, 3), "tail": redact(b.tail)}


@dataclass
class Prepared:
    """A run that passed every check and holds the work tree's lock; :meth:`close` releases it."""

    request: RunRequest
    plan: Plan
    workspace: Any = None  # acr_cli.workspace.Workspace when rolling back
    lock: Any = None
    warnings: list[str] = field(default_factory=list)
    _baseline: VerifierResult | None = None
    _env: LiveEnvironment | None = None

    @property
    def profile(self) -> Profile:
        return self.plan.profile

    @property
    def options(self) -> dict[str, Option]:
        return self.plan.options

    @property
    def memory(self) -> Any:
        return self.plan.memory

    @property
    def verify(self) -> str | None:
        return self.options["verify"].value

    @property
    def sandbox(self) -> Sandbox | None:
        """The run's sandbox (writable: the work tree acr guards, else the project's), None when it is off."""
        if self.options["sandbox"].value != "bwrap":
            return None
        return sandbox.for_project(self.request.project, self.workspace)

    def baseline(self) -> VerifierResult | None:
        """Run the verifier once on the untouched tree (unless ``baseline`` is off or there is none).

        A verifier that cannot run for reasons no code change fixes (acr_cli.verify.cannot_run) is a
        set-up error: :class:`AcrError` before any agent runs. A passing one is returned: whether to
        go on is the caller's question (the check cannot tell whether the work gets done)."""
        if self.verify is None or self.options["baseline"].value == "off":
            return None
        try:
            result = run_verifier(self.verify, self.request.project, float(self.options["verify_timeout"].value),
                                  sandbox=self.sandbox)
        except process.Cancelled:  # Ctrl-C during the baseline: nothing to undo
            raise KeyboardInterrupt from None
        why = cannot_run(self.verify, result)
        if why:
            raise AcrError(f"{_verifier_named(self.options['verify'])} cannot run here: {why}; no agent was run, "
                           "nothing was spent\n"
                           + _indent(result.tail),
                           hint=f"it runs as `/bin/sh -c '...'` in {self.request.project}; try it there by hand, "
                                "or pass --no-baseline if this failure is what the agent should fix")
        self._baseline = result
        return result

    def environment(self) -> LiveEnvironment:
        """The run's live environment (made once); whether an arm can run is the plan's gate's answer."""
        if self._env is None:
            req, opts = self.request, self.options
            self._env = LiveEnvironment(
                profile=self.profile, project=req.project, logs_dir=Paths.from_env().logs_dir,
                workspace=self.workspace, verify=self.verify, timeout=float(opts["timeout"].value),
                verify_timeout=float(opts["verify_timeout"].value), permissions=opts["permissions"].value,
                interactive=req.interactive, health=self.plan.health, tell_verifier=self.profile.settings.tell_verifier,
                protect=tuple(opts["protect"].value or ()), sandbox=self.sandbox)
        return self._env

    def refuse_early(self) -> None:
        """Raise the :class:`AcrError` the routing loop would refuse the task with before any attempt (a budget
        below every arm's expected cost, no arm that can run here): asked before the baseline, which may take
        minutes, so that such a refusal costs nothing."""
        refusal = self.plan.first_refusal(self.environment(), verified=bool(self.verify))
        if refusal is not None:
            raise refusal

    def execute(self, on_event: Callable[..., None] | None = None,
                on_output: Callable[..., None] | None = None) -> RunReport:
        """Route the task to the end: attempts, rollbacks, escalation, every attempt in memory."""
        plan = self.plan
        policy, ctx, env = plan.policy, plan.ctx, self.environment()
        env.on_output, env.baseline = on_output, self._baseline
        if on_event is not None:
            on_event("start", ctx=ctx, policy=policy, verify=self.verify, rollback=self.workspace is not None)
        result = run_task(ctx, policy, env, self.memory, max_attempts=plan.max_attempts, max_cost=plan.max_cost,
                          verifier=self.verify, verified=bool(self.verify), on_event=self._events(ctx, on_event),
                          budget_name=plan.budget_name, race=self._racer(env), race_rule=plan.race_rule())
        if result.forgotten:  # the logs of the attempts after the forget: nothing of the task may stay
            Paths.from_env().remove_logs([result.task_id])
        if result.task_id:  # a team's memory queued it as its first attempt began; again: no harm
            with interrupts.deferred():
                self.plan.store.recorded(result.task_id)
        report = RunReport(result, ctx, self.verify, self.workspace is not None, self._baseline, policy.name)
        if self.lock is not None:  # what acr kept to be safe, once old (acr_cli.workspace.gc): once a day at most
            from acr_cli.workspace.gc import maybe_prune

            with interrupts.deferred():
                report.pruned = maybe_prune(self.lock)
        report.shared = self.plan.store.finish()  # a team's: where routing read, what the sync did
        return report

    def _racer(self, env: LiveEnvironment) -> Any:
        """What runs the race of ``--race`` / the ``race`` setting (None: no race asked, or a flag that cannot
        race overrides a settings file's); which arms race is the plan's :meth:`Plan.race_rule`'s to say."""
        req, ask = self.request, self.plan.race_ask
        if ask is None or not req.rollback or req.interactive:
            return None
        from acr_cli.race import Racer

        copy = tuple(req.race_copy) + tuple(self.options["race_copy"].value or ())
        return Racer(env, ask.n, req.race_pick, copy, self.options["race_lanes"].value or "auto",
                     setup=self.options["race_setup"].value)

    def _events(self, ctx: Context, on_event: Callable[..., None] | None) -> Callable[..., None]:
        """The loop's event callback: keeps how the request was read and the baseline as the first attempt
        starts (a run killed during it, which acr recover ends, still shows them), then passes the event on."""
        described: set[str] = set()

        def events(what: str, **data: Any) -> None:
            if what == "attempt" and data.get("task_id") and data["task_id"] not in described:
                described.add(data["task_id"])
                with interrupts.deferred():
                    self.memory.describe_task(data["task_id"], context=context_json(ctx),
                                              baseline=baseline_json(self._baseline, self.verify))
                    # a team's memory queues it now: a run killed mid-way is uploaded once recovered
                    self.plan.store.recorded(data["task_id"])
            if on_event is not None:
                on_event(what, **data)

        return events

    def close(self) -> None:
        interrupts.uninstall()
        try:
            self.plan.close()
        finally:
            if self.lock is not None:
                self.lock.unlock()


def _verifier_named(opt: Option) -> str:
    """How a message names the verifier: as the user gave it (the flag, or the file that set it)."""
    return "--verify" if opt.source == "command line" else f"verify (from {opt.source})"


def _indent(text: str) -> str:
    return "\n".join("  | " + line for line in (text or "").rstrip().splitlines()[-15:])


def prepare(req: RunRequest, *,
            load_profile: Callable[[str | None, Path], tuple[Profile, Settings]],
            open_memory: Callable[..., Any]) -> Prepared:
    """Check everything a run needs before it starts; lock the work tree. Raises AcrError (exit 2).
    ``load_profile`` and ``open_memory`` are the commands' own (the profile named by flag or settings;
    the memory named by --memory, ACR_MEMORY or config.toml)."""
    made = settle(req, load_profile)
    _check_race(req, made)
    _check_budget(made.options["max_cost"])
    _check_verifier(made.options["verify"], req.project)
    _check_agents(made)
    _check_sandbox(made.options["sandbox"])
    open_plan_memory(made, req, open_memory)
    interrupts.install()  # SIGTERM and SIGHUP cancel like Ctrl-C: kill the agent, roll back, record
    prepared = Prepared(req, made, warnings=list(made.notes))
    try:
        _lock_work_tree(prepared)
        _check_work_tree(prepared)
        _check_lanes(prepared)
        prepared.refuse_early()  # before the baseline: a refusal that needs no verifier costs nothing
    except BaseException:
        prepared.close()
        raise
    return prepared


def _check_sandbox(option: Option) -> None:
    """A sandbox that was asked for and cannot start here stops the run before any agent runs: never run
    unconfined what the user wanted confined."""
    why = sandbox.refusal(option.value, option.source)
    if why:
        raise AcrError(why, hint=f"{sandbox.INSTALL_HINT}; `acr doctor` shows the sandbox's state; or run without it "
                                 "(--sandbox none)")


def _check_race(req: RunRequest, made: Plan) -> None:
    """A race needs worktrees (git, rollback on) and runs its agents headless."""
    race = made.options["race"]
    if made.race_ask is None:
        if req.race_setup and req.race_setup.strip():
            raise AcrError("--race-setup runs in each arm's lane of a race, and this run does not race",
                           hint="add --race N (or --race auto), or leave out --race-setup")
        return
    if race.source != "command line" and (not req.rollback or req.interactive):
        return  # a settings file's race gives way to a flag that cannot race: the run goes one arm at a time
    if not req.rollback:
        raise AcrError("--race runs each arm in a git worktree made from your work tree: it cannot run with "
                       "--no-rollback", hint="leave out --no-rollback, or --race")
    if req.interactive:
        raise AcrError("--race runs its agents side by side, headless: not with --interactive",
                       hint="leave out one of them")
    from acr_cli.race import PICKS

    if req.race_pick not in PICKS:
        raise AcrError(f"--race-pick {req.race_pick!r} is not one of: {', '.join(PICKS)}")


def _check_lanes(prepared: Prepared) -> None:
    """``race_lanes = "overlay"`` where overlays cannot be mounted stops a race before any agent runs (``auto``
    races in worktrees there instead)."""
    opts = prepared.plan.options
    if opts["race_lanes"].value != "overlay" or prepared.workspace is None or prepared.plan.race_ask is None:
        return
    from acr_cli.workspace import overlay, race

    why = race.lane_problem(prepared.workspace, "overlay") or (None if overlay.moved() else overlay.probe())
    if why:
        raise AcrError(f'race_lanes = "overlay" (from {opts["race_lanes"].source}): {why}; no agent was run',
                       hint='set race_lanes = "auto" to race in worktrees here; `acr doctor` shows why')


def _check_budget(budget: Option) -> None:
    """A budget of $0 is spent before it starts: never start an agent."""
    if budget.value is not None and float(budget.value) <= 0:
        where = "--max-cost" if budget.source == "command line" else f"max_cost (from {budget.source})"
        raise AcrError(f"{where} $0 leaves nothing to spend; no agent was run",
                       hint="give a budget above $0, or none")


def _check_verifier(verify: Option, project: Path) -> None:
    """The verifier's shell syntax and program, checked before anything runs."""
    problem = preflight(verify.value, project) if verify.value else None
    if problem:
        raise AcrError(f"{_verifier_named(verify)}: {problem}; no agent was run",
                       hint=f"the verifier runs as `/bin/sh -c '...'` in {project}; try it there by hand first")


def _check_agents(plan: Plan) -> None:
    """At least one agent this run may use can start: none is a set-up problem (exit 2), not a failed task."""
    names = [parse_arm_id(a)[0] for a in plan.arm_ids] if plan.arm_ids else [a.agent for a in plan.profile.arms]
    reasons = {n: plan.gate.agent_why_not(n) for n in dict.fromkeys(names)}
    if all(reasons.values()):
        raise AcrError("no agent this run may use can start: " + "; ".join(r for r in reasons.values() if r),
                       hint="install one (npm install -g @openai/codex @anthropic-ai/claude-code opencode-ai) "
                            "or name arms you have with --arms; `acr doctor` shows what acr finds")


def _lock_work_tree(prepared: Prepared) -> None:
    """Take the work tree's lock: one run at a time in a git work tree, with --no-rollback too (another run's
    rollback would undo its work); --no-rollback writes nothing to .git, so a lock it cannot take is no reason
    to stop, nor is a project outside git."""
    rollback = prepared.request.rollback
    try:
        prepared.lock = Workspace.open(prepared.request.project)
    except AcrError:
        if rollback:
            raise
        return
    if rollback:
        prepared.workspace = prepared.lock
    try:
        prepared.lock.lock()
    except UnwritableGitDir:
        if rollback:
            raise
        prepared.lock = None


def _check_work_tree(prepared: Prepared) -> None:
    """Refuse where a killed run left a checkpoint or git is mid-operation; warn of what is not enforced and of
    git lock files left behind."""
    ws, protect = prepared.workspace, prepared.options["protect"]
    if ws is None and protect.value:  # what an attempt changed is read from its checkpoint
        prepared.warnings.append(f"protect (from {protect.source}) is not enforced without the rollback "
                                 "(--no-rollback, or outside git): nothing tells what an attempt changed")
    if prepared.lock is not None:  # (with --no-rollback too: a later `acr recover` would revert its work)
        refuse_after_a_killed_run(prepared.lock)
    if ws is not None:
        ws.ensure_no_operation_in_progress()
        for lock_file in ws.stale_locks():
            prepared.warnings.append(
                f"git's lock file {lock_file} exists; if no git command is running (in any terminal), "
                f"a process that died left it: `rm {lock_file}`")


def refuse_after_a_killed_run(ws: Workspace) -> None:
    """Refuse to start where a killed ``acr run`` left a checkpoint (call while holding the lock).

    A run that went on would keep its work on top of the killed attempt's half-done changes, and a later
    ``acr recover`` would put the tree back to that checkpoint: the later run's pass would be reverted.
    Recovering first, unasked, could revert edits the user made since the kill (acr cannot tell them
    from the killed attempt's), so the user chooses: ``acr recover`` (back to before the killed attempt,
    what the tree holds kept in acr's store) or ``acr recover --discard`` (the tree stays as it is)."""
    interrupted = ws.interrupted_checkpoints()
    if not interrupted:
        return
    alive = ws.survivors(interrupted)
    if alive:  # a killed run's agent still writing here would write into this run's attempts
        raise AcrError(
            "processes of an earlier `acr run` here, which was killed, are still alive and would go on "
            "changing the work tree during this run: " + "; ".join(f"pid {pid} ({cmd})" for pid, cmd in alive),
            hint="`acr recover --kill` ends them and puts the work tree back as it was before that attempt")
    names = ", ".join(interrupted)
    raise AcrError(
        f"an earlier `acr run` here was killed mid-attempt (checkpoint {names}): the work tree may hold that "
        "attempt's half-done changes; no agent was run",
        hint="`acr recover` puts the work tree back as it was before that attempt (what it holds now is kept in "
             "acr's store), or `acr recover --discard` keeps the work tree as it is; then run again")
