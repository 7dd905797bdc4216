"""Money (issue 51, item 4): each model call's cost from the loop's own price table or
genai-prices' offline one, `result.usage` saying it, and `Limits(cost_budget=USD)` ending a
run in budget_exhausted before a call that would certainly take it past the budget."""

import openai
import pytest

from forge import AgentLoop, Finish, Limits, UsageError, tool
from forge.chat_server import ChatServer, reply
from forge.models.chat import ChatPolicy
from forge.records.pricing import CostBudgetExhausted, Price, cost_of, spending
from forge.records.usage import ModelCall, Usage


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return "rain"


def looking(n, prompt=20_000, completion=1_000):
    """A model that looks the weather up `n` times, each reply reporting this usage, then answers."""
    calls = [{**reply(None, (f"c{i}", "weather", {"city": "Oslo"})),
              "_usage": {"prompt_tokens": prompt, "completion_tokens": completion}} for i in range(n)]
    return [*calls, {**reply("Rain."), "_usage": {"prompt_tokens": prompt, "completion_tokens": completion}}]


def loop_on(server, model="gpt-4o-mini", **limits):
    policy = ChatPolicy(model, client=openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0))
    return AgentLoop([weather], policy, verify=lambda observation: isinstance(observation.payload, Finish),
                     limits=Limits(repeat_limit=10, **limits))


def test_a_call_is_priced_from_the_public_table_by_the_model_that_answered():
    call = ModelCall(20_000, 1_000, model="gpt-4o-mini", provider="openai")
    assert cost_of(call) == pytest.approx(20_000 * 0.15 / 1e6 + 1_000 * 0.6 / 1e6)


def test_the_loops_own_price_table_comes_first_and_prices_cached_tokens_as_cached_input():
    call = ModelCall(1_000_000, 100_000, cached_tokens=400_000, model="gpt-4o-mini")
    price = Price(input=2.0, output=8.0, cached_input=0.5)
    assert cost_of(call, {"gpt-4o-mini": price}) == pytest.approx(600_000 * 2 / 1e6 + 400_000 * 0.5 / 1e6 + 0.8)


def test_a_model_no_table_knows_has_no_cost():
    assert cost_of(ModelCall(10, 5, model="my-own-model")) is None
    assert Usage((ModelCall(10, 5, model="my-own-model"),)).cost is None


def test_a_runs_usage_says_what_it_cost():
    with ChatServer(looking(1)) as server:
        result = loop_on(server).run("weather in Oslo?")
    assert result.usage.cost == pytest.approx(2 * 0.0036)
    assert str(result.usage).endswith("completion), $0.0072")


def test_a_run_that_would_pass_its_cost_budget_ends_in_budget_exhausted_before_the_call():
    """Each call costs $0.0036 and the next at least $0.00315: after two calls ($0.0072),
    a third would pass $0.01, so it is not made."""
    with ChatServer(looking(5)) as server:
        result = loop_on(server, cost_budget=0.01).run("weather in Oslo?")
    assert result.reason == "budget_exhausted" and len(server.requests) == 2
    assert isinstance(result.error, CostBudgetExhausted)
    assert str(result.error) == ("the cost budget is $0.0100: $0.0072 spent, and the next model call costs at least "
                                 "$0.0032 more")
    assert result.trace[-1].detail["cost_spent"] == pytest.approx(0.0072)


def test_the_loops_prices_hold_a_budget_on_a_model_the_public_table_does_not_know():
    with ChatServer(looking(5)) as server:
        result = loop_on(server, "house-model", cost_budget=0.05,
                         prices={"house-model": Price(input=1.0, output=4.0)}).run("weather?")
    assert result.reason == "budget_exhausted" and len(server.requests) == 2  # $0.024 each, next at least $0.021


def test_a_cost_budget_on_a_model_nobody_prices_ends_the_run_saying_how_to_price_it():
    with ChatServer(looking(2)) as server:
        result = loop_on(server, "house-model", cost_budget=1.0).run("weather?")
    assert result.reason == "fatal_error" and "no price is known for house-model" in str(result.error)
    assert "Limits(prices=" in str(result.error) and len(server.requests) == 1


def test_spending_counts_the_whole_conversation_and_names_what_it_cannot_price():
    usage = Usage((ModelCall(1_000_000, 0, model="gpt-4o-mini"),), earlier=(ModelCall(10, 10, model="x-model"),))
    spend = spending(usage)
    assert spend.spent == pytest.approx(0.15) and spend.unpriced == ("x-model",)


@pytest.mark.parametrize(("limits", "said"), [
    ({"cost_budget": 0}, "US dollars above 0"),
    ({"cost_budget": "1"}, "US dollars above 0"),
    ({"prices": {"m": (1, 2)}}, "forge.records.pricing.Price"),
])
def test_bad_money_limits_are_refused_naming_what_is_wrong(limits, said):
    with pytest.raises(UsageError, match=said):
        Limits(**limits)


def test_a_negative_price_is_refused():
    with pytest.raises(UsageError, match="Price.output is USD per million tokens, 0 or more"):
        Price(input=1.0, output=-1.0)
