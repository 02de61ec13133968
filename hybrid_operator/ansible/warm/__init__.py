"""The warm executor: every run a fork of a warm Ansible process, with results the same as ansible-runner's.

``executor`` (the ``Executor`` the reactor gets from ``ansible.executors.build_executor``), ``client`` (its
handle on the zygote), ``zygote`` (the warm Ansible process that forks runs), ``protocol`` (their messages),
``inworker`` (modules in Ansible's worker), ``inline`` (tasks in the run's process), ``selftest`` (the
start-up self-test); a run's processes are stopped by ``ansible.reaping``. What it borrows of ansible-core's
and ansible-runner's internals is in ``ansible.compat``.
"""
