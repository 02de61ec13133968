"""Benchmarks: our operator against itself (executors) and against operator-sdk's Go ``ansible-operator``.

Not a test suite: it never passes or fails, it prints numbers and writes them to ``bench/results/``.
``run`` is the entry point (``python -m bench`` or ``python bench/run.py``); it starts each contender
(``contenders``) fresh for each scenario (``scenarios``: P1 latency, P2 burst, P3 idle cost, P4 artifact
disk; ``workloads``: the heavy role and Kiali's operator) in namespaces of its own on a real API server
(``cluster``), measures its process tree from /proc (``procs``), reports (``report``) and draws (``plots``).
"""
