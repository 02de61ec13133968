"""Everything that runs Ansible: building a run's input, running it, reading its events.

The only package that imports ansible-runner and ansible-core. The reactor asks ``executors.build_executor``
for an ``Executor`` and talks to it through ``running.Executor``; it never reaches into ``warm/`` or
``compat/``.

- The run's input: ``inputdir`` (a run's private data dir: extra vars, inventory), ``extravars`` (the file
  format Ansible can only read as data, the keys no object may hold), ``naming`` (fields to variable names,
  and the names a resource may not set), ``reserved`` (what the installed ansible-core reserves, and the
  start-up check of the extra vars), ``privatedirs`` (private dirs and files).
- Running: ``executors`` (which executor: the one public entry), ``running`` (the ``Executor`` interface,
  ``RunSetup`` and the ansible-runner executor), ``modserver`` (the module server the runner executor can
  use), ``forking`` (a forked child becoming a new process), ``reaping`` (stopping a run's processes, at
  a timeout, wherever they are).
- Results: ``results`` (job events into a ``RunResult``), ``artifacts`` (run dirs kept within bounds).
- ``warm/``: the warm executor (see its package). ``compat/``: every private name of ansible-core and
  ansible-runner used anywhere, per area and version, with its fallback.
"""
