"""Faults for the reliability tests: a TCP relay between the operator and the API server, and the local
test bed's own components stopped, killed and started again.

Real sockets, real TLS passing through unchanged; the relay only decides whether bytes move. ``silence``
black-holes every connection open at that moment, as a dropped NAT entry or a half-dead load balancer
does: the sockets stay open, nothing arrives, nothing says they died. New connections work, as they do
after a NAT entry is lost. ``cut`` is a partition that says so: every connection is closed and new ones are
closed as soon as they arrive, until ``heal``.

``Bed`` drives ``hack/local-cluster.sh restart|kill|up|compact`` on the bed the tests run on; it exists only
when ``KUBECONFIG`` is that bed's (see ``local_bed``). ``descendants`` and ``running`` follow the processes a
killed operator leaves behind.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class _Pair:
    client: socket.socket
    upstream: socket.socket
    silent: threading.Event = field(default_factory=threading.Event)


class Relay:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> int:
        """Black-hole every connection open now; returns how many."""
        with self._lock:
            for pair in self._pairs:
                pair.silent.set()
            return len(self._pairs)

    def cut(self) -> int:
        """Close every connection open now and every new one until ``heal``; returns how many were open."""
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in (pair.client, pair.upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
        return len(pairs)

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for pair in self._pairs:
                for sock in (pair.client, pair.upstream):
                    with contextlib.suppress(OSError):
                        sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                with contextlib.suppress(OSError):
                    client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._pump, args=(pair, client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, upstream, client), daemon=True).start()

    def _pump(self, pair: _Pair, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not pair.silent.is_set():
                    target.sendall(data)
        except OSError:
            pass
        if not pair.silent.is_set():  # a silent connection never says it ended
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class Bed:
    """The local test bed's control plane, one component at a time (``hack/local-cluster.sh``)."""

    def __init__(self, script: Path, env: dict[str, str]) -> None:
        self.script = script
        self.env = env

    def _run(self, *args: str, timeout: float = 240) -> str:
        proc = subprocess.run(
            [str(self.script), *args], capture_output=True, text=True, env=self.env, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"local-cluster.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
        return proc.stdout

    def restart(self, component: str) -> None:
        """SIGTERM (SIGKILL after a short grace), start again with the same data and ports, wait until ready."""
        self._run("restart", component)

    def kill(self, component: str) -> None:
        self._run("kill", component)

    def up(self) -> None:
        """Start whatever component is down, with its data and ports; returns when the bed is ready."""
        self._run("up")

    def compact(self) -> int:
        """Compact etcd at its current revision; returns the revision."""
        return int(self._run("compact").split()[-1])


def local_bed(script: Path, kubeconfig: str) -> Bed | None:
    """The bed ``kubeconfig`` belongs to, if it is the local test bed named by LOCAL_CLUSTER_NAME; None for any
    other cluster (a user's own, which no test may stop)."""
    env = dict(os.environ)
    out = subprocess.run([str(script), "env"], capture_output=True, text=True, env=env, check=True).stdout
    ours = next((line.split("=", 1)[1] for line in out.splitlines() if line.startswith("export KUBECONFIG=")), "")
    if not ours or Path(ours).resolve() != Path(kubeconfig).resolve():
        return None
    return Bed(script, env)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
