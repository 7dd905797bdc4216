"""An optional dependency missing is said with the extra that brings it (`forge.extras`)."""

import pytest

from forge.extras import extra_module


def test_a_missing_extra_module_says_what_needs_it_and_both_ways_to_install_it():
    with pytest.raises(ImportError, match=r"GeminiPolicy needs no_such\.sdk: pip install 'forge-fsm\[gemini\]' "
                                          r"\(or pip install no-such-sdk\)"):
        extra_module("no_such.sdk", "gemini", "GeminiPolicy", "no-such-sdk")


def test_an_installed_extra_module_is_the_module_itself():
    import json

    assert extra_module("json", "any", "a test") is json
