"""Render replay results: rich table (with the paper's figures beside ours), markdown, CSV, JSON, plot."""

from __future__ import annotations

import csv
import io
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from acr_cli.bench.baselines import REIMPLEMENTED
from acr_cli.bench.columns import HEAD, METRICS, legend_lines
from acr_cli.errors import AcrError

FMT = {"avg_perf": "{:.2f}", "cum_regret": "{:.1f}", "cost_usd": "{:.2f}", "perf_per_dollar": "{:.2f}",
       "racc": "{:.3f}", "apply_ok": "{:.1f}", "avg_steps": "{:.2f}", "escalations": "{:.0f}", "hours": "{:.2f}"}
# columns shown only where some row has a figure: whether a patch applied (OOD176 records it), time taken
OPTIONAL = ("apply_ok", "hours")


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One result row from one or more runs (several shuffled orders): means, plus sd when > 1."""
    first = runs[0]
    row: dict[str, Any] = {"policy": first["policy"], "n": first.get("n", 0)}
    for m in METRICS + ("tokens_in", "tokens_out"):
        vals = [r[m] for r in runs if r.get(m) is not None]
        row[m] = statistics.fmean(vals) if vals else None
    if len(runs) > 1:
        row["sd"] = {m: statistics.stdev([r[m] for r in runs if r.get(m) is not None])
                     for m in METRICS if sum(r.get(m) is not None for r in runs) > 1}
        row["orders"] = len(runs)
    for extra in ("unscorable", "missing_decisions"):
        if any(r.get(extra) for r in runs):
            row[extra] = max(r.get(extra, 0) for r in runs)
    for raced in ("races", "wait_hours"):  # a racing replay's (acr_cli.bench.race)
        vals = [r[raced] for r in runs if r.get(raced) is not None]
        if vals:
            row[raced] = statistics.fmean(vals)
    row["run_ids"] = [r["run_id"] for r in runs]
    return row


def _fmt(metric: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return FMT[metric].format(value)


def columns(doc: dict[str, Any]) -> list[str]:
    """The metrics a table shows: every one, but those of ``OPTIONAL`` that no row has a figure for."""
    return [m for m in METRICS if m not in OPTIONAL or any(r.get(m) is not None for r in doc["results"])]


def legend(doc: dict[str, Any] | None = None) -> list[str]:
    """One line per column: its header and what it means (the columns ``doc``'s table shows; None: all)."""
    return legend_lines(columns(doc) if doc is not None else list(METRICS))


def rich_table(doc: dict[str, Any], width: int = 200):
    """Our figures, each policy with a dim line of the paper's published figures under it.

    A number is never cut: in a narrow terminal a long policy name folds onto a second line,
    and then the least-read columns (rAcc, escalations, n, Perf/$, Apply%, Steps, in that
    order) are left out, which the caption says; ``--json``/``--csv`` always have everything.
    """
    from rich.table import Table

    cols_all = columns(doc)
    rows = _table_rows(doc, cols_all)
    heads = ["policy", "n", *[HEAD[m] for m in cols_all]]
    widths = [max(len(h), *(len(cells[i]) for cells, _ in rows)) for i, h in enumerate(heads)]
    policy_w = min(widths[0], 24)  # a longer name folds
    keep, dropped = _columns_that_fit(cols_all, widths, policy_w, width)
    left_out = ", ".join(heads[i] for i in dropped)
    caption = f"(narrow terminal: {left_out} left out; --json has every column)" if dropped else None
    t = Table(title=f"{doc['title']} · {doc['n_tasks']} tasks · {doc['order']} · protocol {doc['protocol']}"
                    f" · lambda {doc['cost_weight']:g}", box=None, pad_edge=False, caption=caption)
    for i in keep:
        if i == 0:
            t.add_column("policy", overflow="fold", min_width=policy_w)
        else:
            t.add_column(heads[i], justify="right", no_wrap=True, min_width=widths[i])
    for cells, style in rows:
        t.add_row(*[cells[i] for i in keep], style=style or None)
    return t


def _table_rows(doc: dict[str, Any], cols: list[str]) -> list[tuple[list[str], str]]:
    """The table's rows as (policy, n, every metric) and a style: each policy's figures, then a dim line of
    its spread over orders and one of the paper's figures where it has them."""
    rows: list[tuple[list[str], str]] = []
    for r in doc["results"]:
        rows.append(([r["policy"], str(r["n"]), *_cells({**r, "sd": None}, cols, None)], ""))
        sd = r.get("sd") or {}
        if sd:
            rows.append(([f"  ± sd ({r.get('orders')} orders)", "",
                          *[_fmt(m, sd[m]) if m in sd else "" for m in cols]], "dim"))
        pub = r.get("published") or {}
        if pub:
            rows.append((["  paper", "", *[_fmt(m, pub[m]) if m in pub else "" for m in cols]], "dim"))
    return rows


def _columns_that_fit(cols: list[str], widths: list[int], policy_w: int, width: int) -> tuple[list[int], list[int]]:
    """The columns (indexes: 0 policy, 1 n, then ``cols``) kept in ``width``, and those left out, least read
    first."""
    keep = list(range(len(widths)))
    dropped = []
    for drop in ("racc", "escalations", "n", "perf_per_dollar", "apply_ok", "avg_steps"):
        if policy_w + sum(widths[i] + 2 for i in keep[1:]) <= width:
            break
        i = 1 if drop == "n" else (2 + cols.index(drop) if drop in cols else None)
        if i is not None and i in keep:
            keep.remove(i)
            dropped.append(i)
    return keep, dropped


def _cells(row: dict[str, Any], cols: list[str], published: str | None) -> list[str]:
    """Each metric formatted, with ``± sd`` over orders and the paper's value (``published`` template)."""
    pub = row.get("published") or {}
    out = []
    for m in cols:
        text = _fmt(m, row.get(m))
        if row.get("sd") and m in row["sd"]:
            text += f" ±{_fmt(m, row['sd'][m])}"
        if m in pub and published:
            text += " " + published.format(_fmt(m, pub[m]))
        out.append(text)
    return out


def notes(doc: dict[str, Any]) -> list[str]:
    """The lines under a replay's table: what its "paper" lines, hindsight rows and baselines are, what each
    policy could not score, and the replay's warnings."""
    out = []
    if any(r.get("published") for r in doc["results"]):
        out.append("(\"paper\" lines: the paper's published figures for the row above)")
    if doc.get("published_note"):
        out.append(doc["published_note"])
    out += _hindsight_notes(doc)
    ours = [r["policy"] for r in doc["results"] if r["policy"] in REIMPLEMENTED]
    # on your memory or a results folder there is no paper figure to compare with
    if ours and doc["benchmark"] != "memory" and not doc.get("hindsight"):
        out.append(f"{', '.join(ours)}: acr's implementations of the paper's baselines (it publishes no code for "
                   "them); a \"paper\" line under one is the paper's own run")
    for r in doc["results"]:
        if r.get("unscorable"):
            out.append(f"{r['policy']}: {r['unscorable']} task(s) could not be scored (a needed cell was never observed)")
        if r.get("missing_decisions"):
            out.append(f"{r['policy']}: {r['missing_decisions']} task(s) had no decision (scored 0, $0)")
        if r.get("races") is not None:
            out.append(_race_note(r))
    out += doc.get("warnings", [])
    return out


def _race_note(row: dict[str, Any]) -> str:
    """What a racing row is: how many tasks raced, and how long its tasks kept the user waiting."""
    wait = (f"; waiting {row['wait_hours']:.2f} h (a race as long as its slowest arm; Hours counts every "
            "attempt's time; a row without a race waits its Hours)" if row.get("wait_hours") is not None else "")
    return (f"{row['policy']}: {row['races']:.0f} of {row['n']} task(s) started with a race, every raced arm "
            f"paid{wait}")


def _hindsight_notes(doc: dict[str, Any]) -> list[str]:
    """What the best-in-hindsight rows are, and what a missing task x arm result means for regret."""
    hindsight = doc.get("hindsight") or {}
    shown = {r["policy"] for r in doc["results"]}
    rows = [x for x in (hindsight.get("arm"), hindsight.get("cascade")) if x and x in shown]
    out = []
    if rows:
        out.append(f"{' and '.join(rows)}: the best single arm{' and two-arm cascade' if len(rows) > 1 else ''} "
                   "in hindsight (chosen knowing every outcome)")
    if hindsight and doc.get("missing_cells"):
        out.append(f"{doc['missing_cells']} task x arm result(s) missing: that arm could not be chosen for that "
                   "task; each task's regret is against the best arm there")
    return out


def markdown(doc: dict[str, Any]) -> str:
    cols = columns(doc)
    lines = ["| policy | n | " + " | ".join(HEAD[m] for m in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    for r in doc["results"]:
        lines.append(f"| {r['policy']} | {r['n']} | " + " | ".join(_cells(r, cols, "({})")) + " |")
    return "\n".join(lines) + "\n"


def to_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    cols = ["policy", "n", *METRICS, "tokens_in", "tokens_out"]
    w = csv.writer(buf)
    w.writerow(cols + [f"{m}_sd" for m in METRICS] + [f"paper_{m}" for m in METRICS])
    for r in doc["results"]:
        sd = r.get("sd") or {}
        pub = r.get("published") or {}
        w.writerow([r.get(c) for c in cols] + [sd.get(m) for m in METRICS] + [pub.get(m) for m in METRICS])
    return buf.getvalue()


def check_plot(path: str) -> None:
    """Refuse a --plot that cannot be drawn, before a replay that may take minutes."""
    import importlib.util
    import os

    if not path.lower().endswith((".png", ".svg")):
        raise AcrError(f"--plot {path}: use a .png or .svg file name")
    if importlib.util.find_spec("matplotlib") is None:
        raise AcrError("--plot needs matplotlib",
                       hint=f"{sys.executable} -m pip install matplotlib  (in a checkout: pip install -e '.[plot]')")
    target = Path(path).expanduser()
    if target.is_dir():
        raise AcrError(f"--plot {path} is a directory", hint="give a file name ending in .png or .svg")
    folder = target.parent
    if not folder.is_dir():
        raise AcrError(f"--plot {path}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise AcrError(f"--plot {path}: directory {folder} is not writable")


def plot(curves: dict[str, list[float]], path: str, title: str) -> None:
    """Cumulative regret along the stream, one line per policy (needs matplotlib)."""
    check_plot(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for label, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, label=label, linewidth=1.6)
    ax.set_xlabel("tasks in stream order")
    ax.set_ylabel("cumulative regret")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(Path(path).expanduser())
    except OSError as e:
        raise AcrError(f"--plot {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
