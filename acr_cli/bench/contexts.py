"""What a replayed router may see of a task before it acts: the benchmark's labels, or only what
``acr run`` would have (``--context prompt``).

``labels`` (the default, the paper's setting): the spec's group levels, e.g. dimension ->
dimension/bench, and the dimension as the task kind.

``prompt``: the task's prompt, classified by the code ``acr run`` uses
(:func:`acr_cli.context.classify_kind`), and its project: the repository the task is in, read from
the task id (``django__django-11133`` -> ``django/django``), standing in for the git work tree
``acr run`` is started in. The groups are :func:`acr_cli.context.context_groups`, exactly as live.
The dimension, the bench and the task id itself are never shown to the router (the dimension
still decides the protocol: how many attempts the benchmark allows).

The profile's priors are per benchmark dimension; under ``prompt`` a task's kind is a live kind,
so each arm's priors are re-keyed through the mapping the built-in profiles were written with
(``KIND_DIMENSION``: which of the paper's Table 10 dimensions a live kind corresponds to).
"""

from __future__ import annotations

import re
from dataclasses import replace

from acr_cli.bench.matrix import Matrix
from acr_cli.context import classify_kind, context_groups, kind_sure
from acr_cli.domain import Arm
from acr_cli.errors import AcrError

CONTEXTS = ("labels", "prompt")
# live kind -> CodeRouterBench dimension (as profiles/balanced.yaml maps its priors); docs and
# multi_file have no dimension of their own: they take the arm's mean over the dimensions
KIND_DIMENSION = {"bug_fix": "bug_fixing", "feature": "code_generation", "test_generation": "test_generation",
                  "refactor": "code_refactoring", "explain": "code_understanding", "data_science": "data_science",
                  "algorithm": "algorithm"}

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def repository(task_id: str) -> str | None:
    """The ``owner/repo`` a benchmark task id names, or None: ``django__django-11133`` (SWE-bench
    style), ``astropy__astropy.b0db0daa.test_table.48eef659.lv1`` (a repository, a commit, a test),
    ``anthropics__claude-agent-sdk-python__91315e__22fa9f`` (a repository, then two commits).
    An id with no ``owner__repo`` part (``61810_cow``, a course's lab) names no repository."""
    parts = task_id.split("::")[-1].split(".")[0].split("__")
    if len(parts) < 2 or not all(_NAME.match(p) for p in parts[:2]):
        return None
    return f"{parts[0]}/{re.sub(r'-[0-9]+$', '', parts[1])}"


def with_prompt_context(matrix: Matrix) -> Matrix:
    """The matrix with each task's kind and groups built from its prompt and repository only."""
    tasks = []
    for t in matrix.tasks:
        prompt = t.meta.get("prompt")
        if not prompt:
            raise AcrError(f"--context prompt: {matrix.name} has no prompt for task {t.ref}",
                           hint="only benchmarks whose tasks carry their prompts (ood176) can be replayed so")
        kind, _ = classify_kind(prompt)
        repo = repository(t.meta.get("original_task_id") or t.ref)
        project = f"repo={repo}" if repo else None
        tasks.append(replace(t, kind=kind, groups=context_groups(kind, project), prompt=prompt, project=project,
                             kind_sure=kind_sure(kind, given=False)))
    return replace(matrix, tasks=tasks)


def prompt_arms(arms: dict[str, Arm]) -> dict[str, Arm]:
    """The arms a ``--context prompt`` replay routes with: each with priors per live kind."""
    return {m: rekey_priors(a) for m, a in arms.items()}


def rekey_priors(arm: Arm) -> Arm:
    """An arm whose priors are per benchmark dimension, with priors per live kind instead."""
    table = dict(arm.prior)
    if not table:
        return arm
    dims = [v for k, v in table.items() if k != "default"]
    mean = table.get("default", sum(dims) / len(dims) if dims else None)
    out = {kind: table[dim] for kind, dim in KIND_DIMENSION.items() if dim in table}
    if mean is not None:
        out["default"] = mean
    return replace(arm, prior=tuple(sorted(out.items())))
