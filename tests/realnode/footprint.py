"""What a real node leaves on the host, as a comparable snapshot: the before/after of ``up --real-node``/``down``.

``hack/test-realnode.sh`` saves one snapshot before ``hack/local-cluster.sh up --real-node`` and, after ``down``,
``test_leaves_nothing.py`` takes another and compares them. Run by hand (as root, like the bed):

    python -m tests.realnode.footprint > before.json      # then up --real-node ... down, then:
    HYBRID_OPERATOR_REALNODE_BEFORE=before.json pytest tests/realnode/test_leaves_nothing.py

Each part is a sorted list of strings, so a difference names exactly what is left over (or gone):

- ``iptables``/``ip6tables``: every rule and user chain of every table (``iptables-save``, without packet
  counters). A table's built-in chains with their default ACCEPT policy are not listed: iptables-nft
  registers a table the first time anything lists or writes it, and has no command to unregister one;
  such a table holds no rule and changes nothing.
- ``links``, ``netns``: the host's network links and named network namespaces.
- ``mounts``: mount points where a real node mounts (containers' root filesystems and shm, pod volumes,
  network namespaces).
- ``cgroups``: the kubelet's cgroups (``kubepods`` and below, in every hierarchy).
- ``processes``: containerd, its shims, runc, the kubelet, kube-proxy, the registry, and anything in a
  ``kubepods`` cgroup (a container), as ``pid name``.
- ``sysctls``: the values the kubelet and the CNI bridge plugin change.
- ``paths``: which of the host paths containerd, the CNI plugins or the kubelet make exist.

Processes, cgroups and mounts are limited to a real node's own, so that other work on the machine (a container
build, another test bed) does not show up as a leftover.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

NODE_EXECUTABLES = frozenset(
    {"containerd", "containerd-shim-runc-v2", "runc", "kubelet", "kube-proxy", "docker-registry"}
)
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/cni/results",
    "/opt/containerd",
    "/etc/kubernetes",
    "/run/lock/hybrid-operator-real-node",
)
# Where a real node's mounts are: containers' root filesystems and shm, pod volumes (under the bed's state
# dir, <state>/node/), network namespaces, containerd's and the kubelet's default dirs.
NODE_MOUNTS = ("/node/containerd/", "/node/kubelet/", "/run/netns/", "/run/containerd/", "/var/lib/kubelet/")
_COUNTERS = re.compile(r" \[\d+:\d+\]$")

Footprint = dict[str, list[str]]


def iptables(save: str) -> list[str]:
    """Rules and user chains of every table, each as ``table line``."""
    try:
        out = subprocess.run([save], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        return []
    lines, table = [], ""
    for line in out.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            chain = _COUNTERS.sub("", line)
            if not chain.endswith(" ACCEPT"):  # a user chain (policy "-") or a built-in one that drops
                lines.append(f"{table} {chain}")
        elif line.startswith("-"):
            lines.append(f"{table} {line}")
    return sorted(lines)


def links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split(": ")[1].split("@")[0] for line in out.splitlines())


def netns() -> list[str]:
    path = Path("/run/netns")
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def mounts() -> list[str]:
    points = (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return sorted(p for p in points if any(mark in p for mark in NODE_MOUNTS))


def cgroups() -> list[str]:
    found = []
    for hierarchy in [Path("/sys/fs/cgroup"), *Path("/sys/fs/cgroup").iterdir()]:
        top = hierarchy / "kubepods"
        if top.is_dir():
            found += [str(top)] + [str(Path(d) / sub) for d, subs, _ in os.walk(top) for sub in subs]
    return sorted(set(found))


def processes() -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            name = os.path.basename(os.readlink(proc / "exe"))
            in_pod = "kubepods" in (proc / "cgroup").read_text()
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if name in NODE_EXECUTABLES or in_pod:
            found.append(f"{proc.name} {name}")
    return sorted(found)


def sysctls() -> list[str]:
    return [f"{name}={Path('/proc/sys', *name.split('.')).read_text().strip()}" for name in SYSCTLS]


def paths() -> list[str]:
    return [path for path in HOST_PATHS if os.path.lexists(path)]


def take() -> Footprint:
    return {
        "iptables": iptables("iptables-save"),
        "ip6tables": iptables("ip6tables-save"),
        "links": links(),
        "netns": netns(),
        "mounts": mounts(),
        "cgroups": cgroups(),
        "processes": processes(),
        "sysctls": sysctls(),
        "paths": paths(),
    }


def differences(before: Footprint, after: Footprint) -> dict[str, dict[str, list[str]]]:
    """Per part, what is there now and was not (``left``) and what was there and is gone (``gone``).

    Processes only count when left: a process that ended meanwhile is not the node's doing.
    """
    diff = {}
    for part, now in after.items():
        was = set(before.get(part, []))
        left = sorted(set(now) - was)
        gone = [] if part == "processes" else sorted(was - set(now))
        if left or gone:
            diff[part] = {"left": left, "gone": gone}
    return diff


if __name__ == "__main__":
    json.dump(take(), sys.stdout, indent=1)
    sys.stdout.write("\n")
