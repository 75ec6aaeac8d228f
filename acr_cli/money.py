"""The one way acr writes an amount of money for people: ``usd``.

Every cost a command prints (``run``, ``show``, ``memory log``/``show``, ``spend``, ``route``, the agents'
live lines, budgets) goes through it, so no figure reads like ``$0.009084000000000002``. JSON keeps the
numbers as numbers.
"""

from __future__ import annotations

import math
from typing import Any


def usd(x: Any, places: int | None = None) -> str:
    """``x`` dollars as ``$1.25``: with ``places`` decimals (a column that lines up), or, without, the digits
    that matter ($1.25, $0.0091, $0.000034: cents would show a small cost as $0.00). None is ``-``; a value
    that is not a number (an agent's odd report) is shown as given, after the ``$``."""
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            x = float(str(x))
        except ValueError:
            return f"${x}"
    if not math.isfinite(x):
        return f"${x}"
    if places is not None:
        return f"${x:,.{places}f}"
    if abs(x) >= 0.1 or x == 0:
        return f"${x:,.2f}"
    if abs(x) >= 0.0001:
        return f"${x:.4f}"
    return f"${x:.{1 - math.floor(math.log10(abs(x)))}f}"  # two significant digits
