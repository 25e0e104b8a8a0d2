"""The pure runtime: S-Merge, ordered window aggregation, operators, scheduling and state.

Nothing under this package may import pyspark (``tests/test_layering.py`` enforces it), so
everything here is testable in milliseconds without a JVM.
"""
