"""Unit tests of the Ansible collection shipped in hybrid_operator/collections."""
