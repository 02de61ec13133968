"""Everything that runs Ansible: building a run's input, running it, reading its events.

The only package that imports ansible_runner. The reactor talks to it through ``running.Executor``.
"""
