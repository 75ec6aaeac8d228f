"""The JSON that memory keeps inside its text columns, and the shape acr writes each in.

``tasks.context`` (how a request was read), ``tasks.baseline`` (the verifier on the untouched tree),
``attempts.changes`` (a kept attempt's diffstat), ``runs.params`` and ``runs.report`` (a stored
replay) hold JSON. Everything acr writes has the shapes below; ``acr memory import`` refuses a
record whose JSON has another (:func:`problem`), so that a hand-edited export cannot make
``acr show`` or ``acr bench report`` fail later, and the readers (:func:`load`) go through the same
check, so that a row written some other way reads as absent rather than as a crash.

A shape is a Python type, a check (:data:`NUMBER`, :data:`COUNT`, ...), a one-element list
``[shape]`` (a list of those), a :class:`Row` (a list of exactly those, in order), or a dict: a JSON
object whose listed keys have those shapes (keys not listed are allowed: a newer acr may write more).
JSON null is allowed for an object's values, except the keys of ``REQUIRED`` (there and not null) and
:class:`Given` ones (not null if there); in a list or a row only where the check says so.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

Check = Callable[[Any], bool]


class Is:
    """A check on a JSON value, with what it expects said for people."""

    def __init__(self, ok: Check, what: str):
        self.ok, self.what = ok, what

    def __call__(self, v: Any) -> bool:
        return self.ok(v)


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


NUMBER = Is(lambda v: _real(v) and math.isfinite(v), "a number")
REAL = Is(_real, "a number")  # a figure, where a replay may write Infinity (a huge --cost-weight)
COUNT = Is(lambda v: _whole(v) and v >= 0, "a whole number >= 0")
SHARE = Is(lambda v: _real(v) and 0 <= v <= 1, "a number from 0 to 1")
WHOLE = Is(_whole, "a whole number")
SECONDS = Is(lambda v: _real(v) and math.isfinite(v) and v >= 0, "a number >= 0")
LINES = Is(lambda v: v is None or COUNT(v), "a whole number >= 0 or null")  # a diffstat's count (null: binary)
_WHAT = {str: "a string", bool: "true or false"}


class Row(tuple):
    """The shape of a list of exactly these shapes, in order."""


class Given:
    """An object's key that may be left out but, when there, is not null (a reader formats it)."""

    def __init__(self, shape: Any):
        self.shape = shape


METRIC_KEYS = ("avg_perf", "cum_regret", "cost_usd", "perf_per_dollar", "racc", "apply_ok", "avg_steps",
               "escalations", "tokens_in", "tokens_out")
_METRICS = {m: REAL for m in METRIC_KEYS}
_RESULT = {"policy": str, "n": COUNT, **_METRICS, "sd": {m: REAL for m in METRIC_KEYS},
           "published": {m: REAL for m in METRIC_KEYS}, "orders": COUNT, "unscorable": COUNT,
           "missing_decisions": COUNT, "run_ids": [str], "curve": [REAL]}

SHAPES: dict[str, Any] = {
    "context": {"kind": str, "language": str, "size": str, "project": str, "groups": [str], "reasons": [str],
                "kind_sure": SHARE},
    "baseline": {"command": str, "passed": bool, "exit_code": WHOLE, "score": SHARE, "timed_out": bool,
                 "duration_s": SECONDS, "tail": str},
    "changes": [Row((str, LINES, LINES))],  # path, lines added, lines deleted
    "params": {"group": str, "cost_weight": Given(NUMBER), "seed": WHOLE, "k": COUNT},
    "report": {**_METRICS, "policy": str, "n": COUNT, "n_tasks": COUNT, "curve": [REAL], "unscorable": COUNT,
               "benchmark": str, "title": str, "context": str, "cost_weight": Given(NUMBER), "group": str,
               "warnings": [str], "published_note": str, "result": _RESULT},
}
# keys that must be there (and not null) when the object is: what the readers take for granted
REQUIRED: dict[str, tuple[str, ...]] = {"baseline": ("passed", "duration_s"), "report.result": ("policy", "n")}
TOP: dict[str, type] = {"context": dict, "baseline": dict, "changes": list, "params": dict, "report": dict}


def _why(value: Any, shape: Any, where: str, required: tuple[str, ...] = (), nullable: bool = True) -> str | None:
    """Why ``value`` does not have ``shape`` (a short phrase naming where), or None if it does."""
    if value is None and (nullable or isinstance(shape, (type, dict, list, Row))):
        return None if nullable else f"{where} is null"
    if isinstance(shape, dict):
        return _why_object(value, shape, where, required)
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} should be a list"
        return _first_why((item, shape[0], f"{where}[{i}]") for i, item in enumerate(value))
    if isinstance(shape, Row):
        if not isinstance(value, list) or len(value) != len(shape):
            return f"{where} should be a list of {len(shape)}"
        return _first_why((item, sub, f"{where}[{i}]") for i, (item, sub) in enumerate(zip(value, shape)))
    return _why_scalar(value, shape, where)


def _why_object(value: Any, shape: dict, where: str, required: tuple[str, ...]) -> str | None:
    """Why ``value`` is not the object ``shape`` describes: not an object, a required key missing, or a key's value."""
    if not isinstance(value, dict):
        return f"{where} should be an object"
    for key in required:
        if value.get(key) is None:
            return f"{where} has no {key}"
    for key, sub in shape.items():
        if isinstance(sub, Given):
            if key in value and value[key] is None:
                return f"{where}.{key} is null"
            sub = sub.shape
        why = _why(value.get(key), sub, f"{where}.{key}", REQUIRED.get(f"{where}.{key}", ()))
        if why:
            return why
    return None


def _first_why(items: Any) -> str | None:
    """The first of (item, shape, where) whose item does not have its shape (items of a list are never null)."""
    for item, sub, where in items:
        why = _why(item, sub, where, nullable=False)
        if why:
            return why
    return None


def _why_scalar(value: Any, shape: Any, where: str) -> str | None:
    """Why ``value`` is not of ``shape``: a type (a bool is no number) or a check (Is, COUNT, ...)."""
    if isinstance(shape, type):
        ok = isinstance(value, shape) and not (isinstance(value, bool) and shape is not bool)
    else:
        ok = shape(value)
    what = shape.what if isinstance(shape, Is) else _WHAT.get(shape, getattr(shape, "__name__", "?"))
    return None if ok else f"{where} is {json.dumps(value)[:30]}, should be {what}"


def _parse(text: Any) -> tuple[Any, str | None]:
    if not isinstance(text, str):
        return None, "should be JSON, as a string"
    try:
        return json.loads(text), None
    except ValueError:
        return None, "is not JSON"
    except RecursionError:
        return None, "is nested too deep"


def _read(column: str, text: Any) -> tuple[Any, str | None]:
    """(the JSON of ``text``, None) if it has the shape acr writes in memory's ``column``, else (None, why);
    (None, None) for no text."""
    if text is None or text == "":
        return None, None
    value, why = _parse(text)
    if why:
        return None, why
    if not isinstance(value, TOP[column]):
        return None, f"should be a JSON {'object' if TOP[column] is dict else 'list'}"
    why = _why(value, SHAPES[column], column, REQUIRED.get(column, ()))
    return (None, why) if why else (value, None)


def problem(column: str, text: Any) -> str | None:
    """Why ``text`` is not JSON of the shape acr writes in memory's ``column`` (None: it is, or it is empty)."""
    return _read(column, text)[1]


def load(column: str, text: Any) -> Any:
    """Memory's ``column`` read back: its JSON if it has the shape acr writes, else None (as if not kept)."""
    return _read(column, text)[0]
