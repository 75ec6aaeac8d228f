"""The live environment's pure steps: what an agent's parsed output makes of an attempt's cost and verdict."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from acr_cli.agents.base import AgentResult
from acr_cli.domain import COST_PLAN, COST_PRICED, COST_REPORTED, COST_UNKNOWN, ERROR, FAILED, Arm
from acr_cli.health.errors import LIMIT
from acr_cli.live import agent_verdict, usage_of

MILLION = AgentResult(tokens_in=1_000_000, tokens_out=1_000_000, session_id="s1", text="done")


def test_an_attempt_is_priced_from_the_agents_report_else_the_profiles_prices():
    priced = Arm("codex", "m", price_in=1.0, price_out=2.0)
    assert (usage_of(priced, MILLION).cost_usd, usage_of(priced, MILLION).cost_source) == (3.0, COST_PRICED)
    reported = usage_of(priced, AgentResult(tokens_in=10, tokens_out=10, cost_usd=0.5))
    assert (reported.cost_usd, reported.cost_source) == (0.5, COST_REPORTED)
    unknown = usage_of(Arm("codex", "no-such-model-anywhere"), AgentResult())
    assert (unknown.cost_usd, unknown.cost_source) == (None, COST_UNKNOWN)
    assert (usage_of(priced, MILLION).session_id, usage_of(priced, MILLION).final_text) == ("s1", "done")


def test_a_free_arm_costs_nothing_whatever_the_agent_reports():
    free = Arm("claude", "local", price_in=0.0, price_out=0.0)
    usage = usage_of(free, AgentResult(tokens_in=5, tokens_out=5, cost_usd=1.25))
    assert (usage.cost_usd, usage.cost_source) == (0.0, COST_PRICED)


def test_an_arm_on_a_plan_costs_nothing_and_keeps_what_the_api_would_charge():
    plan = Arm("codex", "m", price_in=1.0, price_out=2.0, billing="plan")
    usage = usage_of(plan, MILLION)
    assert (usage.cost_usd, usage.cost_source, usage.api_cost_usd) == (0.0, COST_PLAN, 3.0)
    assert usage_of(Arm("codex", "no-such-model-anywhere", billing="plan"), AgentResult()).api_cost_usd is None


def test_the_agents_output_decides_an_error_a_limit_or_a_failure_else_the_check_decides():
    assert agent_verdict(AgentResult(text="done")) is None
    failed = agent_verdict(AgentResult(failed="every tool call was denied"))
    assert (failed.verdict, failed.reason) == (FAILED, "every tool call was denied")
    resets = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=2)
    limit = agent_verdict(AgentResult(error="You've hit your usage limit", limit_resets_at=resets.timestamp()))
    assert (limit.verdict, limit.problem.kind) == (ERROR, LIMIT)
    assert limit.problem.until == resets.strftime("%Y-%m-%dT%H:%M:%SZ")  # held until the time the CLI said
    assert agent_verdict(AgentResult(error="boom")).problem is None  # classified later, from its words
