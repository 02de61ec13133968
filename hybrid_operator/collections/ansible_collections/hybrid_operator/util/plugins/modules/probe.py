#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Report how this module process ran: the warm executor's start-up self-test runs it through Ansible's
normal path and through the warm path and compares what it says."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: probe
short_description: Report how this module process ran (the warm executor's self-test)
description:
  - Returns its C(data) unchanged, the value of one environment variable, the working directory and
    whether it ran in a fork of hybrid-operator's warm Ansible process; adds one warning to the result.
  - Changes nothing.
options:
  data: {description: Any value; returned as given., type: raw}
  env: {description: Name of an environment variable to report., type: str, default: ""}
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Ask the module process about itself
  hybrid_operator.util.probe:
    data: {value: 1}
    env: HOME
"""

RETURN = r"""
data: {description: The C(data) option as the module received it., returned: always, type: raw}
env_value: {description: The value of the C(env) variable, empty when unset., returned: always, type: str}
cwd: {description: The module process's working directory., returned: always, type: str}
warm_process: {description: Whether it ran in a fork of the warm Ansible process., returned: always, type: bool}
"""

import os  # noqa: E402
import sys  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={"data": {"type": "raw"}, "env": {"type": "str", "default": ""}}, supports_check_mode=True
    )
    module.warn("a warning from the probe module")
    module.exit_json(
        changed=False,
        data=module.params["data"],
        env_value=os.environ.get(module.params["env"], "") if module.params["env"] else "",
        cwd=os.getcwd(),
        warm_process="hybrid_operator.ansible.warm.inworker" in sys.modules,
    )


if __name__ == "__main__":
    main()
