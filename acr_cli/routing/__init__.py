"""Routing policies behind one interface (:class:`~acr_cli.routing.base.Policy`)."""

from acr_cli.routing.base import Policy, Ranked, Stats

__all__ = ["Policy", "Ranked", "Stats"]
