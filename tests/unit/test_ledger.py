"""The usage ledger's rules: pricing tokens, and when a cost budget is reached."""

from __future__ import annotations

import pytest

from thirdshift.daemon.ready import ReadyRules, budget_reason
from thirdshift.records import Usage, at_least
from thirdshift.sessions.ledger import Budgets, Spent, budget_reached, priced, unpriced_harnesses
from thirdshift.settings import ModelPrice

PRICES = {"gpt-x": ModelPrice(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5)}


def test_tokens_are_priced_by_the_table_with_cache_reads_and_writes_at_their_own_price() -> None:
    usage = Usage(
        input_tokens=1_000_000, cached_input_tokens=400_000, cache_write_tokens=100_000,
        output_tokens=50_000,
    )  # fmt: skip

    cost = priced(usage, PRICES, "gpt-x")

    # 500k fresh at $2, 400k cached at $0.50, 100k written at $2.50, 50k out at $8
    assert cost.cost_usd == pytest.approx(1.0 + 0.2 + 0.25 + 0.4)
    assert (cost.cost_source, cost.model) == ("price table", "gpt-x")


def test_a_cost_the_cli_reported_is_kept_and_the_model_it_reported_wins() -> None:
    reported = Usage(input_tokens=10, cost_usd=0.3, cost_source="reported", model="gpt-x")
    assert priced(reported, PRICES, "asked") == reported


def test_an_unpriced_model_or_a_usage_without_tokens_gets_no_cost() -> None:
    assert priced(Usage(input_tokens=10), PRICES, "other").cost_usd is None
    assert priced(Usage(input_tokens=10), PRICES, None).cost_usd is None
    assert priced(Usage(), PRICES, "gpt-x").cost_usd is None
    assert priced(Usage(input_tokens=10), PRICES, "other").model == "other"


def test_cache_prices_default_to_the_input_price() -> None:
    plain = {"m": ModelPrice(input=1.0, output=0.0)}
    usage = Usage(input_tokens=3_000_000, cached_input_tokens=1_000_000, cache_write_tokens=10)
    assert priced(usage, plain, "m").cost_usd == pytest.approx(3.0)


SPENT = Spent(run_usd=0.30, repository_today_usd=4.0, repository="octo/widgets")


def test_no_budget_is_never_reached() -> None:
    assert budget_reached(Budgets(), SPENT, 1000.0) is None


def test_the_run_budget_is_reached_at_the_cap_counting_the_session_in_hand() -> None:
    budgets = Budgets(per_run_usd=0.50)
    assert budget_reached(budgets, SPENT, 0.19) is None
    cause = budget_reached(budgets, SPENT, 0.20)
    assert cause == (
        "the cost budget per Run is reached: $0.50 spent of $0.50 (cost_budget_per_run_usd; "
        "raise it to let the issue go on)"
    )
    assert budget_reached(budgets, Spent(0.6, 0.0, "octo/widgets"), None) is not None


def test_the_daily_budget_names_the_repository_and_both_amounts() -> None:
    cause = budget_reached(Budgets(per_repository_day_usd=4.5), SPENT, 0.75)
    assert cause is not None
    assert cause.startswith(
        "the daily cost budget of octo/widgets is reached: $4.75 spent today (UTC) of $4.50"
    )


def test_the_run_budget_is_named_first_when_both_are_reached() -> None:
    cause = budget_reached(Budgets(per_run_usd=0.1, per_repository_day_usd=1.0), SPENT, 0.0)
    assert cause is not None
    assert cause.startswith("the cost budget per Run")


def test_the_daemon_passes_over_a_repository_whose_daily_budget_is_spent() -> None:
    rules = ReadyRules.of(
        ready_label="ready-for-agent",
        in_progress_label="in-progress",
        excluded_labels=(),
        settle_seconds=0,
        daily_budget_usd=5.0,
    )
    assert budget_reason(4.99, rules, "octo/widgets") is None
    reason = budget_reason(5.0, rules, "octo/widgets")
    assert reason is not None
    assert "daily cost budget of octo/widgets ($5.00) is spent for today (UTC)" in reason
    assert budget_reason(7.25, rules, "octo/widgets") == reason  # logged once, not per dollar
    assert "cost_budget_per_repository_day_usd" in reason
    unbudgeted = ReadyRules.of(
        ready_label="r", in_progress_label="i", excluded_labels=(), settle_seconds=0
    )
    assert budget_reason(1e9, unbudgeted, "octo/widgets") is None


def test_a_harness_a_budget_cannot_count_is_named_with_the_setting_to_fix_it() -> None:
    harnesses = [("claude", True, None), ("codex", False, None), ("codex", False, "gpt-x")]
    budgets = Budgets(per_run_usd=1.0)

    assert unpriced_harnesses(harnesses, PRICES, Budgets()) == []
    assert unpriced_harnesses(harnesses, PRICES, budgets) == [
        "warning: codex reports no cost, so the cost budgets cannot count its sessions; set "
        "harness_models.codex and price that Model in model_prices"
    ]
    assert unpriced_harnesses([("codex", False, "gpt-y")], PRICES, budgets) == [
        "warning: codex reports no cost, so the cost budgets cannot count its sessions; price "
        "its Model gpt-y in model_prices"
    ]


def test_a_later_figure_never_lowers_what_was_counted_and_an_unusable_one_is_none() -> None:
    """``at_least`` keeps each figure at its highest, takes no negative count and no cost that
    is not a finite number of zero or more, and keeps the cost's source with its amount."""
    counted = Usage(
        turns=3, input_tokens=500, output_tokens=40, cost_usd=1.5, cost_source="reported"
    )
    lower = Usage(turns=1, input_tokens=-7, output_tokens=60, cost_usd=0.1, cost_source="reported")
    assert at_least(counted, lower) == Usage(
        turns=3, input_tokens=500, output_tokens=60, cost_usd=1.5, cost_source="reported"
    )
    assert at_least(counted, Usage(cost_usd=float("nan"))).cost_usd == 1.5
    assert at_least(Usage(), Usage(cost_usd=float("inf"), input_tokens=-1)) == Usage()
    higher = Usage(cost_usd=2.0, cost_source="price table")
    assert at_least(counted, higher).cost_source == "price table"
