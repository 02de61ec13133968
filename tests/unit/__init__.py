"""Unit tests: fast and pure, no API server and no Ansible run; the layout mirrors hybrid_operator/."""
