"""The usage ledger's rules: what a session cost, and whether a cost budget is reached.

Pure functions over ``Usage`` values and numbers; the store adds the amounts up and the
Sessions adapter asks these rules before a session starts, while it runs and when it ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from thirdshift.records import Usage
from thirdshift.settings import ModelPrice

PER_MILLION = 1_000_000


def priced(usage: Usage, prices: Mapping[str, ModelPrice], asked_model: str | None) -> Usage:
    """``usage`` with its model (the one asked for, when the stream does not say) and, when the
    CLI reported no cost and the table prices that model, a cost priced from the tokens."""
    model = usage.model or asked_model
    usage = replace(usage, model=model)
    if usage.cost_usd is not None or model is None or model not in prices:
        return usage
    if usage.input_tokens is None and usage.output_tokens is None:
        return usage
    price = prices[model]
    cached = usage.cached_input_tokens or 0
    written = usage.cache_write_tokens or 0
    fresh = max((usage.input_tokens or 0) - cached - written, 0)
    cost = (
        fresh * price.input
        + cached * (price.input if price.cached_input is None else price.cached_input)
        + written * (price.input if price.cache_write is None else price.cache_write)
        + (usage.output_tokens or 0) * price.output
    ) / PER_MILLION
    return replace(usage, cost_usd=cost, cost_source="price table")


@dataclass(frozen=True)
class Budgets:
    """The cost caps of the settings, in USD; None is no cap."""

    per_run_usd: float | None = None
    per_repository_day_usd: float | None = None

    @property
    def any(self) -> bool:
        return self.per_run_usd is not None or self.per_repository_day_usd is not None


NO_BUDGETS = Budgets()


@dataclass(frozen=True)
class Spent:
    """What was spent before the session in hand: by its Run, and by its repository today."""

    run_usd: float
    repository_today_usd: float
    repository: str


def budget_reached(budgets: Budgets, spent: Spent, session_usd: float | None) -> str | None:
    """The cause of a Failed run when a budget is reached with ``session_usd`` (the session in
    hand, so far) on top of ``spent``, else None. Reached means spent up to the cap or beyond."""
    now = session_usd or 0.0
    run = spent.run_usd + now
    if budgets.per_run_usd is not None and run >= budgets.per_run_usd:
        return (
            f"the cost budget per Run is reached: ${run:.2f} spent of ${budgets.per_run_usd:.2f} "
            "(cost_budget_per_run_usd; raise it to let the issue go on)"
        )
    day = spent.repository_today_usd + now
    cap = budgets.per_repository_day_usd
    if cap is not None and day >= cap:
        return (
            f"the daily cost budget of {spent.repository} is reached: ${day:.2f} spent today "
            f"(UTC) of ${cap:.2f} (cost_budget_per_repository_day_usd; raise it, or the issue "
            "waits for tomorrow)"
        )
    return None


def unpriced_harnesses(
    harnesses: Sequence[tuple[str, bool, str | None]],
    prices: Mapping[str, ModelPrice],
    budgets: Budgets,
) -> list[str]:
    """A warning for each Harness (name, whether its CLI reports a cost, its Model) whose
    sessions a budget cannot count: it reports no cost and the price table lacks its Model."""
    if not budgets.any:
        return []
    warnings: list[str] = []
    for name, reports_cost, model in harnesses:
        if reports_cost or (model is not None and model in prices):
            continue
        fix = (
            f"price its Model {model} in model_prices"
            if model
            else f"set harness_models.{name} and price that Model in model_prices"
        )
        warnings.append(
            f"warning: {name} reports no cost, so the cost budgets cannot count its sessions; "
            + fix
        )
    return warnings
