"""Prices for models the profile gives none for, from a maintained catalog (``genai-prices``).

The profile's price wins; the catalog answers only for an arm without one (``acr run --arms
codex:gpt-5.5`` records a cost although no built-in profile lists gpt-5.5). The catalog is imported
only when a price is needed (it loads a 1.6 MB table: about 0.15 s), never by ``acr --help`` or
routing. Its snapshot ships with the package: acr never asks it to fetch newer prices over the network.
A model the catalog does not know stays "unknown".
"""

from __future__ import annotations


def _agent_provider(agent: str) -> str | None:
    """The provider a CLI's models come from when the model name does not say (opencode's do:
    "moonshotai/kimi-k2.5"): the agent's ``price_provider``."""
    from acr_cli.agents import registry

    return registry.agent(agent).price_provider


def catalog_price(agent: str, model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """USD for these tokens by the catalog (its tiers included), or None (tokens unknown, model not in it)."""
    if tokens_in is None or tokens_out is None:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # an install without it: costs stay unknown, as before
        return None
    provider, _, name = model.rpartition("/")
    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out)
    for where in ({"provider_id": provider or _agent_provider(agent)}, {}):  # then: any provider of it
        try:
            return float(calc_price(usage, name, **where).total_price)
        except Exception:  # LookupError for an unknown model or provider; any failure of the catalog
            continue
    return None


def known(agent: str, model: str) -> bool:
    """Whether the catalog has a price for this arm's model."""
    return catalog_price(agent, model, 1000, 100) is not None
