#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
# The work is done by the action plugin of the same name; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: osdk_metric
short_description: Create or update a custom Prometheus metric on the operator's /metrics
description:
  - Argument-compatible with C(operator_sdk.util.osdk_metric), and sends the same JSON to the operator's
    receiver (operator-sdk's C(http://localhost:5050/metrics) protocol). The metric appears under I(name) on
    the operator's /metrics. Give exactly one of I(counter), I(gauge), I(histogram), I(summary); C({})
    only creates the metric (a histogram or summary then observes 0, as upstream).
  - The type and description given the first time a name is used stay; another type under that name fails.
options:
  name: {description: Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)., type: str, required: true}
  description: {description: The help text., type: str, required: true}
  address:
    description:
      - The receiver's URL. Default the operator's receiver (C(--user-metrics-bind-address)), or
        C(http://localhost:5050/metrics) when the role is not run by hybrid-operator.
    type: str
  counter:
    description: A counter; one operation.
    type: dict
    suboptions:
      increment: {description: Add 1., type: bool}
      add: {description: Add this (not negative)., type: float}
  gauge:
    description: A gauge; the first operation given, in this order, is applied.
    type: dict
    suboptions:
      increment: {description: Add 1., type: bool}
      decrement: {description: Subtract 1., type: bool}
      add: {description: Add this., type: float}
      subtract: {description: Subtract this., type: float}
      set: {description: Set to this., type: float}
      set_to_current_time: {description: Set to the current Unix time in seconds., type: bool}
  histogram:
    description: A histogram with Prometheus' default buckets.
    type: dict
    suboptions:
      observe: {description: Observe this value., type: float}
  summary:
    description: A summary (sum and count).
    type: dict
    suboptions:
      observe: {description: Observe this value., type: float}
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Count the backups taken
  operator_sdk.util.osdk_metric:
    name: backups_taken
    description: Backups taken by the operator
    counter:
      increment: true
"""

RETURN = r"""
status_code:
  description: The receiver's HTTP status when it refused the metric.
  type: int
  returned: failure
"""
