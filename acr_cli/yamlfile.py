"""Load YAML while remembering the line of every value, for errors that point at the line.

``load(path)`` returns ``(data, lines)`` where ``lines[("arms", 2, "price")]``
is the 1-based line of that value. A syntax error becomes a
:class:`~acr_cli.errors.ProfileError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acr_cli.errors import ProfileError

Key = tuple  # a path into the document: ("arms", 0, "price", "input")


def load(path: Path, text: str | None = None, cache_dir: Path | None = None) -> tuple[Any, dict[Key, int]]:
    """Parse ``path``; with ``cache_dir``, reuse the parse of an unchanged file (importing
    PyYAML alone costs more than a whole `acr route`'s routing work)."""
    if cache_dir is not None and text is None:
        hit = _cached(path, cache_dir)
        if hit is not None:
            return hit
        data, lines = load(path)
        _store(path, cache_dir, data, lines)
        return data, lines
    import yaml

    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ProfileError(str(path), None, "file", f"cannot read: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            line = text_line(path.read_bytes(), e.start)
            raise ProfileError(str(path), line, "file", "not UTF-8 text (a YAML profile is UTF-8)") from None
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: ~10x faster
    try:
        node = yaml.compose(text, Loader=loader_cls)
    except yaml.YAMLError as e:
        raise _invalid(path, e) from None
    lines: dict[Key, int] = {}
    if node is None:
        return None, lines
    try:
        return _convert(node, (), lines, yaml.constructor.SafeConstructor(), _Budget()), lines
    except yaml.YAMLError as e:  # a tag plain YAML does not define (!Ref, !!python/name:...): not a profile
        raise _invalid(path, e) from None
    except _DuplicateKey as e:
        raise ProfileError(str(path), e.line, e.field, "duplicate key") from None
    except _Problem as e:
        raise ProfileError(str(path), e.line, "yaml", e.problem) from None


def _invalid(path: Path, e: Any) -> ProfileError:
    mark = getattr(e, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(e, "problem", None) or str(e)
    return ProfileError(str(path), line, "yaml", f"invalid YAML: {problem}")


def text_line(raw: bytes, offset: int) -> int:
    """The 1-based line holding byte ``offset``."""
    return raw.count(b"\n", 0, offset) + 1


def _cache_file(path: Path, cache_dir: Path) -> tuple[Path, list[int]] | None:
    import hashlib

    try:
        st = path.stat()
    except OSError:
        return None
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return cache_dir / f"{name}.json", [st.st_mtime_ns, st.st_size]


def _cached(path: Path, cache_dir: Path) -> tuple[Any, dict[Key, int]] | None:
    import json

    where = _cache_file(path, cache_dir)
    if where is None:
        return None
    try:
        doc = json.loads(where[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if doc.get("stamp") != where[1] or doc.get("path") != str(path.resolve()):
        return None
    return doc["data"], {tuple(k): v for k, v in doc["lines"]}


def _store(path: Path, cache_dir: Path, data: Any, lines: dict[Key, int]) -> None:
    import json
    import os

    where = _cache_file(path, cache_dir)
    if where is None:
        return
    try:
        text = json.dumps({"path": str(path.resolve()), "stamp": where[1], "data": data,
                           "lines": [[list(k), v] for k, v in lines.items()]})
    except (TypeError, ValueError):
        return  # a YAML value JSON cannot hold (a date, say): parse the file each time
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = where[0].with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, where[0])
    except OSError:
        pass  # a read-only cache only costs time


class _DuplicateKey(Exception):
    def __init__(self, field: str, line: int):
        self.field, self.line = field, line


class _Problem(Exception):
    def __init__(self, problem: str, line: int):
        self.problem, self.line = problem, line


class _Budget:
    """Aliases (``*name``) share a node: a document can refer to itself, or expand to billions of values."""

    MAX_VALUES = 100_000  # a profile holds a few hundred

    def __init__(self) -> None:
        self.values = 0
        self.open: set[int] = set()  # the collections being converted, outermost to innermost


def _convert(node: Any, key: Key, lines: dict[Key, int], ctor: Any, budget: _Budget) -> Any:
    import yaml

    line = node.start_mark.line + 1
    lines[key] = line
    budget.values += 1
    if budget.values > budget.MAX_VALUES:
        raise _Problem(f"aliases expand to over {budget.MAX_VALUES:,} values (a profile holds a few hundred)",
                            line)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in budget.open:
            raise _Problem("an alias refers to the collection that contains it", line)
        budget.open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [_convert(v, key + (i,), lines, ctor, budget) for i, v in enumerate(node.value)]
            out: dict[Any, Any] = {}
            for k_node, v_node in node.value:
                k = ctor.construct_object(k_node, deep=True)
                try:
                    hash(k)
                except TypeError:  # `? [a, b]`: YAML allows a list or a mapping as a key, no profile field is one
                    raise _Problem("a key must be a name or a number, not a list or a mapping",
                                   k_node.start_mark.line + 1) from None
                if k in out:
                    raise _DuplicateKey(dotted(key + (k,)), k_node.start_mark.line + 1)
                out[k] = _convert(v_node, key + (k,), lines, ctor, budget)
                lines[key + (k,)] = k_node.start_mark.line + 1  # point at the key, not the value
            return out
        finally:
            budget.open.discard(id(node))
    return ctor.construct_object(node, deep=True)


def dotted(key: Key) -> str:
    """("arms", 2, "price", "input") -> "arms[2].price.input"."""
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


def line_of(lines: dict[Key, int], key: Key) -> int | None:
    """The line of ``key``, or of its closest ancestor present in the file."""
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return lines.get(())
