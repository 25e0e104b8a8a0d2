"""Test support: the reference oracle, baselines and checkers."""
