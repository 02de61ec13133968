"""Unit tests of hybrid_operator/ansible."""
