import pytest

from forge import Intent, LoopState, ScriptedPolicy, ScriptExhausted


def test_scripted_policy_hands_out_intents_in_order():
    first, second = Intent({"a"}), Intent({"b"})
    policy = ScriptedPolicy([first, second])
    assert [policy("g", LoopState()), policy("g", LoopState())] == [first, second]


def test_asking_for_more_than_scripted_fails_loudly():
    policy = ScriptedPolicy([Intent({"a"})])
    policy("g", LoopState())
    with pytest.raises(ScriptExhausted, match="all 1 were used"):
        policy("g", LoopState())


def test_unconsumed_intents_are_reported():
    left = Intent({"b"})
    policy = ScriptedPolicy([Intent({"a"}), left])
    policy("g", LoopState())
    assert policy.remaining == (left,)
    with pytest.raises(AssertionError, match="1 scripted intent"):
        policy.assert_consumed()


def test_reset_starts_the_script_again():
    first, second = Intent({"a"}), Intent({"b"})
    policy = ScriptedPolicy([first, second])
    assert policy("g", LoopState()) == first
    policy.reset()
    assert policy.consumed == 0
    assert policy("g", LoopState()) == first  # the script from its start, not its second item


def test_non_intent_in_script_is_rejected():
    with pytest.raises(ValueError, match="item 1"):
        ScriptedPolicy([Intent({"a"}), "read"])


def test_intent_capabilities_as_string_are_rejected():
    with pytest.raises(ValueError, match="not a string"):
        Intent("read")
