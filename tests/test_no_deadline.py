"""No test result depends on the wall clock: Hypothesis runs its examples without a deadline."""

from __future__ import annotations

from hypothesis import settings


def test_the_loaded_profile_has_no_deadline() -> None:
    assert settings.default.deadline is None


def test_settings_given_per_test_inherit_no_deadline() -> None:
    """``@settings(max_examples=...)`` without ``deadline`` takes the profile's."""
    assert settings(max_examples=5).deadline is None
