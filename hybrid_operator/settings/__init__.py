"""What the operator is told: its flags (``flags``) and settings (``config``), watches.yaml (``watches``) and more.

``targets`` (a watch's role or playbook), ``yamlfiles`` (YAML read with bounds), ``durations``, ``names``.
Imports nothing of the operator but ``errors`` and ``kube.objects`` (the ``GVK`` a watch names).
"""
