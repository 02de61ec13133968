# Copyright: hybrid-operator contributors
# Apache License 2.0
"""What the osdk_metric action plugin sends, and where: operator-sdk's UserMetric JSON, POSTed over HTTP.

The arguments and the body are those of ``operator_sdk.util.osdk_metric`` (the Galaxy collection), so a
role works the same under operator-sdk's operator and ours: ``name`` and ``description`` always, and the
one metric type given, with every suboption present (``null`` when unset). The receiver is the operator's
(``hybrid_operator.serving.receiving``); the operator tells each run its address through ``URL_ENV``, an empty
value meaning it is off. Standard library only, so it is unit-tested without Ansible.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

DEFAULT_ADDRESS = "http://localhost:5050/metrics"
URL_ENV = "HYBRID_OPERATOR_USER_METRICS_URL"
TOKEN_ENV = "HYBRID_OPERATOR_USER_METRICS_TOKEN"  # the receiver's secret, for its URL only
TIMEOUT = 10.0
KINDS = ("counter", "gauge", "histogram", "summary")
_OBSERVE = {"observe": {"type": "float", "required": False}}

ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "description": {"type": "str", "required": True},
    "address": {"type": "str", "required": False},  # default: the operator's receiver, else DEFAULT_ADDRESS
    "counter": {
        "type": "dict",
        "required": False,
        "options": {
            "increment": {"type": "bool", "required": False},
            "add": {"type": "float", "required": False},
        },
    },
    "gauge": {
        "type": "dict",
        "required": False,
        "options": {
            "set": {"type": "float", "required": False},
            "increment": {"type": "bool", "required": False},
            "decrement": {"type": "bool", "required": False},
            "add": {"type": "float", "required": False},
            "subtract": {"type": "float", "required": False},
            "set_to_current_time": {"type": "bool", "required": False},
        },
    },
    "histogram": {"type": "dict", "required": False, "options": _OBSERVE},
    "summary": {"type": "dict", "required": False, "options": _OBSERVE},
}


def address(given: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str | None, str | None]:
    """(url, None), or (None, why not): the task's ``address``, else the operator's receiver, else upstream's."""
    if given:
        url = given
    elif URL_ENV not in environ:
        url = DEFAULT_ADDRESS  # not run by hybrid-operator: where operator-sdk's operator listens
    elif not environ[URL_ENV]:
        return None, "the operator's role metrics receiver is off (see --user-metrics-bind-address and its log)"
    else:
        url = environ[URL_ENV]
    if not url.startswith(("http://", "https://")):
        return None, f"address must be an http:// or https:// URL, got {url!r}"
    return url, None


def payload(args: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body, built as the Galaxy module builds it: a metric type only when it is given."""
    body: dict[str, Any] = {"name": args.get("name"), "description": args.get("description")}
    for kind in KINDS:
        if args.get(kind):
            body[kind] = dict(args[kind])
    return body


def send(
    url: str, body: Mapping[str, Any], timeout: float = TIMEOUT, environ: Mapping[str, str] = os.environ
) -> tuple[int, str]:
    """POST the body; (HTTP status, response text), or (0, why it could not be sent). To the operator's own
    receiver (``URL_ENV``) only, with the secret it gave its runs (``TOKEN_ENV``): it hears nobody else."""
    headers = {"Content-Type": "application/json"}
    if environ.get(TOKEN_ENV) and url == environ.get(URL_ENV):
        headers["Authorization"] = f"Bearer {environ[TOKEN_ENV]}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # address() allows http(s) only
            return int(response.status), response.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read(4096).decode(errors="replace").strip()
    except (OSError, ValueError) as exc:  # refused, timed out, bad URL
        reason = getattr(exc, "reason", exc)
        return 0, f"cannot reach the metrics receiver at {url}: {reason}"
