"""A warm module server: Ansible modules run in a forked child of a process that already imported their
heavy libraries, instead of a new Python interpreter per task.

Why: every module task (``kubernetes.core.k8s``, ``openstack.cloud.server``, even ``file``) normally
costs a new interpreter plus ``import kubernetes`` or ``import openstack``: 0.7-1.3 s before the first API
call. Here the runner executor points ``ansible_python_interpreter`` at a tiny client script
(``write_client``) that starts with ``python -S -E`` (no site import: ~15 ms) and hands its argv, environment, working
directory and stdin to this server over a private Unix socket. The server ``fork()``s; the child becomes
that "python" process -- same argv, environment, cwd, stdin, stdout, stderr, exit code -- and runs the
module exactly as the stock AnsiballZ wrapper would. Modules are unchanged and isolated from each other
(each runs in its own short-lived process); only the imports are shared, copy-on-write. The client falls
back to the real interpreter whenever the server is not there or the command is not a plain script run.

Started and stopped by the runner executor (``running.RunSetup``; the warm executor runs modules in its
workers instead, see ``inworker``); the server loop itself runs as
``python -m hybrid_operator.ansible.modserver SOCKET``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import runpy
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hybrid_operator.ansible import forking
from hybrid_operator.ansible.privatedirs import ensure_private_dir
from hybrid_operator.ansible.runsite import sitecustomize
from hybrid_operator.errors import ConfigError

log = logging.getLogger(__name__)
SOCKET_PATH_MAX = 107  # bytes in sockaddr_un.sun_path on Linux, the NUL not counted

# What the modules our roles use import at start: preloaded once, shared by every forked child.
DEFAULT_PRELOAD = (
    "ansible.module_utils.basic",
    "ansible.module_utils.common.text.converters",
    "yaml",
    "urllib3",
    "requests",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.dynamic",
    "kubernetes.config",
    "jsonpatch",
    "openstack",
)

_CLIENT = r"""#!{python} -SE
# Written by hybrid-operator: Ansible runs modules with this "interpreter". It asks the warm module
# server to fork a child that behaves as `{python} ARGS` would; anything else runs the real interpreter.
import os, socket, struct, sys
REAL = {python!r}
SOCKET = {socket_path!r}
def fallback():
    os.execv(REAL, [REAL] + sys.argv[1:])
args = sys.argv[1:]
if len(args) > 1 or (args and args[0].startswith("-")):
    fallback()
try:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCKET)
except OSError:
    fallback()
import json
stdin = b"" if args else sys.stdin.buffer.read()
head = json.dumps({{"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}}).encode()
conn.sendall(struct.pack("!II", len(head), len(stdin)) + head + stdin)
def recv(n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            sys.stderr.write("hybrid-operator module server hung up\n")
            os._exit(255)
        buf += chunk
    return buf
rc, out_len, err_len = struct.unpack("!iII", recv(12))
sys.stdout.buffer.write(recv(out_len)); sys.stdout.flush()
sys.stderr.buffer.write(recv(err_len)); sys.stderr.flush()
os._exit(rc)
"""


def write_client(path: Path, socket_path: str, python: str = sys.executable) -> Path:
    """Write the client 'interpreter' script (mode 0755) and return its path."""
    path.write_text(_CLIENT.format(python=python, socket_path=socket_path), encoding="utf-8")
    path.chmod(0o755)
    return path


class ModuleServer:
    """The operator's handle on the server process: start, health, stop."""

    def __init__(self, runtime_dir: Path, preload: tuple[str, ...] = DEFAULT_PRELOAD) -> None:
        self.runtime_dir = runtime_dir
        self.socket_path = str(runtime_dir / "modules.sock")
        self.client = runtime_dir / "python"
        self.preload = preload
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        if (length := len(os.fsencode(self.socket_path))) > SOCKET_PATH_MAX:
            raise ConfigError(
                f"the module server's socket {self.socket_path} would be {length} bytes long, more than a Unix "
                f"socket's path may be ({SOCKET_PATH_MAX}): set TMPDIR to a shorter directory"
            )
        ensure_private_dir(self.runtime_dir, "module server dir")  # its socket runs code: ours alone
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        write_client(self.client, self.socket_path)
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "hybrid_operator.ansible.modserver", self.socket_path, ",".join(self.preload)],
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket_path):
            if self._proc.poll() is not None:
                raise RuntimeError(f"module server exited at start (code {self._proc.returncode})")
            if time.monotonic() > deadline:
                raise RuntimeError("module server did not start in time")
            time.sleep(0.05)
        log.info("module server ready (pid %d)", self._proc.pid)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)


# ---------------------------------------------------------------------------------------- server side


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = conn.recv(min(size - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("client hung up")
        buf += chunk
    return bytes(buf)


def _run_child(conn: socket.socket, header: dict[str, object], stdin_data: bytes) -> None:
    """In the forked child: become `python ARGV` with the client's env, cwd and stdin; report back."""
    # Plain files, not context managers: this process ends in os._exit below, the kernel closes them.
    out = tempfile.TemporaryFile()  # noqa: SIM115
    err = tempfile.TemporaryFile()  # noqa: SIM115
    inp = tempfile.TemporaryFile()  # noqa: SIM115
    inp.write(stdin_data)
    inp.seek(0)
    rc = 1
    try:
        forking.reset_signals()  # modules wait for their own subprocesses: SIGCHLD as a new process has it
        # Output first: whatever fails from here on is the run's to read, not the operator's log.
        forking.redirect(inp.fileno(), out.fileno(), err.fileno())
        env = {str(k): str(v) for k, v in dict(header["env"]).items()}  # type: ignore[call-overload]
        try:
            forking.enter(env, str(header["cwd"]), replace_env=True)
        except FileNotFoundError:  # the run's private directory went away: the run was abandoned (shutdown)
            print(f"hybrid-operator module server: the run's directory {header['cwd']} is gone", file=sys.stderr)
            raise SystemExit(1) from None
        argv = [str(a) for a in header["argv"]]  # type: ignore[attr-defined]
        if argv:
            sys.argv = argv
            try:
                runpy.run_path(argv[0], run_name="__main__")
                rc = 0
            except SystemExit as exc:
                rc = forking.exit_status(exc)
        else:
            rc = forking.run_as_main(stdin_data)
    except SystemExit as exc:
        rc = forking.exit_status(exc)
    except BaseException:
        traceback.print_exc()
    finally:
        forking.flush_std()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        with contextlib.suppress(OSError):
            conn.sendall(struct.pack("!iII", rc, len(stdout), len(stderr)) + stdout + stderr)
        forking.end(0)


def serve(socket_path: str, preload: list[str]) -> None:
    sitecustomize.unbound_memory()  # each module's fork is bounded from its own size (forking.enter)
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a library the modules may not need: say so, go on
            print(f"module server: not preloading {name}: {exc}", file=sys.stderr)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is the operator's only
    tmp = socket_path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    listener.bind(tmp)
    os.umask(old_umask)
    listener.listen(128)
    os.rename(tmp, socket_path)  # appears only when ready
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        conn, _addr = listener.accept()
        try:
            head_len, in_len = struct.unpack("!II", _recv_exact(conn, 8))
            header = json.loads(_recv_exact(conn, head_len))
            stdin_data = _recv_exact(conn, in_len)
        except (ConnectionError, ValueError, struct.error):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            listener.close()
            _run_child(conn, header, stdin_data)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], [m for m in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if m])
