"""Everything that runs Ansible: building a run's input, running it, reading its events.

The only package that imports ansible_runner. The reactor talks to it through ``running.Executor``.

- ``inputdir``, ``reserved``: a run's private data dir (extra vars, inventory, what a spec may not set).
- ``running``: the ``Executor`` interface, ``RunSetup`` and the ansible-runner executor.
- ``results``, ``artifacts``: job events into a ``RunResult``; run dirs kept within bounds.
- The warm executor: ``warm`` (the executor), ``zygoteclient`` (its handle on the zygote), ``zygote`` (the
  warm Ansible process that forks runs), ``protocol`` (their messages), ``forking`` (a forked child
  becoming a new process), ``reaping`` (stopping a run's process tree), ``inworker`` (modules in Ansible's
  worker), ``selftest`` (the start-up self-test), ``compat`` (every private name of ansible-core and
  ansible-runner used anywhere, per version, with its fallback).
- ``modserver``: the module server the runner executor can use.
"""
