"""Unit tests of hybrid_operator/reactor."""
