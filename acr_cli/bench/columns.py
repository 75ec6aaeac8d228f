"""The columns of a replay's table: their order, headers and meaning (the legend under the table and in
``acr bench replay --help``). It imports nothing, so ``--help`` reads it for free."""

from __future__ import annotations

METRICS = ("avg_perf", "cum_regret", "cost_usd", "perf_per_dollar", "racc", "apply_ok", "avg_steps", "escalations",
           "hours")
HEAD = {"avg_perf": "AvgPerf", "cum_regret": "CumReg", "cost_usd": "$Total", "perf_per_dollar": "Perf/$",
        "racc": "rAcc", "apply_ok": "Apply%", "avg_steps": "Steps", "escalations": "Esc.", "hours": "Hours"}
# what each column means (acr_cli.bench.metrics computes them): the legend under the table and in --help
MEANING = {"avg_perf": "mean score x 100 (a task scores its best attempt)",
           "cum_regret": "cumulative regret: sum over tasks of (best single model's reward in hindsight - this "
                         "policy's), reward = score - lambda x USD",
           "cost_usd": "USD spent on every attempt", "perf_per_dollar": "AvgPerf / $Total",
           "racc": "routing accuracy: share of tasks whose final model is the best one in hindsight",
           "apply_ok": "% of tasks whose final attempt changed the repository (OOD176 records it)",
           "avg_steps": "attempts per task", "escalations": "tasks where the most expensive arm was tried after a "
                                                             "failed attempt",
           "hours": "time every attempt took, in hours"}


def legend_lines(cols: list[str] | tuple[str, ...] = METRICS) -> list[str]:
    """``Header: what it means``, one per column in ``cols``."""
    return [f"{HEAD[m]}: {MEANING[m]}" for m in cols]
