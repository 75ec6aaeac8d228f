"""Rendering for people (rich). JSON output never goes through here.

What an agent or a verifier printed is redacted (:func:`acr_cli.redact.redact`) before it is shown, as
before it is stored: a terminal's output ends up in CI logs and shared screens."""

from __future__ import annotations

from typing import Any

from acr_cli.cli.common import console, fmt_money, fmt_pct
from acr_cli.cli.terminal import echo, terminal_safe


def redact(text: str | None) -> str | None:
    """What an agent, a verifier or memory says, as a terminal may show it: secrets masked
    (:func:`acr_cli.redact.redact`, imported when first needed: `acr route` imports this module and
    starts faster without compiling its patterns) and control characters made visible (terminal_safe)."""
    from acr_cli.redact import redact as mask

    return terminal_safe(mask(text)) if text else text


def listed(sentences: list[str]) -> str:
    """What the workspace reports (side effects: sentences that name files and refs), on one line: a
    newline in a name the attempt made is shown as its escape, not as a line that may read like acr's."""
    from acr_cli.redact import redact as mask

    return "; ".join(terminal_safe(mask(s), one_line=True) for s in sentences)


VERDICT_STYLE = {"passed": "green", "unverified": "cyan", "failed": "red", "error": "yellow", "timeout": "magenta",
                 "cancelled": "dim"}
MARK = {"passed": "✓", "unverified": "?", "failed": "✗", "error": "!", "timeout": "⧗", "cancelled": "■"}


def verdict_and_reason(verdict: str, reason: str) -> tuple[str, str]:
    """A verdict and the reason after it, the verdict said once: "cancelled" and "cancelled with Ctrl-C; ..."
    read "cancelled with Ctrl-C; ...". The reason comes back with its leading space (or empty)."""
    if reason.startswith(verdict + " ") or reason == verdict:
        return verdict, reason[len(verdict):]
    return verdict, f" {reason}" if reason else ""


def said_once(verdict: str, reason: str, sep: str = " ") -> str:
    """``verdict`` + ``sep`` + ``reason``, or the reason alone when it starts with the verdict."""
    if reason == verdict or reason.startswith(verdict + " "):
        return reason
    return f"{verdict}{sep}{reason}" if reason else verdict


def headline(text: str | None) -> str:
    """The first line of a request or an answer that says something: lines of only punctuation, brackets or a
    code fence (")", "```python", "---") are passed over; none such: the first non-blank line."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if not line.startswith(("```", "~~~")) and any(ch.isalnum() for ch in line):
            return line
    return lines[0] if lines else ""


class LiveView:
    """The compact live view of ``acr run`` on stderr (stdout stays clean for --json)."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.con = console(stderr=True)

    def start(self, ctx, policy, verify: str | None, rollback: bool) -> None:
        if self.quiet:
            return
        from rich.markup import escape  # a verifier such as `grep -qE '^[/a-z]+$'` is not markup

        self.con.print(f"[bold]acr[/] {escape(str(ctx.kind))} · {escape(ctx.language or 'unknown language')} · "
                       f"{escape(str(ctx.size))} · policy {escape(policy.name)} · verify: "
                       + (escape(verify) if verify else "[yellow]none[/]")
                       + ("" if rollback else " · [yellow]no rollback[/]"))

    def event(self, what: str, **data: Any) -> None:
        """Print one event of the run (the loop's ``emit``): each kind has its method ``_on_<kind>``."""
        if self.quiet:
            return
        handler = getattr(self, f"_on_{what}", None)
        if handler is not None:
            handler(data)

    def _on_start(self, data: dict) -> None:
        self.start(data["ctx"], data["policy"], data["verify"], data["rollback"])

    def _on_note(self, data: dict) -> None:
        from rich.markup import escape

        self.con.print(f"  [yellow]note[/]: {escape(data['message'])}")

    def _on_skipped(self, data: dict) -> None:
        from rich.markup import escape  # an agent's error text: `401 Unauthorized [/v1/responses]`

        self.con.print(f"  [yellow]skip[/] {escape(data['arm'].id)}: {escape(data['reason'])}")

    def _on_race(self, data: dict) -> None:
        from rich.markup import escape

        where = "its own worktree"
        if data.get("lanes") == "overlay":
            where = "a copy-on-write overlay of your repository"
        elif data.get("why_not_overlay"):
            where += f" [dim](not an overlay: {escape(data['why_not_overlay'])})[/]"
        self.con.print(f"[bold cyan]⇉ race[/]: attempts {', '.join(str(s) for s in data['seqs'])} at once, each in "
                       f"{where} (pick: {data['pick']})")

    def _on_attempt(self, data: dict) -> None:
        from rich.markup import escape

        d = data["decision"]
        self.con.print(f"[bold cyan]▶ attempt {data['seq']}[/]: [bold]{escape(d.arm.id)}[/] "
                       f"[dim]({escape(d.reason)})[/]")

    def _on_feedback(self, data: dict) -> None:
        from rich.markup import escape

        fb = data["feedback"]
        style = VERDICT_STYLE.get(fb.verdict, "white")
        verdict, reason = verdict_and_reason(fb.verdict, redact(fb.reason) or "")
        if data.get("raced"):  # raced attempts end in any order: say which one this is
            verdict = f"attempt {data['seq']} ({escape(fb.arm.id)}) {verdict}"
        self.con.print(f"  [{style}]{MARK.get(fb.verdict, '?')} {verdict}[/]{escape(reason)}"
                       f" · {_cost_said(fb)} · {fb.tokens_in or '?'}→{fb.tokens_out or '?'} tok · {fb.duration_s:.1f}s")
        if not fb.accepted:
            for line in why_failed(fb):  # (soft: a command or path wrapped by rich would not paste)
                self.con.print(line, highlight=False, soft_wrap=True)
        if not fb.accepted and fb.apply_ok is not None:
            self.con.print("  [dim]work tree rolled back to its state before the attempt[/]")
            if fb.side_effects:  # .git's files, refs, new ignored files: not in any diff, so say what it did
                self.con.print("  [dim]besides the work tree, the rollback undid:[/] "
                               + escape(listed(fb.side_effects)), highlight=False)
        if fb.health:
            self.con.print(f"  [yellow]{escape(fb.arm.id)} is {escape(fb.health)}[/]")
        if not data.get("counted", True):
            self.con.print("  [dim]not counted against --max-attempts: it never reached a model[/]")

    def output(self, adapter, stream: str, line: str) -> None:
        if self.quiet or stream != "out":
            return
        text = redact(adapter.describe(line))
        if text:
            from rich.text import Text

            self.con.print(Text(f"  │ {text}", style="dim"))


def _cost_said(fb) -> str:
    """An attempt's cost as the live view says it: the amount and where it comes from."""
    if fb.cost_source == "plan" and fb.api_cost_usd:
        return f"$0 (plan; {fmt_money(fb.api_cost_usd, None)} at API prices)"
    return fmt_money(fb.cost_usd, None) + ("" if fb.cost_source == "reported" else f" ({fb.cost_source})")


FAILURE_LINES = 6  # of the verifier's output, under a failed attempt (the whole tail is in the log and `acr show`)


def why_failed(fb) -> list:
    """Lines (rich Text) that say why an attempt failed: the verifier's last lines, where its work is
    kept and how to see it, its log."""
    from rich.text import Text

    from acr_cli.session import kept_line

    out = []
    if fb.verifier_tail:
        lines = redact(fb.verifier_tail).rstrip().splitlines()[-FAILURE_LINES:]
        out.append(Text("    the verifier printed (last lines):", style="dim"))
        out += [Text(f"    │ {line}") for line in lines]
    kept = kept_line(fb.base_tree, fb.attempt_ref)
    if kept:
        out.append(Text(f"    {kept}", style="dim"))
    if fb.log_path:
        out.append(Text(f"    log: {fb.log_path}", style="dim"))
    return out


def print_baseline(base, verify: str, quiet: bool = False) -> None:
    """What the verifier said on the untouched tree (stderr, with the live view)."""
    if quiet:
        return
    con = console(stderr=True)
    from rich.markup import escape

    if base.passed:
        con.print(f"[yellow]baseline[/]: `{escape(verify)}` already passes before any change "
                  f"({base.duration_s:.1f}s): it cannot tell whether the work gets done")
    elif base.timed_out:  # the hang may be the bug; a check that needs longer fails every attempt alike
        con.print(f"[yellow]baseline[/]: `{escape(verify)}` {base.summary()} before any change: if the check "
                  "needs longer, stop (Ctrl-C) and raise --verify-timeout, or every attempt will time out too; "
                  "going on in case the hang is what the agent should fix")
    else:
        con.print(f"[dim]baseline: `{escape(verify)}` fails before any change ({base.summary()}, "
                  f"{base.duration_s:.1f}s), as it should until the work is done[/]")


def diffstat_lines(diffstat: list) -> list[str]:
    """``calc.py | +2 -1`` per file, and a total. A name is shown on its line whatever it holds (an agent
    names the files it makes): a control character, newline or bidirectional override as its escape."""
    if not diffstat:
        return []
    names = [terminal_safe(p, one_line=True) for p, _, _ in diffstat]
    width = max(map(len, names))
    rows = [f"  {name.ljust(width)}  " + ("binary" if a is None else f"+{a} -{d}")
            for name, (_, a, d) in zip(names, diffstat)]
    added = sum(a or 0 for _, a, _ in diffstat)
    deleted = sum(d or 0 for _, _, d in diffstat)
    return rows + [f"  {len(diffstat)} file(s) changed, +{added} -{deleted}"]


def answer_label(verdict: str, text: str | None, ended: str | None) -> str | None:
    """How an attempt's last text is headed ("answer"; after an error, "last message ..."), or None when
    there is nothing to show: no text, or an error whose message is the text (it is said once, as why
    the attempt ended)."""
    if not text or not text.strip():
        return None
    if verdict != "error":
        return "answer"
    if " ".join(text.split()) in " ".join((ended or "").split()):
        return None
    return "last message (the attempt ended in an error)"


def unknown_cost(result) -> str:
    """What a task's total leaves out: " (the cost of N attempt(s) is not known)" when an attempt's cost is
    (a timeout, an agent that reports none; the total counts only the others), else ""."""
    unknown = sum(1 for _, fb in result.steps if fb.cost_usd is None)
    return f" (the cost of {unknown} attempt(s) is not known)" if unknown else ""


def attempts_said(result) -> str:
    """"3 attempt(s)", with those that never reached a model named: "3 attempt(s) (2 never reached a model, not
    counted)"."""
    free = len(result.free)
    return f"{len(result.steps)} attempt(s)" + (f" ({free} never reached a model, not counted)" if free else "")


def print_run_summary(report) -> None:
    """On stdout: the answer of the attempt that ended the task, in full, then what happened."""
    from rich.markup import escape

    result, con = report.result, console()
    _print_answer(con, report)
    if result.accepted:
        _print_accepted(con, report)
    elif result.cancelled:
        con.print(f"[yellow]{escape(result.stop_reason)}[/]; {_tree_said(report)}. "
                  f"{fmt_money(result.cost_usd, None)} spent{unknown_cost(result)}.")
    else:
        _print_not_passed(con, report)
    if not result.forgotten:  # (a task forgotten while it ran has nothing left to show)
        con.print(f"[dim]task {result.task_id} · `acr show {result.task_id}` shows everything about it[/]")
    if report.shared:
        con.print("[dim]" + escape(shared_line(report.shared)) + "[/]")


def _tree_said(report) -> str:
    """Where the attempts' changes are after a task that kept none."""
    return ("the work tree is as it was" if report.rollback
            else "with --no-rollback, whatever the attempts changed is still in the directory")


def _print_answer(con, report) -> None:
    """The final attempt's answer in full, between rules (nothing when there is none to show)."""
    from rich.text import Text

    fb = report.final
    what = answer_label(fb.verdict, report.answer, fb.reason) if fb is not None else None
    if what:
        con.print(Text(f"── {what} from {fb.arm.id} ──", style="bold"))
        con.print(Text(redact(report.answer).rstrip("\n")), soft_wrap=True)
        con.print(Text("──", style="bold"))


def _print_accepted(con, report) -> None:
    """An accepted task: the verdict line, what the pass rests on, the kept change and what it changed beside it."""
    from rich.markup import escape

    result, fb = report.result, report.final
    head = ("[green bold]passed[/]" if result.passed else "[yellow bold]not verified[/]" if fb.check_changed else
            "[cyan bold]done, unverified[/] (no verifier checked the work: give one with --verify)")
    tail = ": the check passed, but the attempt changed what it reads" if fb.check_changed else "."
    con.print(f"{head} with {escape(fb.arm.id)} after {escape(attempts_said(result))}, "
              f"{fmt_money(result.cost_usd, None)} in total{unknown_cost(result)}{tail}")
    _print_check_inputs(con, fb)
    _print_kept_change(con, report)
    if fb.kept_before:
        con.print("[yellow]" + escape(listed([fb.kept_before])) + "[/]")
    if fb.side_effects:  # not in the diff a person reviews: say it, one a line (many hold a command to paste)
        from rich.text import Text

        con.print("[yellow]besides the work tree, the attempt changed:[/] [dim](review these: they are in no diff, "
                  "and .git's files can run code on your next git command)[/]")
        for line in fb.side_effects:
            con.print(Text(f"  - {listed([line])}"), soft_wrap=True)  # (a command wrapped by rich would not paste)


def _print_check_inputs(con, fb) -> None:
    """The check's inputs a pass changed (one a line: what a person must review before trusting it), else the
    test files the attempt added."""
    from rich.markup import escape
    from rich.text import Text

    if fb.check_changed:
        con.print("[yellow]the check's inputs it changed[/] [dim](review them: the pass says nothing about "
                  "the work until you do)[/]:")
        from acr_cli.checks import describe

        for line in describe(fb.check_changed):
            con.print(Text(f"  - {redact(line)}"), soft_wrap=True)
    elif fb.tests_added:
        con.print("[dim]the attempt added test files (review them with the work: a check that runs them ran the "
                  "attempt's own tests):[/] "
                  + escape(", ".join(fb.tests_added)), highlight=False)


def _print_kept_change(con, report) -> None:
    """The accepted attempt's change, file by file, or that it changed none."""
    from rich.text import Text

    if report.kept:
        where = "uncommitted in your work tree" if report.rollback else "in the directory"
        con.print(f"Changed {len(report.kept)} file(s), {where}:")
        for line in diffstat_lines(report.kept):
            con.print(Text(line))
    elif report.rollback:
        con.print("No file changed.")


def _print_not_passed(con, report) -> None:
    """A task that ended with no accepted attempt: why, each attempt's verdict, why the last one failed."""
    from rich.markup import escape
    from rich.text import Text

    result = report.result
    con.print(f"[red bold]not passed[/]: {escape(result.stop_reason)}. {escape(attempts_said(result))}, "
              f"{fmt_money(result.cost_usd, None)} spent{unknown_cost(result)}; {_tree_said(report)}.")
    for i, (_, fb) in enumerate(result.steps, 1):
        con.print(Text(f"  {i}. {fb.arm.id}: {said_once(fb.verdict, redact(fb.reason) or '', ', ')}"))
    if result.steps:
        for line in why_failed(result.steps[-1][1]):
            con.print(line, soft_wrap=True)


def shared_line(s: dict) -> str:
    """One line on what a run did with the team's shared memory."""
    if s.get("error"):
        line = (f"shared memory {s['server']}: the sync stopped ({s['error']}); {s['pending']} task(s) wait to be "
                "uploaded by the next run or `acr memory sync`")
    else:
        line = (f"shared memory {s['server']}: uploaded {s['uploaded']} task(s), copied {s['downloaded']} from the "
                "team" + (f", {s['pending']} still pending" if s["pending"] else ""))
    return line + "".join(f"\n{refused_line(r)}" for r in s.get("refused") or [])


def refused_line(r: dict) -> str:
    """A task the team's server refused to store, and what to do (acr_cli.memory.team.upload)."""
    return (f"the server refused task {r['task_id']}: {r['reason']}; it stays in the local memory and is sent "
            f"again at every sync (`acr memory forget {r['task_id']}` drops it)")


def print_route(plan, order: list, explain: bool, similar: tuple[list, dict] = ([], {})) -> None:
    """Plain text on purpose: `acr route` must start fast, so no rich import here. ``order``: the plan's arms
    (acr_cli.plan.Planned), those that can run numbered, then those that cannot, with why. ``--explain`` adds
    how the request was read, the numbers behind the ranking, the arms the settings (``arms``, ``exclude``)
    took out, and the similar earlier tasks read with how they moved each arm's chance."""
    ctx = plan.ctx
    echo(f"{ctx.kind} · {ctx.language or 'unknown language'} · {ctx.size} · profile {plan.profile.name}"
         f" · policy {plan.policy.name}")
    if explain:
        _print_reading(ctx)
    _print_order([p.ranked for p in order if not p.blocked], explain)
    for p in order:
        if p.blocked:
            echo(f"  -  {p.arm.id}: cannot run now: {p.blocked.reason}")
    if explain:
        for arm_id, why in plan.routing.excluded.items():
            echo(f"  -  {arm_id}: excluded by {why}")
        _print_similar(*similar)


def print_race(choice, explain: bool) -> None:
    """The race ``acr run`` would start (acr_cli.routing.race.RaceChoice): its arms and what it is expected to
    give; beside a forced race (``--race N``) what the plan would choose; why the budget raced fewer
    (``explain``: also each race size's expected reward beside escalation's)."""
    plan, planner, asked = choice.plan, choice.planner, choice.ask.label
    echo("")
    if plan.arms:
        echo(f"race (--race {asked}): start {', '.join(plan.arms)} at once: {_race_line(plan)}")
    else:
        echo(f"race (--race {asked}): none: {choice.why_none}")
    if choice.note:
        echo(f"  note: {choice.note}")
    if planner is not None:
        if planner.arms:
            echo(f"  the plan (--race auto:{choice.ask.n}) would race {', '.join(planner.arms)}: {_race_line(planner)}")
        elif planner.options:
            echo(f"  the plan (--race auto:{choice.ask.n}) would not race: escalating one arm at a time is expected "
                 "to do better")
    weighed = planner or plan
    if explain and weighed.options:
        how = "arms correlated through the task's ease" if weighed.joint else "arms taken as independent"
        echo(f"  expected reward of each plan, escalating over the rest after a failed race ({how}; losers "
             "stopped at the first pass):")
        for k, o in weighed.options.items():
            what = "escalation" if k == 1 else f"race of {k}"
            echo(f"    {what:<12} {o.reward:+.3f}  P(pass) {o.p_pass:.2f}  {fmt_money(o.usd, 3)}  {o.minutes:.1f} min")


def _race_line(plan) -> str:
    minutes = "" if plan.minutes is None else f", ~{plan.minutes:.1f} min"
    return f"P(at least one passes) {plan.p_any:.2f}, expected {fmt_money(plan.usd, 3)} for all of them{minutes}"


def _print_reading(ctx) -> None:
    """How the request was read: the classifier's reasons and the groups it falls in."""
    for r in ctx.reasons:
        echo(f"  - {r}")
    echo(f"  - groups (coarse to fine): {' > '.join(ctx.groups)}")
    echo("")


def _order_row(i: int, r, explain: bool) -> list[str]:
    row = [f"{i}.", r.arm.id]
    if explain:
        low, high = r.interval
        row += ["-" if r.mean is None else f"{r.mean:.2f}",
                "-" if low is None else f"{low:.2f}-{high:.2f}",
                fmt_money(r.cost, 3), "-" if r.reward is None else f"{r.reward:+.3f}", str(r.attempts), r.why]
    return row


def _print_order(ranked: list, explain: bool) -> None:
    """The arms that can run, numbered in the order they would be tried (``explain``: as a table with the
    numbers behind it)."""
    rows = [_order_row(i, r, explain) for i, r in enumerate(ranked, 1)]
    head = ["#", "arm"] + (["score", "90% int.", "cost", "reward", "n", "why"] if explain else [])
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    for row in ([head] if explain else []) + rows:
        echo("  ".join(c.ljust(w) if j in (1, len(head) - 1) else c.rjust(w)
                       for j, (c, w) in enumerate(zip(row, widths))).rstrip())


def _print_similar(near: list, moved: dict) -> None:
    """The similar earlier tasks read for the request, and how they moved each arm's chance."""
    if not near:
        return
    echo("")
    echo("similar earlier tasks (each counts as much as it is alike; same project first):")
    for n in near:
        t = n.task
        outcome = "; ".join(f"{arm} {verdict}" for arm, verdict in t.outcome.items()) or "no attempt judged"
        where = "" if t.same_project else " (other project)"
        echo(f"  {t.similarity:.2f}  {t.task_id}{where}  {terminal_safe(headline(t.prompt)[:60])}")
        echo(f"        {outcome}")
    shifts = [f"{arm} {a:.2f} -> {b:.2f}" for arm, (a, b) in moved.items() if abs(b - a) >= 0.005]
    echo(f"  they moved: {', '.join(shifts)}" if shifts else "  they moved no arm's chance by 0.005 or more")


def memory_table(rows: list[dict[str, Any]], health: dict | None = None) -> None:
    """One table per task kind, arms in the order the router would try them now; then the arms that
    cannot be tried now (``health``: arm id -> acr_cli.health.state.Health) and why."""
    from rich.markup import escape

    con = console()
    if not rows:
        con.print("Memory is empty: run `acr run ...` and acr records every attempt here.")
        return
    kinds: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        kinds.setdefault(r["kind"] or "?", []).append(r)
    arm_width = max(len(f"{r['agent']}:{r['model']}") for r in rows)
    wide = con.width >= arm_width + 85  # room for time and last used too
    for kind, items in kinds.items():
        items.sort(key=lambda r: r.get("rank") or 1_000)
        con.print(_kind_table(kind, items, arm_width, wide))
        con.print()
    for arm_id, h in sorted((health or {}).items()):
        con.print(f"[yellow]{escape(arm_id)}[/] is {escape(h.describe())}")
    if health:
        con.print()
    con.print("[dim]# = the order acr would try the arms in now · n = judged attempts (passed, failed, timeout) · "
              "err = attempts that ended in an error or were cancelled (not evidence of skill) · unv = accepted with no "
              "verifier (each counts a quarter of a verified pass) · cost = observed mean per "
              "attempt, else expected · reward = posterior - lambda x cost" + ("" if wide else
              " · a wider terminal (or --json) also shows time and last use") + "[/]")


def _kind_table(kind: str, items: list[dict[str, Any]], arm_width: int, wide: bool):
    """One kind's table of arms (``items`` in rank order); ``wide`` adds time and last use."""
    from rich.table import Table

    total = sum(r["stats"].n for r in items)
    table = Table(title=f"[bold]{kind}[/] · {total} attempts", title_justify="left", box=None, pad_edge=False)
    cols = [("#", "right"), ("arm", "left"), ("n", "right"), ("err", "right"), ("pass", "right"), ("unv", "right"),
            ("posterior (90%)", "right"),
            ("cost", "right"), ("reward", "right")] + ([("time", "right"), ("last used", "left")] if wide else [])
    for col, just in cols:
        table.add_column(col, justify=just, no_wrap=True, min_width=arm_width if col == "arm" else None)
    for r in items:
        table.add_row(*_arm_cells(r, wide))
    return table


def _arm_cells(r: dict[str, Any], wide: bool) -> list[str]:
    """One arm's row of a kind's table: rank, counts, pass rate, posterior, cost, reward (and time, last use)."""
    s = r["stats"]
    rank = r.get("rank")
    row = [
        "-" if rank is None else str(rank), f"{r['agent']}:{r['model']}", str(s.n_judged),
        str(s.n - s.n_judged - s.n_unverified) if s.n > s.n_judged + s.n_unverified else "-",
        fmt_pct(s.n_passed / s.n_judged) if s.n_judged else "-",
        str(s.n_unverified) if s.n_unverified else "-",
        "-" if r.get("mean") is None else f"{r['mean']:.2f} ({r['low']:.2f}-{r['high']:.2f})",
        fmt_money(s.mean_cost if s.mean_cost is not None else r.get("expected_cost"), 3),
        "-" if r.get("reward") is None else f"{r['reward']:+.3f}",
    ]
    if wide:
        row += ["-" if s.mean_duration is None else f"{s.mean_duration:.0f}s", (s.last_used or "-")[:10]]
    return row
