#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
# The work is done by the action plugin of the same name; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: requeue_after
short_description: Reconcile the current object again after a delay
description:
  - Argument-compatible with C(operator_sdk.util.requeue_after). The smallest delay asked in a run wins;
    the run still succeeds.
options:
  time: {description: A duration such as 30s, 1m or 1h30m., type: str, required: true}
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Look again in five seconds
  hybrid_operator.util.requeue_after:
    time: 5s
"""

RETURN = r"""
"""
