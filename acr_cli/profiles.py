"""Profiles: the arms acr may use, their prices and priors, the default order, and settings.

A profile is a YAML file::

    description: Cheap models first, strong ones when needed.
    settings:                 # all optional
      cost_weight: 0.1        # lambda: reward = score - lambda * USD
      timeout: 1200           # seconds per attempt (the agent), whole process group killed after
      verify_timeout: 900     # seconds for the verifier command
      max_attempts: 3         # attempts per task
      max_cost: 5.0           # USD per task; null = no limit
      permissions: workspace-write   # read-only | workspace-write | full
      sandbox: none           # bwrap: the agent and its verifier write only the work tree (acr_cli.sandbox)
      race: null              # arms acr run starts at once: N, or auto (auto:M): the plan chooses up to 3 (M)
      policy: learned         # learned | fixed | cascade:A,B | always:ARM | linucb | ... (acr_cli/routing/registry.py)
      prior_weight: 2         # pseudo-count given to an arm's prior mean
      typical_tokens: 150000  # tokens of one attempt before any is observed (cost guess); null = unknown
      time_weight: 0.05       # USD a minute of waiting is worth to the learned policy's plan
      verify: null            # default verifier command
      tell_verifier: true     # the first attempt's prompt names the command that will check its work
      model_silence: 150      # seconds opencode may wait on its model printing nothing (a silent retry when out
                              # of quota) before acr ends the attempt and holds the login; null = no watchdog
    arms:
      - agent: codex          # claude | codex | opencode | gemini | a name under `agents:`
        model: gpt-5.4
        price: {input: 2.5, output: 15.0}   # USD per 1M tokens
        args: []              # extra CLI arguments for this arm
        prior: {default: 0.5, bug_fix: 0.57}  # optional prior mean score per task kind
        prior_weight: 4       # optional, overrides settings.prior_weight
        billing: api          # api (default) | plan: a subscription; its attempts cost $0 for routing and budgets
    order:                    # default order per task kind (arm ids AGENT:MODEL)
      default: [codex:gpt-5.4]
    agents:                   # optional generic CLIs (see acr_cli/agents/command.py)
      mycli: {command: [mycli, --model, "{model}", "{prompt}"], output: text}

A profile may start from another with ``extends: NAME``: its ``settings`` are
merged over the base's; ``arms``, ``order`` and ``agents`` replace the base's
when given (an arm named again without a price or priors keeps the base's).
Without a ``description`` of its own, it is described as the base's name "with
changes" followed by the base's description.

Resolution of ``--profile NAME|PATH``: an existing path; else
``<config>/profiles/NAME.yaml``; else the built-in ``profiles/NAME.yaml``.
Every error names the file, the line and the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from acr_cli import agents, yamlfile
from acr_cli.agents.command import validate_spec
from acr_cli.domain import BILLING, PERMISSIONS, Arm, parse_arm_id  # noqa: F401 (re-exported)
from acr_cli.errors import AcrError, ConfigError, ProfileError
from acr_cli.resources import profiles_dir
from acr_cli.routing import registry

BUILTIN_AGENTS = agents.BUILTIN
DEFAULT_PROFILE = "balanced"


@dataclass(frozen=True)
class Settings:
    cost_weight: float = 0.1
    timeout: float = 1200.0
    verify_timeout: float = 900.0
    max_attempts: int = 3
    max_cost: float | None = None
    permissions: str = "workspace-write"
    policy: str = "learned"
    prior_weight: float = 2.0
    typical_tokens: float | None = None
    verify: str | None = None
    tell_verifier: bool = True
    time_weight: float = 0.05  # USD a minute of waiting is worth (see docs/routing.md)
    model_silence: float | None = 150.0  # acr_cli.agents.opencode.SilenceWatchdog
    sandbox: str = "none"  # bwrap: the agent and its verifier in bubblewrap (acr_cli.sandbox)
    race: int | str | None = None  # arms acr run starts at once: N, or "auto" / "auto:M" (acr_cli.routing.race)


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path | None
    description: str
    settings: Settings
    arms: tuple[Arm, ...]
    order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)

    def arm(self, arm_id: str) -> Arm | None:
        for a in self.arms:
            if a.id == arm_id:
                return a
        return None

    def order_for(self, kind: str | None) -> list[Arm]:
        """Arms in the profile's order for ``kind``; arms not listed follow in file order."""
        ids = self.order.get(kind or "", ()) or self.order.get("default", ())
        listed = [a for i in ids if (a := self.arm(i)) is not None]
        return listed + [a for a in self.arms if a not in listed]

    def resolve_arm(self, text: str) -> Arm:
        """An ``AGENT:MODEL`` from the command line: the profile's arm, or a bare one."""
        agent, model = parse_arm_id(text)
        found = self.arm(f"{agent}:{model}")
        return found if found is not None else Arm(agent=agent, model=model)


# --------------------------------------------------------------------------- loading


def builtin_dir() -> Path:
    return profiles_dir()


def available(user_dir: Path) -> list[tuple[str, Path, str]]:
    """(name, path, origin) of every profile: user ones shadow built-ins."""
    seen: dict[str, tuple[str, Path, str]] = {}
    for origin, d in (("built-in", builtin_dir()), ("user", user_dir)):
        if d.is_dir():
            for p in sorted(d.glob("*.yaml")):
                seen[p.stem] = (p.stem, p, origin)
    return sorted(seen.values())


def is_path(spec: str) -> bool:
    """A profile given as a file (``./mine.yaml``, ``~/p/x.yml``) rather than by name."""
    return Path(spec).suffix in (".yaml", ".yml") or "/" in spec


def find(spec: str, user_dir: Path) -> Path:
    if not spec.strip():
        names = ", ".join(n for n, _, _ in available(user_dir)) or "none"
        raise ConfigError("empty profile name", hint=f"available profiles: {names}")
    p = Path(spec).expanduser()
    if is_path(spec) or p.exists():
        if p.is_file():
            return p
        if p.is_dir():
            raise ConfigError(f"profile {spec} is a directory", hint="give a profile file (NAME.yaml) or a name")
        raise ConfigError(f"profile file {spec} does not exist")
    for d in (user_dir, builtin_dir()):
        candidate = d / f"{spec}.yaml"
        if candidate.is_file():
            return candidate
        if d == user_dir and (candidate.is_symlink() or candidate.exists()):  # yours, broken: never the built-in
            what = "a directory" if candidate.is_dir() else "a symlink to nothing readable"
            raise ConfigError(f"your profile {candidate} is {what}",
                              hint=f"fix or remove it (the built-in {spec!r} is used only when you have none)")
    names = ", ".join(n for n, _, _ in available(user_dir)) or "none"
    raise ConfigError(f"no profile named {spec!r}", hint=f"available profiles: {names}")


def load(spec: str, user_dir: Path, _seen: tuple[Path, ...] = (), cache_dir: Path | None = None) -> Profile:
    """Load and validate a profile (``cache_dir``: reuse parses of unchanged files)."""
    path = find(spec, user_dir)
    data, lines = yamlfile.load(path, cache_dir=cache_dir)
    base = None
    if isinstance(data, dict) and "extends" in data:
        parent = data["extends"]
        where = yamlfile.line_of(lines, ("extends",))
        if not isinstance(parent, str):
            raise ProfileError(str(path), where, "extends", "expected a profile name or path")
        if parent == path.stem:  # a user profile extending the built-in it shadows
            parent_path = builtin_dir() / f"{parent}.yaml"
            if not parent_path.is_file() or parent_path.resolve() == path.resolve():
                raise ProfileError(str(path), where, "extends", f"profile {parent!r} extends itself")
        else:
            try:
                parent_path = find(parent, user_dir)
            except ConfigError as e:
                raise ProfileError(str(path), where, "extends", e.message) from None
        if parent_path.resolve() in _seen or parent_path.resolve() == path.resolve():
            raise ProfileError(str(path), where, "extends", f"profile {parent!r} extends itself (a cycle)")
        base = load(str(parent_path), user_dir, _seen + (path.resolve(),), cache_dir)
    return parse(data, lines, path, base)


def parse(data: Any, lines: dict, path: Path, base: Profile | None = None) -> Profile:
    v = _Validator(str(path), lines)
    if data is None:
        data = {}
    v.mapping(data, (), {"description", "settings", "arms", "order", "agents", "name", "extends"})
    settings = _settings(v, data.get("settings") or {}, base.settings if base else Settings())
    agents = _agents(v, data["agents"] or {}) if "agents" in data else (dict(base.agents) if base else {})
    known_agents = set(BUILTIN_AGENTS) | set(agents)
    if "arms" in data or base is None:
        arms = _arms(v, data.get("arms"), known_agents)
        if base is not None:
            arms = [_inherit(a, base) for a in arms]
    else:
        arms = list(base.arms)
    ids = [a.id for a in arms]
    if "order" in data or base is None:
        order = _order(v, data.get("order") or {}, set(ids))
    else:
        order = dict(base.order)
    profile = Profile(
        name=str(data.get("name") or path.stem),
        path=path,
        description=str(data.get("description") or (f"{base.name} with changes: {base.description}" if base else "")),
        settings=settings,
        arms=tuple(arms),
        order=order,
        agents=agents,
    )
    _policy_arms(v, profile)
    return profile


def _inherit(arm: Arm, base: Profile) -> Arm:
    """An arm a profile that extends ``base`` names again: what it leaves out (its price, its priors) is the
    base's arm's (``extends: balanced`` with an own ``arms:`` list to leave an agent out keeps the rest)."""
    theirs = base.arm(arm.id)
    if theirs is None:
        return arm
    if arm.price_in is None and arm.price_out is None:
        arm = replace(arm, price_in=theirs.price_in, price_out=theirs.price_out)
    if not arm.prior and theirs.prior:
        arm = replace(arm, prior=theirs.prior, prior_weight=arm.prior_weight if arm.prior_weight is not None
                      else theirs.prior_weight)
    return arm


def bare(name: str, description: str) -> Profile:
    """A profile with no arms and the default settings: what a replay of a results folder routes with
    when no ``--profile`` is given (the arms come from the folder, with no priors)."""
    return Profile(name=name, path=None, description=description, settings=Settings(), arms=())


def unpriced(profile: Profile) -> list[str]:
    """The ids of the profile's arms with no price, neither the profile's nor the price catalog's: acr cannot
    estimate what they cost until it has seen them run."""
    from acr_cli.routing.builders import catalog_prices

    return [a.id for a, found in zip(profile.arms, catalog_prices(profile.arms))
            if (a.price_in is None or a.price_out is None) and found is None]


def _policy(v: "_Validator", val: Any, key: tuple) -> str:
    if not isinstance(val, str):
        raise v.error(key, f"expected a policy name ({registry.help_text(live=True)}), got {_kind(val)}")
    try:
        registry.parse(val, live=True, option="policy")
    except AcrError as e:
        raise v.error(key, e.message + (f" ({e.hint})" if e.hint else "")) from None
    return val.strip()


def _policy_arms(v: "_Validator", profile: Profile) -> None:
    """A policy that names arms (``always:ARM``, ``cascade:A,B``) names arms of this profile."""
    entry, _ = registry.parse(profile.settings.policy, live=True)
    if entry.arg:
        try:
            registry.build(profile.settings.policy, registry.live_setup(profile))
        except AcrError as e:
            raise v.error(("settings", "policy"), e.message + (f" ({e.hint})" if e.hint else "")) from None


def _settings(v: "_Validator", raw: Any, s: Settings) -> Settings:
    key = ("settings",)
    v.mapping(raw, key, set(Settings.__dataclass_fields__))
    out: dict[str, Any] = {}
    for name in raw:
        k = key + (name,)
        val = raw[name]
        if name in ("timeout", "verify_timeout"):  # the same limit as --timeout and config files
            out[name] = v.number(val, k, minimum=1.0)
        elif name in ("cost_weight", "prior_weight", "time_weight"):
            out[name] = v.number(val, k, minimum=0.0)
        elif name in ("typical_tokens", "model_silence"):
            out[name] = None if val is None else v.number(val, k, minimum=1.0)
        elif name == "max_cost":
            out[name] = None if val is None else v.number(val, k, minimum=0.0)
        elif name == "max_attempts":
            out[name] = int(v.number(val, k, minimum=1, integer=True))
        elif name == "permissions":
            out[name] = v.choice(val, k, PERMISSIONS)
        elif name == "sandbox":
            out[name] = v.choice(val, k, ("bwrap", "none"))
        elif name == "race":
            out[name] = _race(v, val, k)
        elif name == "policy":
            out[name] = _policy(v, val, k)
        elif name == "verify":
            out[name] = None if val is None else v.string(val, k)
        elif name == "tell_verifier":
            if not isinstance(val, bool):
                raise v.error(k, f"expected true or false, got {_quoted(val)}")
            out[name] = val
    return replace(s, **out)


def _race(v: "_Validator", val: Any, k: tuple) -> int | str | None:
    """A profile's ``race``: null, N, ``auto`` or ``auto:M`` (acr_cli.routing.race.parse_ask)."""
    from acr_cli.routing.race import parse_ask

    if val is None:
        return None
    try:
        parse_ask(val)
    except ValueError as e:
        raise v.error(k, str(e)) from None
    return val


def _arms(v: "_Validator", raw: Any, known_agents: set[str]) -> list[Arm]:
    if raw is None:
        raise v.error(("arms",), "a profile needs at least one arm (a list of {agent, model, price})")
    if not isinstance(raw, list) or not raw:
        raise v.error(("arms",), "expected a non-empty list of arms")
    arms: list[Arm] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        k = ("arms", i)
        v.mapping(item, k, {"agent", "model", "price", "args", "prior", "prior_weight", "billing"})
        agent = v.string(item.get("agent"), k + ("agent",))
        if agent not in known_agents:
            raise v.error(k + ("agent",), f"unknown agent {_quoted(agent)}; known: {', '.join(sorted(known_agents))}")
        model = v.string(item.get("model"), k + ("model",))
        if not model.strip():
            raise v.error(k + ("model",), "empty model name")
        price_in = price_out = None
        if "price" in item:
            v.mapping(item["price"], k + ("price",), {"input", "output"}, required={"input", "output"})
            price_in = v.number(item["price"]["input"], k + ("price", "input"), minimum=0.0)
            price_out = v.number(item["price"]["output"], k + ("price", "output"), minimum=0.0)
        args = tuple(v.string_list(item.get("args", []), k + ("args",)))
        prior: list[tuple[str, float]] = []
        if "prior" in item:
            v.mapping(item["prior"], k + ("prior",), None)
            for kind, mean in item["prior"].items():
                prior.append((str(kind), v.number(mean, k + ("prior", kind), minimum=0.0, maximum=1.0)))
        pw = item.get("prior_weight")
        prior_weight = None if pw is None else v.number(pw, k + ("prior_weight",), minimum=0.0)
        billing = v.choice(item.get("billing", "api"), k + ("billing",), BILLING)
        arm = Arm(agent, model, price_in, price_out, args, tuple(prior), prior_weight, billing)
        if arm.id in seen:
            raise v.error(k, f"arm {arm.id} is listed twice")
        seen.add(arm.id)
        arms.append(arm)
    return arms


def _order(v: "_Validator", raw: Any, ids: set[str]) -> dict[str, tuple[str, ...]]:
    v.mapping(raw, ("order",), None)
    out: dict[str, tuple[str, ...]] = {}
    for kind, lst in raw.items():
        k = ("order", kind)
        items = v.string_list(lst, k)
        for j, arm_id in enumerate(items):
            if arm_id not in ids:
                raise v.error(k + (j,), f"{_quoted(arm_id)} is not one of the profile's arms ({', '.join(sorted(ids))})")
        out[str(kind)] = tuple(items)
    return out


def _agents(v: "_Validator", raw: Any) -> dict[str, dict[str, Any]]:
    v.mapping(raw, ("agents",), None)
    out = {}
    for name, spec in raw.items():
        k = ("agents", name)
        if name in BUILTIN_AGENTS:
            raise v.error(k, f"{name!r} is a built-in agent; pick another name for a generic CLI")
        problem = validate_spec(spec)
        if problem:
            sub, msg = problem
            raise v.error(k + sub, msg)
        out[str(name)] = spec
    return out


class _Validator:
    def __init__(self, path: str, lines: dict):
        self.path, self.lines = path, lines

    def error(self, key: tuple, problem: str) -> ProfileError:
        return ProfileError(self.path, yamlfile.line_of(self.lines, key), yamlfile.dotted(key), problem)

    def mapping(self, val: Any, key: tuple, allowed: set[str] | None, required: set[str] = frozenset()) -> None:
        if not isinstance(val, dict):
            raise self.error(key, f"expected a mapping, got {_kind(val)}")
        if allowed is not None:
            for k in val:
                if k not in allowed:
                    raise self.error(key + (k,), f"unknown field; expected one of {', '.join(sorted(allowed))}")
        for k in sorted(required):
            if k not in val:
                raise self.error(key, f"missing field {k!r}")

    def number(self, val: Any, key: tuple, minimum: float | None = None, maximum: float | None = None,
               integer: bool = False) -> float:
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise self.error(key, f"expected a number, got {_kind(val)}")
        if isinstance(val, float) and not math.isfinite(val):
            raise self.error(key, f"expected a finite number, got {val}")
        if integer and int(val) != val:
            raise self.error(key, f"expected a whole number, got {val}")
        if minimum is not None and val < minimum:
            raise self.error(key, f"must be >= {minimum:g}, got {val}")
        if maximum is not None and val > maximum:
            raise self.error(key, f"must be <= {maximum:g}, got {val}")
        return float(val)

    def string(self, val: Any, key: tuple) -> str:
        if val is None:
            raise self.error(key, "missing value")
        if not isinstance(val, (str, int, float)) or isinstance(val, bool):
            raise self.error(key, f"expected a string, got {_kind(val)}")
        return str(val)

    def string_list(self, val: Any, key: tuple) -> list[str]:
        if not isinstance(val, list):
            raise self.error(key, f"expected a list, got {_kind(val)}")
        return [self.string(x, key + (i,)) for i, x in enumerate(val)]

    def choice(self, val: Any, key: tuple, options: tuple[str, ...]) -> str:
        if val not in options:
            raise self.error(key, f"expected one of {', '.join(options)}, got {_quoted(val)}")
        return str(val)


def _kind(val: Any) -> str:
    if val is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: f"the string {_quoted(val)}", bool: f"{val}"}.get(
        type(val), repr(val))


def _quoted(val: Any) -> str:
    """A value from the file as an error quotes it: secrets masked before it is cut to 80 characters (a key cut
    in half would no longer be recognised as one)."""
    from acr_cli.redact import redact

    text = repr(redact(val) if isinstance(val, str) else val)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_arms(text: str | None, profile: Profile) -> list[str] | None:
    """The ``--arms`` list, checked: AGENT:MODEL items, each once, whose agent acr knows."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise AcrError("--arms: no arm given", hint="--arms AGENT:MODEL[,AGENT:MODEL...], e.g. --arms codex:gpt-5.4")
    for item in items:
        try:
            agent, _ = parse_arm_id(item)
        except ValueError as e:
            raise AcrError(f"--arms: {e}") from None
        try:
            agents.get(agent, profile.agents)
        except AcrError as e:
            raise AcrError(f"--arms {item}: {e.message}", hint=e.hint) from None
    twice = sorted({x for x in items if items.count(x) > 1})
    if twice:  # a task tries an arm once: a second mention would change nothing but the count shown
        raise AcrError(f"--arms: {', '.join(twice)} listed twice", hint="list each AGENT:MODEL once")
    return items
