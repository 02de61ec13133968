"""The operator's replicas on a real node: metrics auth, leader election, a rolling upgrade, the sharded overlay.

All four start from ``kubectl apply -k deploy/`` (one module fixture, in this order, each leaving the
Deployment as the next expects):

- the metrics Service, scraped from a pod with that pod's own ServiceAccount token: 401 without a token,
  403 with a token the API server knows but no binding to ``hybrid-operator-metrics-reader``, 200 once
  bound (TokenReview and SubjectAccessReview, answered by the real API server);
- two replicas with ``--leader-elect`` (deploy/'s flag): the leader's pod deleted, the other holds the
  Lease within the lease duration (15 s) and Foos created meanwhile converge;
- a rolling upgrade to a second tag of the same image while Foos are created: every Foo Successful, exactly
  one Deployment each, owned by it;
- ``deploy/overlays/sharded`` (three pods, ``--sharding``): the Foos split among the pods, a pod deleted and
  its Foos run by the others, no Foo ever run by two pods at once. The evidence is what
  tests/integration/test_sharding.py reads from its recording role, taken here from each pod's own log:
  every ``reconciled`` line carries the object's name, its end time and the run's duration, so each run is
  an interval [end - duration, end] on one pod (one node, one clock), and no two intervals of one Foo may
  intersect.

Each Foo's Deployment runs a real pod (the bed's fake nginx), so the Foos here are few. The image is loaded
as ``hybrid-operator:latest`` (conftest.py); the upgrade loads the same archive again as
``hybrid-operator:v2`` (HYBRID_OPERATOR_IMAGE_ARCHIVE, default build/images/hybrid-operator.oci.tar) with
``hack/local-cluster.sh load``, into the bed LOCAL_CLUSTER_NAME names.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import successful, wait_until
from tests.realnode.conftest import ROOT, Kubectl, _kubectl_binary, get_json

pytestmark = pytest.mark.realnode

SYSTEM = "hybrid-operator-system"
TENANT = "hybrid-operator-tenant"
FOOS = "foos.samplecontroller.k8s.io"  # named with the group: another project's Foo may be installed too
MANAGER = "app.kubernetes.io/name=hybrid-operator,app.kubernetes.io/component=manager"
LEASE_DURATION = 15.0  # the leader Lease's (kube/leases.py: upstream's timing)
FOO_API = "samplecontroller.k8s.io/v1alpha1"


# ------------------------------------------------------------------------------------------------ helpers


def manager_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    """The manager's pods that are not being deleted."""
    pods = get_json(kubectl, "-n", SYSTEM, "pods", "-l", MANAGER)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def ready_pods(kubectl: Kubectl, count: int, image: str = "") -> list[str] | None:
    """The names of exactly ``count`` live, Ready manager pods (of ``image``, if given), else None."""
    pods = manager_pods(kubectl)
    ready = [
        p["metadata"]["name"]
        for p in pods
        if all(s.get("ready") for s in p["status"].get("containerStatuses", [{}]))
        and (not image or p["spec"]["containers"][0]["image"] == image)
    ]
    return sorted(ready) if len(ready) == count == len(pods) else None


def create_foos(kubectl: Kubectl, names: list[str]) -> None:
    items = [
        {"apiVersion": FOO_API, "kind": "Foo", "metadata": {"name": n}, "spec": {"deploymentName": n, "replicas": 1}}
        for n in names
    ]
    kubectl("-n", TENANT, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def wait_converged(kubectl: Kubectl, names: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Every Foo of ``names`` Successful, for its current generation; the Foos by name."""

    def done() -> dict[str, dict[str, Any]] | None:
        foos = {f["metadata"]["name"]: f for f in get_json(kubectl, "-n", TENANT, FOOS)["items"]}
        ok = all(
            n in foos
            and successful(foos[n])
            and foos[n].get("status", {}).get("observedGeneration", foos[n]["metadata"]["generation"])
            == foos[n]["metadata"]["generation"]
            for n in names
        )
        return foos if ok else None

    result: dict[str, dict[str, Any]] = wait_until(done, timeout, f"Foos {names} Successful", interval=1)
    return result


def assert_one_deployment_each(kubectl: Kubectl, foos: dict[str, dict[str, Any]], names: list[str]) -> None:
    """Exactly one Deployment controlled by each Foo of ``names``, named as its spec says."""
    owned: dict[str, list[str]] = defaultdict(list)
    for deployment in get_json(kubectl, "-n", TENANT, "deployments")["items"]:
        for ref in deployment["metadata"].get("ownerReferences", []):
            if ref.get("kind") == "Foo" and ref.get("controller"):
                owned[ref["uid"]].append(deployment["metadata"]["name"])
    for name in names:
        assert owned[foos[name]["metadata"]["uid"]] == [name], (name, dict(owned))


def delete_foos(kubectl: Kubectl) -> None:
    """The Foos, their Deployments and pods, fast: see test_real_node.py's operator fixture for why."""
    kubectl("-n", TENANT, "delete", FOOS, "--all", "--cascade=orphan", check=False)
    kubectl("-n", TENANT, "delete", "deployment,replicaset", "--all", "--cascade=orphan", check=False)
    kubectl("-n", TENANT, "delete", "pod", "--all", "--grace-period=1", "--wait=false", check=False)


def leader_pod(kubectl: Kubectl) -> str:
    """The pod holding the leader Lease (holderIdentity is <hostname>_<random>; the hostname is the pod's)."""
    lease = get_json(kubectl, "-n", SYSTEM, "lease/hybrid-operator")
    holder: str = lease["spec"].get("holderIdentity") or ""
    return holder.rpartition("_")[0]


@pytest.fixture(scope="module")
def deployed(kubectl: Kubectl, real_node: dict[str, Any]) -> Iterator[None]:
    """deploy/ applied and rolled out; afterwards everything of deploy/ and of the sharded overlay deleted."""
    kubectl("apply", "-k", str(ROOT / "deploy"))
    try:
        wait_until(lambda: ready_pods(kubectl, 1), 180, "the operator's pod Ready")
        yield
    finally:
        delete_foos(kubectl)
        kubectl("-n", TENANT, "delete", "pod", "scraper", "--grace-period=1", "--ignore-not-found", check=False)
        kubectl("delete", "clusterrolebinding", "scraper-metrics", "--ignore-not-found", check=False)
        overlay = ROOT / "deploy" / "overlays" / "sharded"
        kubectl("delete", "-k", str(overlay), "--ignore-not-found", "--timeout=120s", timeout=150)


# ------------------------------------------------------------------------------------------------ metrics

SCRAPE = """
import ssl, sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1])
if sys.argv[2] == "token":
    token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
    request.add_header("Authorization", "Bearer " + token)
try:  # the metrics certificate is the operator's own, made at start: not verified here
    with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=10) as answer:
        print(answer.status); print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code)
"""


def test_metrics_service_answers_401_403_then_200_to_a_pod(kubectl: Kubectl, deployed: None) -> None:
    ip = get_json(kubectl, "-n", SYSTEM, "service/hybrid-operator-metrics")["spec"]["clusterIP"]
    url = f"https://{ip}:8443/metrics"
    kubectl("-n", TENANT, "create", "serviceaccount", "scraper")
    # The operator's image as the client (it has Python); restricted-compliant like the manager.
    overrides = {
        "spec": {
            "serviceAccountName": "scraper",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "scraper",
                    "image": "hybrid-operator:latest",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        }
    }
    kubectl(
        "-n", TENANT, "run", "scraper", "--image=hybrid-operator:latest", "--restart=Never",
        f"--overrides={json.dumps(overrides)}",
    )  # fmt: skip
    kubectl("-n", TENANT, "wait", "--for=condition=Ready", "pod/scraper", "--timeout=90s", timeout=120)

    def scrape(with_token: bool) -> tuple[int, str]:
        how = "token" if with_token else "none"
        out = kubectl("-n", TENANT, "exec", "pod/scraper", "--", "python3", "-c", SCRAPE, url, how).stdout
        code, _, body = out.partition("\n")
        return int(code), body

    assert scrape(with_token=False)[0] == 401
    # A token the API server authenticates (system:serviceaccount:hybrid-operator-tenant:scraper), not bound.
    assert scrape(with_token=True)[0] == 403
    kubectl(
        "create", "clusterrolebinding", "scraper-metrics", "--clusterrole=hybrid-operator-metrics-reader",
        f"--serviceaccount={TENANT}:scraper",
    )  # fmt: skip
    # The operator remembers a review's answer for 10 s: the 403 may stand that long.
    code, body = wait_until(lambda: (got := scrape(with_token=True))[0] == 200 and got, 40, "a 200 once bound", 2)
    assert code == 200
    assert re.search(r"^hybrid_operator_\w+", body, re.MULTILINE), body[:2000]


# ------------------------------------------------------------------------------------------------ leader election


def test_the_standby_takes_over_within_the_lease_when_the_leader_pod_is_deleted(
    kubectl: Kubectl, deployed: None
) -> None:
    kubectl("-n", SYSTEM, "scale", "deployment/hybrid-operator", "--replicas=2")
    pods = wait_until(lambda: ready_pods(kubectl, 2), 120, "two Ready replicas (leader and standby)")
    leader = wait_until(lambda: (p := leader_pod(kubectl)) in pods and p, 30, "a leader among the pods")

    kubectl("-n", SYSTEM, "delete", "pod", leader, "--wait=false")
    deleted = time.monotonic()
    names = [f"during-failover-{i}" for i in range(3)]
    create_foos(kubectl, names)
    # The old leader drains the runs it had started (up to --graceful-shutdown-timeout, 30 s) before it
    # releases the Lease and exits: "within the lease" counts from its exit (its pod gone), which is as
    # late as a leader that died without releasing would stop renewing.
    gone = lead = 0.0
    deadline = deleted + 30 + 2 * LEASE_DURATION
    while not lead and time.monotonic() < deadline:
        if not gone and kubectl("-n", SYSTEM, "get", "pod", leader, check=False).returncode != 0:
            gone = time.monotonic()
        holder = leader_pod(kubectl)
        if holder and holder != leader:  # the standby, or the ReplicaSet's replacement if it wins the race
            lead = time.monotonic()
        time.sleep(0.2)
    lease = get_json(kubectl, "-n", SYSTEM, "lease/hybrid-operator")["spec"]
    assert lead, f"no other pod took the Lease: {lease}; pods {[p['metadata']['name'] for p in manager_pods(kubectl)]}"
    standby = leader_pod(kubectl)
    print(f"\nleader {leader} deleted; {standby} leads after {lead - deleted:.1f}s ({gone - deleted:.1f}s to its exit)")
    assert lead - (gone or lead) <= LEASE_DURATION, (gone, lead)

    foos = wait_converged(kubectl, names, 120)
    assert_one_deployment_each(kubectl, foos, names)
    # The new leader ran them: its log has a reconciled line for each.
    log = kubectl("-n", SYSTEM, "logs", f"pod/{standby}").stdout
    for name in names:
        assert re.search(rf" reconciled .*\bname={name}\b", log), f"{standby} did not run {name}:\n{log[-3000:]}"
    wait_until(lambda: ready_pods(kubectl, 2), 120, "the Deployment back to two Ready replicas")


# ------------------------------------------------------------------------------------------------ rolling upgrade


def test_a_rolling_upgrade_while_foos_are_created_loses_and_duplicates_none(kubectl: Kubectl, deployed: None) -> None:
    default = ROOT / "build" / "images" / "hybrid-operator.oci.tar"
    archive = Path(os.environ.get("HYBRID_OPERATOR_IMAGE_ARCHIVE", default))
    if not archive.is_file():
        pytest.skip(f"no image archive {archive} to load as hybrid-operator:v2: hack/build-image.sh")
    subprocess.run(
        [str(ROOT / "hack" / "local-cluster.sh"), "load", str(archive), "hybrid-operator:v2"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    old = set(wait_until(lambda: ready_pods(kubectl, 2), 120, "two Ready replicas"))

    names = [f"upgrade-{i}" for i in range(8)]
    creating_done = threading.Event()

    def create_one_by_one() -> None:
        try:
            for name in names:
                create_foos(kubectl, [name])
                time.sleep(1.5)
        finally:
            creating_done.set()

    creator = threading.Thread(target=create_one_by_one)
    creator.start()
    started = time.monotonic()
    try:
        kubectl("-n", SYSTEM, "set", "image", "deployment/hybrid-operator", "manager=hybrid-operator:v2")
        kubectl("-n", SYSTEM, "rollout", "status", "deployment/hybrid-operator", "--timeout=180s", timeout=200)
    finally:
        creator.join()
    new = wait_until(lambda: ready_pods(kubectl, 2, "hybrid-operator:v2"), 120, "two Ready replicas of :v2")
    assert not old & set(new), (old, new)
    foos = wait_converged(kubectl, names, 180)
    took = time.monotonic() - started
    print(f"\nrolled to :v2 with {len(names)} Foos created meanwhile; all converged after {took:.1f}s")
    assert_one_deployment_each(kubectl, foos, names)
    # (status.image cannot tell: the kubelet names an image by the first of its tags, and :v2 is :latest's
    # archive under a second tag. The pods' spec says :v2, ready_pods checked it.)


# ------------------------------------------------------------------------------------------------ sharding

RUN_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \S+\s+\S+: (?:reconciled|reconcile failed:).*?"
    r" name=(?P<name>\S+) .*?\bduration=(?P<duration>[\d.]+)"
)

HANDOVER_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \S+\s+\S+: ring gave this replica (?P<count>\d+) more objects"
)


@dataclass(frozen=True)
class Run:
    pod: str
    name: str
    start: float
    end: float


class LogFollower:
    """``kubectl logs -f`` of one pod into a file, from its first line to its container's end."""

    def __init__(self, kubeconfig: str, pod: str, path: Path) -> None:
        self.pod = pod
        self.path = path
        self._out = path.open("w")
        self.proc = subprocess.Popen(
            [_kubectl_binary(), "--kubeconfig", kubeconfig, "-n", SYSTEM, "logs", "-f", f"pod/{pod}"],
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def handovers(self) -> list[float]:
        """When the ring gave this pod more objects (its ``ring gave this replica N more objects`` lines, N > 0)."""
        found = []
        for line in self.path.read_text().splitlines():
            if (m := HANDOVER_LINE.match(line)) and int(m["count"]) > 0:
                found.append(datetime.fromisoformat(m["ts"]).replace(tzinfo=UTC).timestamp())
        return found

    def runs(self) -> list[Run]:
        found = []
        for line in self.path.read_text().splitlines():
            if m := RUN_LINE.match(line):
                end = datetime.fromisoformat(m["ts"]).replace(tzinfo=UTC).timestamp()
                found.append(Run(self.pod, m["name"], end - float(m["duration"]), end))
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._out.close()


def overlapping(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs of one Foo whose intervals intersect (as test_sharding.py's ``overlaps``)."""
    by_name: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_name[run.name].append(run)
    found = []
    for items in by_name.values():
        items.sort(key=lambda r: r.start)
        found += [(a, b) for a, b in itertools.pairwise(items) if b.start < a.end]
    return found


def test_sharded_overlay_splits_the_foos_hands_a_deleted_pods_over_and_never_runs_one_twice(
    kubectl: Kubectl, deployed: None, kubeconfig: str, tmp_path: Path
) -> None:
    delete_foos(kubectl)
    # From no replica: a leader-elect pod and sharding pods side by side (a rollout's middle) are not a ring.
    kubectl("-n", SYSTEM, "scale", "deployment/hybrid-operator", "--replicas=0")
    wait_until(lambda: not get_json(kubectl, "-n", SYSTEM, "pods", "-l", MANAGER)["items"], 90, "no manager pod")
    kubectl("apply", "-k", str(ROOT / "deploy" / "overlays" / "sharded"))
    pods = wait_until(lambda: ready_pods(kubectl, 3), 180, "three Ready sharded replicas")
    ring = "hybrid-operator.dev/ring=hybrid-operator"
    wait_until(
        lambda: len(get_json(kubectl, "-n", SYSTEM, "leases", "-l", ring)["items"]) == 3, 30, "three ring Leases"
    )
    followers = {p: LogFollower(kubeconfig, p, tmp_path / f"{p}.log") for p in pods}
    try:
        names = [f"shard-{i:02d}" for i in range(9)]
        create_foos(kubectl, names)
        wait_converged(kubectl, names, 180)
        first = [r for f in followers.values() for r in f.runs()]
        owner = {r.name: r.pod for r in first}
        per_pod = Counter(owner.values())
        print(f"\n{len(names)} Foos over 3 sharded pods: {dict(per_pod)}")
        assert set(owner) == set(names)
        assert len(per_pod) >= 2, f"one pod ran every Foo: {dict(per_pod)}"
        assert not overlapping(first), overlapping(first)
        # One owner per Foo: no Foo was run by two pods.
        assert all(len({r.pod for r in first if r.name == n}) == 1 for n in names), first

        victim = per_pod.most_common(1)[0][0]
        orphans = sorted(n for n, p in owner.items() if p == victim)
        kubectl("-n", SYSTEM, "delete", "pod", victim, "--wait=false")
        deleted = time.time()
        for name in orphans:
            kubectl("-n", TENANT, "patch", FOOS, name, "--type=merge", "-p", '{"spec":{"replicas":2}}')
        foos = wait_converged(kubectl, orphans, 120)
        took = time.time() - deleted
        followers[victim].proc.wait(60)  # its log is complete once its container has exited
        survivors = wait_until(lambda: ready_pods(kubectl, 3), 120, "three Ready replicas again")
        for pod in set(survivors) - set(followers):
            followers[pod] = LogFollower(kubeconfig, pod, tmp_path / f"{pod}.log")
        time.sleep(2)  # the replacement's log read to its end
        everything = [r for f in followers.values() for r in f.runs()]
        after = {r.name: r.pod for r in everything if r.start >= deleted and r.name in orphans}
        given = [t - deleted for f in followers.values() if f.pod != victim for t in f.handovers() if t >= deleted]
        print(
            f"{victim} deleted: the ring handed its Foos over after {min(given, default=float('nan')):.1f}s; "
            f"its {len(orphans)} Foos, changed, run by {dict(Counter(after.values()))}, converged after {took:.1f}s"
        )
        assert given, "no survivor was given the deleted pod's objects"
        assert set(after) == set(orphans), (orphans, after)
        assert victim not in after.values(), after
        assert not overlapping(everything), overlapping(everything)
        assert_one_deployment_each(kubectl, foos, orphans)
        for name in orphans:
            assert get_json(kubectl, "-n", TENANT, f"deployment/{name}")["spec"]["replicas"] == 2
    finally:
        for follower in followers.values():
            follower.stop()
