"""``acr init``: a profile of the arms that can actually run here."""

from __future__ import annotations

from pathlib import Path

import typer

from acr_cli.cli.common import JSON_HELP, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_PROBLEMS, AcrError, ConfigError, Reported

BUILTIN_SOURCES = ("balanced", "quality", "cheap")  # where known models' prices and priors come from, in order


def init(
    name: str = typer.Option("mine", "--name", "-n", help="Profile name: written to <config>/profiles/NAME.yaml."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing profile of that name."),
    include_unknown: bool = typer.Option(False, "--include-unknown", help="Also keep arms whose readiness a check "
                                         "could not tell (they may run)."),
    refresh: bool = typer.Option(False, "--refresh", help="Ask the CLIs again instead of using cached answers."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write a profile with only the arms that can run here: installed CLIs with credentials.

    Every arm of the built-in profiles (balanced, quality, cheap) is checked as `acr doctor` does
    (installed, logged in or keyed for its provider); the ready ones go into the new profile with the
    built-in prices and priors, in the built-in order. An arm whose readiness a check could not tell
    (a login status acr does not understand, a CLI that did not answer) is left out unless
    --include-unknown keeps it; init names each such arm and says how to keep them. It prints what it
    kept and what it left out and why, and makes the profile the active one when none is set.

    Examples: acr init; acr init --name work --force; acr init --include-unknown --json
    """
    import yaml

    from acr_cli.config import read_toml, set_user_value
    from acr_cli.profiles import builtin_dir

    _check_name(name)
    p = paths()
    target = p.profiles_dir / f"{name}.yaml"
    if target.exists() and not force:
        raise AcrError(f"{target} exists", hint="pass --force to overwrite it, or --name to write another")
    sources = [yaml.safe_load((builtin_dir() / f"{s}.yaml").read_text()) for s in BUILTIN_SOURCES]
    candidates: dict[str, dict] = {}  # arm id -> its built-in entry (first source that lists it)
    for src in sources:
        for arm in src.get("arms", []):
            candidates.setdefault(f"{arm['agent']}:{arm['model']}", arm)
    kept, left = _sort_by_readiness(candidates, p.cache_dir, refresh, include_unknown)
    out = {"profile": name, "path": str(target), "kept": kept, "left_out": left, "written": False,
           "active": False}
    if kept:
        _write_profile(target, sources[0], candidates, {k["arm"] for k in kept})
        out["written"] = True
        if not read_toml(p.config_file).get("profile"):
            set_user_value(p.config_file, "profile", name)
            out["active"] = True
    if json_out:
        print_json(out)
    else:
        _print(out)
    if not kept:
        raise Reported(EXIT_PROBLEMS)


def _check_name(name: str) -> None:
    """A plain name: letters, digits, '.', '_', '-' (no path, no space, no control character), not hidden,
    and not a built-in profile's."""
    import re

    if not re.fullmatch(r"[^\W][\w.-]*", name or "") or name in BUILTIN_SOURCES:
        raise ConfigError(f"--name {name!r}: give a plain name (letters, digits, '.', '_', '-') that is not a "
                          "built-in profile's", hint="e.g. acr init --name mine")


def _sort_by_readiness(candidates: dict[str, dict], cache_dir: Path, refresh: bool,
                       include_unknown: bool) -> tuple[list[dict], list[dict]]:
    """Each arm checked as `acr doctor` does: (kept, left out), each row the arm, its state, reason and fix.
    Kept: the ready arms, and with ``include_unknown`` those whose readiness no check could tell."""
    from acr_cli import agents
    from acr_cli.health import readiness

    kept, left = [], []
    for arm_id, entry in candidates.items():
        adapter = agents.get(entry["agent"])
        r = readiness.check(entry["agent"], entry["model"], adapter.executable, cache_dir=cache_dir,
                            refresh=refresh, version_argv=adapter.version_argv())
        row = {"arm": arm_id, "state": r.state, "reason": r.reason, "fix": r.fix}
        (kept if r.state == "ready" or (include_unknown and r.state == "unknown") else left).append(row)
    return kept, left


def _write_profile(target: Path, base: dict, candidates: dict[str, dict], ids: set[str]) -> None:
    """The profile of the arms ``ids``: their built-in entries in the built-in order, and ``base``'s
    settings and per-kind order (kinds left with no arm are dropped). Written whole or not at all."""
    import yaml

    order = {kind: [a for a in arms if a in ids] for kind, arms in (base.get("order") or {}).items()}
    doc = {"description": f"Written by `acr init`: the arms that were ready here ({len(ids)}).",
           "settings": base.get("settings", {}),
           "arms": [candidates[a] for a in candidates if a in ids],
           "order": {k: v for k, v in order.items() if v}}
    if not doc["order"]:
        del doc["order"]
    target.parent.mkdir(parents=True, exist_ok=True)
    header = ("# acr profile written by `acr init`; edit freely (see `acr profiles show`). Prices: USD per\n"
              "# 1M tokens; priors: the built-in profiles' per-kind mean scores.\n")
    tmp = target.with_suffix(".yaml.tmp")
    tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=120))
    tmp.replace(target)


def _print(out: dict) -> None:
    for k in out["kept"]:
        echo(f"  ✓ {k['arm']}" + ("" if k["state"] == "ready" else f"  (readiness unknown, kept: {k['reason']})"))
    for k in out["left_out"]:
        if k["state"] == "unknown":
            echo(f"  ? {k['arm']}: readiness unknown, left out: {k['reason']}" + (f"; {k['fix']}" if k.get("fix") else ""))
        else:
            echo(f"  ✗ {k['arm']}: {k['reason']}" + (f"; {k['fix']}" if k.get("fix") else ""))
    unknown = [k["arm"] for k in out["left_out"] if k["state"] == "unknown"]
    if not out["written"]:
        echo("no arm is ready here, so no profile was written: do what the lines above say, then "
             "`acr init` again (or `acr init --include-unknown`)")
        return
    echo(f"wrote {out['path']} with {len(out['kept'])} arm(s)"
         + ("; it is now the active profile" if out["active"] else
            f"; make it the active one with `acr config set profile {out['profile']}`"))
    if unknown:
        name = "" if out["profile"] == "mine" else f" --name {out['profile']}"
        echo(f"left out {len(unknown)} arm(s) whose readiness no check could tell (they may well run): "
             f"{', '.join(unknown)}; `acr init --include-unknown --force{name}` keeps them")
