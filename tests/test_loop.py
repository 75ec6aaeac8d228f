"""The routing loop on its own: ``run_task`` with an environment that answers set outcomes (the outside world:
no agent, no verifier) and a real SQLite memory. What it counts, what it records, when it stops."""

from __future__ import annotations

import dataclasses

import pytest

from acr_cli.context import classify
from acr_cli.domain import ERROR, FAILED, PASSED, Arm, AttemptAborted, Feedback
from acr_cli.errors import WorkspaceError
from acr_cli.health.errors import SETUP, Problem
from acr_cli.loop import FREE_ATTEMPTS, run_task, summary
from acr_cli.memory.store import Memory
from acr_cli.routing.fixed import FixedOrder

NOT_LOGGED_IN = Problem(SETUP, "not logged in")


class Outcomes:
    """An environment whose attempts end as set per arm (``arm id -> Feedback``, or an exception to raise);
    it keeps what it was asked, and how many attempts it had seen when asked (the policy's view)."""

    def __init__(self, outcomes: dict[str, Feedback | BaseException]):
        self.outcomes, self.asked, self.seen = outcomes, [], []

    def unavailable(self, arm: Arm) -> str | None:
        return None

    def attempt(self, arm, ctx, state, task_id, seq) -> Feedback:
        self.asked.append(arm.id)
        self.seen.append(len(state.tried) + len(state.free))
        outcome = self.outcomes[arm.id]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture
def memory(tmp_path):
    mem = Memory.open(tmp_path / "memory.sqlite")
    yield mem
    mem.close()


def arms(n: int, price: float = 1.0) -> list[Arm]:
    return [Arm("codex", f"m{i}", price_in=price, price_out=price) for i in range(1, n + 1)]


def route(order: list[Arm], env: Outcomes, memory: Memory, **limits):
    events = []
    result = run_task(classify("fix the add function in calc.py"), FixedOrder(order), env, memory,
                      verifier="pytest -q", on_event=lambda name, **kw: events.append((name, kw)), **limits)
    return result, events


def stored(memory: Memory) -> dict:
    (task,) = memory.tasks(source=None)
    return task


def test_attempts_are_counted_recorded_in_order_and_a_pass_ends_the_task(memory):
    a, b, c, d = arms(4)
    env = Outcomes({a.id: Feedback(a, FAILED, score=0.2, cost_usd=0.1), b.id: Feedback(b, FAILED, cost_usd=0.2),
                    c.id: Feedback(c, PASSED, score=1.0, cost_usd=0.3), d.id: Feedback(d, PASSED, score=1.0)})
    result, events = route([a, b, c, d], env, memory, max_attempts=3)
    assert env.asked == [a.id, b.id, c.id] and env.seen == [0, 1, 2]  # each attempt sees the ones before it
    assert result.passed and result.counted == 3 and result.stop_reason == "passed"
    assert result.cost_usd == pytest.approx(0.6)
    task = stored(memory)
    assert task["passed"] == 1 and task["finished_at"] and task["cost_usd"] == pytest.approx(0.6)
    assert [(x["seq"], x["model"], x["verdict"]) for x in task["attempts"]] == [(1, "m1", "failed"),
                                                                             (2, "m2", "failed"), (3, "m3", "passed")]
    assert [kw["seq"] for name, kw in events if name == "feedback"] == [1, 2, 3]


def test_max_attempts_stops_the_task_before_an_arm_that_would_pass(memory):
    a, b, c = arms(3)
    env = Outcomes({a.id: Feedback(a, FAILED), b.id: Feedback(b, FAILED), c.id: Feedback(c, PASSED, score=1.0)})
    result, _ = route([a, b, c], env, memory, max_attempts=2)
    assert env.asked == [a.id, b.id] and not result.passed
    assert result.stop_reason == "max attempts (2) reached" and stored(memory)["passed"] == 0


def test_attempts_that_never_reached_a_model_are_free_up_to_the_limit(memory):
    order = arms(FREE_ATTEMPTS + 2)
    env = Outcomes({arm.id: Feedback(arm, ERROR, reason="not logged in", problem=NOT_LOGGED_IN) for arm in order})
    result, events = route(order, env, memory, max_attempts=1)
    # the first FREE_ATTEMPTS are not counted, the next one counts and uses up max_attempts
    assert len(env.asked) == FREE_ATTEMPTS + 1 and result.free == list(range(1, FREE_ATTEMPTS + 1))
    assert result.counted == 1 and result.stop_reason == "max attempts (1) reached"
    assert [kw["counted"] for name, kw in events if name == "feedback"] == [False] * FREE_ATTEMPTS + [True]
    out = summary(result)
    assert (out["attempts_counted"], out["attempts_free"]) == (1, FREE_ATTEMPTS)
    assert [x["counted"] for x in out["attempts"]] == [False] * FREE_ATTEMPTS + [True]
    assert out["attempts"][0]["problem"] == SETUP and len(stored(memory)["attempts"]) == FREE_ATTEMPTS + 1


def test_a_free_attempt_does_not_stop_the_next_arm_from_running(memory):
    a, b = arms(2)
    env = Outcomes({a.id: Feedback(a, ERROR, problem=NOT_LOGGED_IN), b.id: Feedback(b, PASSED, score=1.0)})
    result, _ = route([a, b], env, memory, max_attempts=1)
    assert env.asked == [a.id, b.id] and result.passed and (result.counted, result.free) == (1, [1])


def test_an_aborted_attempt_is_recorded_whole_then_its_cause_is_raised(memory):
    a, b = arms(2)
    outcome = Feedback(a, FAILED, score=0.0, cost_usd=0.4, reason="1 failed", verifier_tail="assert 0 == 3")
    cause = WorkspaceError("the attempt removed the git repository", hint="git clone it again")
    env = Outcomes({a.id: AttemptAborted(outcome, cause), b.id: Feedback(b, PASSED)})
    events = []
    with pytest.raises(WorkspaceError) as raised:
        run_task(classify("fix add"), FixedOrder([a, b]), env, memory, verifier="pytest -q",
                 on_event=lambda name, **kw: events.append((name, kw)))
    assert raised.value is cause and env.asked == [a.id]  # the user sees the same error; no second attempt
    task = stored(memory)
    assert task["finished_at"] and task["passed"] == 0 and task["cost_usd"] == pytest.approx(0.4)
    (attempt,) = task["attempts"]
    assert (attempt["verdict"], attempt["detail"], attempt["verifier_tail"]) == ("failed", "1 failed", "assert 0 == 3")
    assert [kw["feedback"] for name, kw in events if name == "feedback"] == [outcome]


def test_an_error_the_environment_raises_finishes_the_task_with_nothing_recorded_of_the_attempt(memory):
    a, b = arms(2)
    env = Outcomes({a.id: RuntimeError("the disk went away"), b.id: Feedback(b, PASSED)})
    with pytest.raises(RuntimeError):
        route([a, b], env, memory)
    task = stored(memory)
    assert task["finished_at"] and task["attempts"] == []


def test_the_budget_stops_the_task_once_spent(memory):
    a, b, c = arms(3)
    env = Outcomes({arm.id: Feedback(arm, FAILED, cost_usd=0.6) for arm in (a, b, c)})
    result, _ = route([a, b, c], env, memory, max_attempts=5, max_cost=1.0)
    assert env.asked == [a.id, b.id] and result.budget_stop
    assert result.stop_reason == "--max-cost $1.00 is spent ($1.20)"
    assert summary(result)["budget"] == {"max_cost": 1.0, "spent": 1.2, "stopped": True}


def test_an_outcome_is_a_value(memory):
    fb = Feedback(Arm("codex", "m1"), FAILED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fb.verdict = PASSED  # type: ignore[misc]
    assert dataclasses.replace(fb, verdict=PASSED).passed and not fb.passed
