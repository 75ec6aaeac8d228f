"""Benchmark descriptions (``bench/<name>.yaml``): files, checksums, order, protocols, published numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acr_cli.errors import AcrError
from acr_cli.resources import bench_dir

NAMES = ("ood176", "id2919")


@dataclass(frozen=True)
class FileSpec:
    name: str
    sha256: str | None


@dataclass(frozen=True)
class BenchSpec:
    name: str
    title: str
    files: dict[str, FileSpec]
    format: str  # "ood" | "id"
    execution_verified: tuple[str, ...] | str  # dimensions, or "all"
    protocols: tuple[str, ...]
    default_protocol: str
    groups: tuple[str, ...]
    published: dict[str, dict[str, float]] = field(default_factory=dict)
    published_note: str = ""
    aliases: dict[str, str] = field(default_factory=dict)
    profile: str = "coderouterbench"

    def verified(self, dimension: str) -> bool:
        return self.execution_verified == "all" or dimension in self.execution_verified


def load(name: str) -> BenchSpec:
    import yaml

    if name not in NAMES:
        raise AcrError(f"unknown benchmark {name!r}: not ood176, id2919 or memory, and no such folder",
                       hint=f"choose one of: {', '.join(NAMES)}, memory, or a folder holding results.jsonl "
                            "(or results.csv) with your own results")
    path = bench_dir() / f"{name}.yaml"
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    pub = data.get("published") or {}
    ev = data.get("execution_verified", "all")
    return BenchSpec(
        name=data["name"],
        title=data.get("title", name),
        files={k: FileSpec(v["name"], v.get("sha256")) for k, v in data["files"].items()},
        format=data["format"],
        execution_verified=ev if ev == "all" else tuple(ev),
        protocols=tuple(data.get("protocols", ["cascade"])),
        default_protocol=data.get("default_protocol", "cascade"),
        groups=tuple(data.get("groups", ["dimension"])),
        published={str(k): dict(v) for k, v in (pub.get("results") or {}).items()},
        published_note=str(pub.get("note", "")),
        aliases={str(k): str(v) for k, v in (data.get("aliases") or {}).items()},
        profile=str(data.get("profile") or "coderouterbench"),
    )


def all_files() -> dict[str, str | None]:
    """Every file name the benchmarks use, with its sha256 (for `acr bench download`)."""
    out: dict[str, str | None] = {}
    for n in NAMES:
        for f in load(n).files.values():
            out[f.name] = f.sha256
    return out


