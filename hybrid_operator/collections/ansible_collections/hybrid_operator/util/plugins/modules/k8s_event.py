#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
# The work is done by the action plugin of the same name; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_event
short_description: Record a Kubernetes Event on an object
description:
  - Argument-compatible with the common arguments of C(operator_sdk.util.k8s_event).
  - Without involvedObject, the Event is about the object being reconciled and is written by the operator
    after the run (repeated Events are counted on one Event object, as kubectl describe shows them).
options:
  reason: {description: CamelCase reason., type: str, required: true}
  message: {description: A sentence for a person., type: str, default: ""}
  type: {description: Normal or Warning., type: str, default: Normal, choices: [Normal, Warning]}
  involvedObject:
    description: The object the Event is about (apiVersion, kind, name, namespace).
    type: dict
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Tell people it worked
  hybrid_operator.util.k8s_event:
    reason: Synced
    message: Foo synced successfully
"""

RETURN = r"""
"""
