"""Tests of the keyed (partitioned stateful) operators."""
