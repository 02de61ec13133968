#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
# The work is done by the action plugin of the same name; this file documents it.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: k8s_status
short_description: Set status keys and conditions of a custom resource
description:
  - Argument-compatible with C(operator_sdk.util.k8s_status).
  - For the object hybrid-operator is reconciling, the request is returned and written by the operator
    after the run, in one status patch with its own conditions. For any other object, or outside the
    operator, the status subresource is patched right away.
  - Reports C(changed) only when the requested status differs from the current one.
options:
  api_version: {description: apiVersion of the object., type: str, required: true}
  kind: {description: Kind of the object., type: str, required: true}
  name: {description: Name of the object., type: str, required: true}
  namespace: {description: Namespace of the object., type: str}
  status: {description: Keys to merge into the status., type: dict, default: {}}
  conditions:
    description: Conditions merged by type (type, status True/False/Unknown, CamelCase reason, message).
    type: list
    elements: dict
  kubeconfig: {description: Kubeconfig for direct requests., type: path}
  context: {description: Context for direct requests., type: str}
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Report available replicas
  hybrid_operator.util.k8s_status:
    api_version: samplecontroller.k8s.io/v1alpha1
    kind: Foo
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      availableReplicas: 1
"""

RETURN = r"""
result:
  description: The requested status, or the patched object for direct requests.
  returned: always
  type: dict
"""
