"""Routing policies behind one interface (:class:`~acr_cli.routing.base.Policy`), named in
:mod:`acr_cli.routing.registry`."""
