"""What the runs' API proxy adds to one request: N GETs straight to the API server and N through the proxy.

The proxy (``proxy.server.ApiProxy``) runs in this process, as in the operator, with a run's token from
``kubeconfig_for``. Each proxied GET opens a new loopback connection, as a run's client does (the proxy
answers ``Connection: close``); the proxy reaches the API server over the operator's pooled TLS
connections. The direct GETs use that same pool, so the difference is what the proxy adds: the loopback
connection, reading the head under its bounds, the token check, forwarding and relaying the answer.
Direct and proxied requests alternate, so a shared machine's load drifts over both alike. A number, never
pass/fail:

    KUBECONFIG=... .venv/bin/python bench/proxy_overhead.py --requests 2000
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import time

from hybrid_operator.kube.client import Kube
from hybrid_operator.kube.owners import Owner
from hybrid_operator.proxy.server import ApiProxy

PATH = "/api/v1/namespaces/default"


def direct(kube: Kube) -> float:
    headers: dict[str, str] = {}
    kube.api.update_params_for_auth(headers, [], ["BearerToken"], PATH, "GET", None)
    started = time.perf_counter()
    resp = kube.api.rest_client.pool_manager.request("GET", kube.api.configuration.host + PATH, headers=headers)
    took = time.perf_counter() - started
    assert resp.status == 200, resp.status
    return took


def proxied(port: int, token: str) -> float:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", PATH, headers={"Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    took = time.perf_counter() - started
    assert resp.status == 200, resp.status
    return took


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[int(len(ms) * 0.9)]
    return f"{name:>8}: median {statistics.median(ms):.3f} ms  p90 {p90:.3f} ms  mean {statistics.fmean(ms):.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warm-up", type=int, default=100)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    args = parser.parse_args()
    kube = Kube.connect(args.kubeconfig)
    proxy = ApiProxy(kube, inject=True, on_child=lambda _child: None)
    proxy.start()
    owner = Owner("samplecontroller.k8s.io/v1alpha1", "Foo", "bench", "default", "bench-uid")
    token = json.loads(proxy.kubeconfig_for(owner, "bench"))["users"][0]["user"]["token"]
    port = int(proxy.address.rsplit(":", 1)[1])
    try:
        for _ in range(args.warm_up):
            direct(kube)
            proxied(port, token)
        straight, through = [], []
        for _ in range(args.requests):
            straight.append(direct(kube))
            through.append(proxied(port, token))
    finally:
        proxy.stop()
    print(summary("direct", straight))
    print(summary("proxied", through))
    added = [(b - a) * 1000 for a, b in zip(straight, through, strict=True)]
    print(f"   added: median {statistics.median(added):.3f} ms per request (paired), {args.requests} each")


if __name__ == "__main__":
    main()
