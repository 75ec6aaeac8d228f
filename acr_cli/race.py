"""A race: several arms at once, each an attempt in its own worktree; the verifier picks the winner.

:class:`Racer` runs the loop's first N decisions side by side (``acr run --race N``):

1. the user's work tree is checkpointed as for a sequential attempt (so ``acr recover`` undoes a killed race);
2. one worktree per arm is made from that checkpoint (:mod:`acr_cli.workspace.race`), and each arm runs as an
   ordinary live attempt there, in its own thread: its own checkpoint, agent, verifier and rollback, its
   processes in their own group; ``ACR_RACE_SLOT`` (the lane's index, 0..N-1) and ``ACR_RACE_WORKTREE`` are in
   the environment of its agent and verifier, so that a user's check can pick its own port or database;
3. with ``race_setup``, a command runs in each worktree before the lane's checkpoint and agent (``npm ci``), as
   the verifier runs (``/bin/sh -c``, its process group, the lane's sandbox, the verifier's timeout, the same
   two variables). What it writes is where the lane starts: the winner's change is measured from the worktree
   as the set-up left it, so set-up output is never applied to the user's tree (unless the agent then changed
   that file). A set-up that fails makes its lane's attempt an ``error`` saying why, recorded with no agent
   run and no cost (no evidence about the arm, no mark on its health); the other lanes go on;
4. the pick: ``first`` (the first accepted attempt wins; the others are cancelled at once: the process group
   each is running, agent, verifier or set-up, is killed) or ``cheapest`` / ``smallest`` (every arm runs to
   its end; of the passing attempts, the lowest cost, or the fewest lines changed, wins; a tie goes to the
   earlier arm of the plan);
5. before the winner's change is applied, the user's work tree must still be exactly the checkpoint: an arm
   that wrote into it (through an absolute path) fails the race (the winner is failed, saying so) and the
   work tree is rolled back like a failed attempt;
6. the winner's change is written into the user's work tree, the worktrees are removed.

Each raced attempt is recorded as an attempt of the one task; a loser stopped by the winner is ``cancelled``
with what it cost so far. Memory is written by the loop, in the main thread: an arm's thread writes only its
own worktree and log. Ctrl-C stops every arm, then each rolls back and is recorded as cancelled.

What the race does not do: an accepted attempt that did not win keeps no copy of its work; the set-up runs in
race worktrees only (a sequential attempt after a race that all failed runs in the user's tree, without it).
"""

from __future__ import annotations

import os
import queue
import secrets
import threading
from dataclasses import dataclass, field, replace
from typing import Callable

from acr_cli import interrupts, sandbox
from acr_cli.context import Context
from acr_cli.domain import ERROR, FAILED, AttemptAborted, Decision, Feedback, TaskState
from acr_cli.errors import AcrError, WorkspaceError
from acr_cli.live import LiveEnvironment
from acr_cli.process import reaper
from acr_cli.verify import run_setup
from acr_cli.workspace import Workspace
from acr_cli.workspace import race as trees
from acr_cli.workspace.refs import few

PICKS = ("first", "cheapest", "smallest")
# in the environment of each lane's set-up, agent and verifier: its slot (0..N-1) and its worktree's root
SLOT_VAR, WORKTREE_VAR = "ACR_RACE_SLOT", "ACR_RACE_WORKTREE"


@dataclass
class RaceRun:
    """A finished race: each attempt as (seq, decision, feedback) in the order to record (the winner last),
    the winner's seq (None: none), the error that must end the task once all are recorded."""

    entries: list[tuple[int, Decision, Feedback]] = field(default_factory=list)
    winner: int | None = None
    abort: BaseException | None = None
    note: str = ""


@dataclass
class _Lane:
    """One arm in the race: its decision, seq, worktree environment and, once done, its outcome."""

    decision: Decision
    seq: int
    index: int
    env: LiveEnvironment | None = None
    stop: str | None = None
    base: str | None = None  # the worktree's tree once ``race_setup`` ran: the winner's change is measured from it
    fb: Feedback | None = None
    error: BaseException | None = None


class Racer:
    """Runs the arms of one race (see the module docstring). ``env``: the run's live environment in the user's
    project, which must roll back (a workspace); ``copy``: globs of ignored files copied into each worktree;
    ``setup``: the command line run in each worktree before its agent (``race_setup``; blank: none)."""

    def __init__(self, env: LiveEnvironment, size: int, pick: str = "first", copy: tuple[str, ...] = (),
                 lanes: str = "auto", setup: str | None = None):
        if pick not in PICKS:
            raise AcrError(f"unknown race pick {pick!r}", hint=f"one of: {', '.join(PICKS)}")
        self.env, self.size, self.pick, self.copy, self.lanes = env, size, pick, tuple(copy), lanes
        self.setup = setup if setup and setup.strip() else None

    def run(self, decisions: list[Decision], ctx: Context, state: TaskState, task_id: str, first_seq: int,
            emit: Callable[..., None]) -> RaceRun:
        """Race ``decisions`` (their attempts numbered from ``first_seq``) to the end (the module docstring)."""
        ws: Workspace = self.env.workspace
        lanes = [_Lane(d, first_seq + i, i) for i, d in enumerate(decisions)]
        out = RaceRun()
        made: list[trees.RaceTree] = []
        with ws.attempt(f"{task_id}-race{first_seq}", secrets.token_hex(8)) as guard:
            try:
                made = self._make_lanes(ws, guard, lanes, task_id, emit)
                self._run_lanes(lanes, ctx, state, task_id)
                _lane_faults(lanes)
                winner = self._choose(lanes)
                if winner is not None:
                    guard.passed = self._apply(ws, guard, winner, made[lanes.index(winner)], out)
                    if guard.passed:
                        out.winner = winner.seq
            finally:
                with interrupts.deferred():
                    _remove_lanes(ws, made, lanes)
                    if guard.passed and any(tree.cow is None for tree in made):
                        ws.restore_repository(guard.cp)  # what worktree arms wrote to the shared refs and config
        return self._settle(out, lanes, guard)

    def _make_lanes(self, ws: Workspace, guard, lanes: list[_Lane], task_id: str,
                    emit: Callable[..., None]) -> list[trees.RaceTree]:
        """One lane per arm (what a killed race left is removed first), each arm's environment in it; the
        ``race`` event says how the lanes were made."""
        with interrupts.deferred():
            trees.remove_leftovers(ws)  # a killed race's (its checkpoint was recovered or discarded)
            made, not_overlay = trees.create_all(ws, guard.cp, [lane.seq for lane in lanes], self.copy, self.lanes)
        for lane, tree in zip(lanes, made):
            lane.env = self._lane_env(ws, tree, lane)
        emit("race", seqs=[lane.seq for lane in lanes], arms=[lane.decision.arm for lane in lanes],
             pick=self.pick, task_id=task_id, lanes="worktree" if not_overlay else "overlay",
             why_not_overlay=not_overlay)
        return made

    def _settle(self, out: RaceRun, lanes: list[_Lane], guard) -> RaceRun:
        """The race's record: each attempt in the order the loop records them, the winner's note of what the
        race's own checkpoint kept, and the error that ends the task (the race's own, else an arm's)."""
        if out.winner is not None and guard.kept_before:
            winner = next(lane for lane in lanes if lane.seq == out.winner)
            winner.fb = replace(winner.fb, kept_before=guard.kept_before)
        if guard.error is not None:
            out.abort = out.abort or guard.error
        out.entries = [(lane.seq, lane.decision, lane.fb) for lane in self._order(lanes, out.winner)
                       if lane.fb is not None]
        out.abort = out.abort or next((lane.error for lane in lanes if lane.error is not None), None)
        return out

    def _lane_env(self, ws: Workspace, tree: trees.RaceTree, lane: _Lane) -> LiveEnvironment:
        """The live environment of one arm: the run's, with the project in the worktree (the verifier runs
        there), its own workspace, no live output and no memory (the loop records it in the main thread); its
        agent, verifier and set-up see the lane's slot and worktree (:data:`SLOT_VAR`, :data:`WORKTREE_VAR`)."""
        env = self.env
        rel = os.path.relpath(os.path.realpath(env.project), os.path.realpath(ws.root))
        project = tree.root if rel == "." else tree.root / rel
        lane_ws = Workspace.open(tree.root)
        # a sandboxed run's arms are sandboxed too, each writing only its own worktree (and git's directories)
        confined = sandbox.for_project(project, lane_ws) if env.sandbox is not None else None
        lane_env = LiveEnvironment(profile=env.profile, project=project, logs_dir=env.logs_dir,
                               workspace=lane_ws, verify=env.verify, timeout=env.timeout,
                               verify_timeout=env.verify_timeout, permissions=env.permissions, health=None,
                               baseline=env.baseline, tell_verifier=env.tell_verifier, protect=env.protect,
                               sandbox=confined)
        lane_env.extra_env = {SLOT_VAR: str(lane.index), WORKTREE_VAR: str(tree.root)}
        if self.setup is not None:
            lane_env.before_agent = lambda log, marker: self._set_up(lane, tree, ws, log, marker)
        return lane_env

    def _set_up(self, lane: _Lane, tree: trees.RaceTree, ws: Workspace, log, marker: str) -> str | None:
        """Run ``race_setup`` in the lane's project directory, as its verifier runs (the lane's sandbox, env,
        marker, the verifier's timeout; stopped with the lane); why it failed, or None. What it wrote that git
        would carry is the worktree's starting point, not the attempt's change: the lane's ``base`` is re-read."""
        env = lane.env
        why = run_setup(self.setup, env.project, env.verify_timeout, log, marker=marker, sandbox=env.sandbox,
                        env=env.extra_env, stop=lambda: lane.stop)
        if why is None:
            lane.base = trees.final_tree(tree, ws.common_dir)[0]
        return why

    def _run_lanes(self, lanes: list[_Lane], ctx: Context, state: TaskState, task_id: str) -> None:
        """Start every lane in its own thread and wait for all; with ``first``, the first accepted attempt stops
        the others. Ctrl-C (or SIGTERM, SIGHUP) stops them all."""
        done: queue.Queue = queue.Queue()
        with reaper.shared():
            self._start(lanes, ctx, state, task_id, done)
            self._wait(lanes, done)

    @staticmethod
    def _start(lanes: list[_Lane], ctx: Context, state: TaskState, task_id: str, done: queue.Queue) -> None:
        """Start each lane's attempt in a thread of its own."""
        for lane in lanes:
            lane.env.stop = (lambda lane=lane: lane.stop)
            snapshot = replace(state, tried=list(state.tried), free=list(state.free), excluded=set(state.excluded))
            threading.Thread(target=_work, args=(lane, ctx, snapshot, task_id, done), daemon=True,
                             name=f"acr-race-{lane.seq}").start()

    def _wait(self, lanes: list[_Lane], done: queue.Queue) -> None:
        """Wait for every lane, stopping the others once one wins (``first``) or a signal came."""
        pending = set(range(len(lanes)))
        while pending:
            try:
                index = done.get(timeout=0.1)
            except queue.Empty:
                index = None
            except KeyboardInterrupt:
                index = None
            if interrupts.received is not None:
                self._stop(lanes, f"by {interrupts.describe()}")
            if index is None:
                continue
            pending.discard(index)
            lane = lanes[index]
            if self.pick == "first" and lane.fb is not None and lane.fb.accepted:
                self._stop(lanes, f"because {lane.decision.arm.id} passed first in the race")

    @staticmethod
    def _stop(lanes: list[_Lane], why: str) -> None:
        for lane in lanes:
            lane.stop = lane.stop or why

    def _choose(self, lanes: list[_Lane]) -> _Lane | None:
        """The winning lane: the pick's choice among the accepted attempts (passed ones before unverified)."""
        accepted = [lane for lane in lanes if lane.fb is not None and lane.fb.accepted and lane.error is None]
        if not accepted or interrupts.received is not None:
            return None
        if any(lane.fb.passed for lane in accepted):
            accepted = [lane for lane in accepted if lane.fb.passed]
        if self.pick == "first":
            return min(accepted, key=lambda lane: lane.fb.duration_s)
        if self.pick == "cheapest":
            return min(accepted, key=lambda lane: (lane.fb.cost_usd is None, lane.fb.cost_usd or 0.0, lane.seq))
        return min(accepted, key=lambda lane: (_lines(lane.fb), lane.seq))

    def _apply(self, ws: Workspace, guard, winner: _Lane, tree: trees.RaceTree, out: RaceRun) -> bool:
        """Write the winner's change into the user's work tree, if that tree is still the checkpoint; else fail
        the winner, saying which paths an arm wrote outside its worktree (the race's rollback undoes them)."""
        with interrupts.deferred():
            outside = trees.main_changed(ws, guard.cp)
            if outside:
                why = (f"an arm of the race wrote into your work tree, outside its worktree ({few(outside, 10)}): "
                       "the race's result is not applied and your work tree is rolled back")
                winner.fb = replace(winner.fb, verdict=FAILED, reason=f"{winner.fb.reason}; {why}", score=None)
                out.note = why
                return False
            winner.env.workspace.publish()  # objects the winner's own checkpoint wrote, which its index may name
            final, huge = trees.final_tree(tree, ws.common_dir)
            trees.apply(ws, winner.base or tree.base, final, tree.alternates, tree.root)
            if huge:
                out.note = (f"the winner's files over {trees.ATTEMPT_FILE_MAX >> 20} MiB were not read back nor "
                            f"applied: {few(huge, 10)}")
        return True

    @staticmethod
    def _order(lanes: list[_Lane], winner: int | None) -> list[_Lane]:
        """The lanes in the order the loop records them: by seq, the winner last (it ends the task)."""
        return sorted(lanes, key=lambda lane: (lane.seq == winner, lane.seq))


def _remove_lanes(ws: Workspace, made: list[trees.RaceTree], lanes: list[_Lane]) -> None:
    """The lanes go, with what their arms' checkpoints left: an aborted arm's checkpoint (useless once its lane
    is gone) and the checkpoints' objects (what the arms' rollbacks kept stays)."""
    trees.remove_all(ws, made)
    stores = [lane.env.workspace.store for lane in lanes if lane.env is not None and lane.env.workspace is not None]
    trees.drop_checkpoints(ws, stores)
    for store in stores:
        store.wipe_objects_if_unused()


def _lane_faults(lanes: list[_Lane]) -> None:
    """An arm that broke its own lane (removed its ``.git``, made it unreadable) ends its attempt, not the task:
    the lane is acr's and is thrown away, and the user's repository is checked apart. Its attempt becomes an
    error saying so (no evidence about the arm's skill), and the race goes on without it."""
    for lane in lanes:
        if isinstance(lane.error, WorkspaceError) and lane.fb is not None:
            why = f"its lane could not be read back ({lane.error.message}); the lane was removed, your work tree untouched"
            lane.fb = replace(lane.fb, verdict=ERROR, score=None,
                              reason=f"{lane.fb.reason}; {why}" if lane.fb.reason else why)
            lane.error = None


def _lines(fb: Feedback) -> int:
    """Lines an attempt changed (a binary file counts as one)."""
    return sum((a or 0) + (d or 0) if a is not None else 1 for _, a, d in fb.diffstat)


def _work(lane: _Lane, ctx: Context, state: TaskState, task_id: str, done: queue.Queue) -> None:
    """A lane's thread: its attempt to the end; the outcome (or the error) is the lane's."""
    try:
        lane.fb = lane.env.attempt(lane.decision.arm, ctx, state, task_id, lane.seq)
    except AttemptAborted as aborted:
        lane.fb, lane.error = aborted.outcome, aborted.cause
    except BaseException as e:  # (a signal's KeyboardInterrupt raised in this thread: the lane is cancelled)
        lane.error = e
    finally:
        done.put(lane.index)
