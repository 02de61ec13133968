"""The module server refuses, with what to do, a socket path longer than a Unix socket may have (a long
``TMPDIR``), instead of starting a server that exits at once and saying only that it did."""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

import pytest

from hybrid_operator.ansible.modserver import SOCKET_PATH_MAX, ModuleServer
from hybrid_operator.errors import ConfigError


def test_a_socket_path_too_long_is_refused_naming_it_and_what_to_do(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * SOCKET_PATH_MAX)
    server = ModuleServer(deep)
    with pytest.raises(ConfigError, match=r"modules\.sock would be \d+ bytes long.*set TMPDIR to a shorter"):
        server.start()
    assert not deep.exists()  # nothing made, nothing started
    assert not server.alive()


def _ask(socket_path: str, cwd: str, code: bytes) -> tuple[int, bytes, bytes]:
    """One request as the client script sends it: run ``code`` as ``python < code`` in ``cwd``."""
    head = json.dumps({"argv": [], "env": {"PATH": os.environ.get("PATH", "")}, "cwd": cwd}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_path)
        conn.sendall(struct.pack("!II", len(head), len(code)) + head + code)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    rc, out_len, err_len = struct.unpack("!iII", reply[:12])
    body = reply[12:]
    return rc, body[:out_len], body[out_len : out_len + err_len]


def test_a_run_whose_directory_is_gone_gets_the_reason_and_the_operator_log_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A reconcile abandoned at shutdown has its private directory removed while its module may still be on
    its way to the server: the module fails with one line saying why, the server's own output stays clean."""
    server = ModuleServer(tmp_path / "ms", preload=())
    server.start()
    try:
        gone = tmp_path / "run" / "playbooks"
        rc, out, err = _ask(server.socket_path, str(gone), b"print('never')")
        assert rc == 1
        assert out == b""
        assert f"the run's directory {gone} is gone".encode() in err
        assert b"Traceback" not in err
        here = tmp_path / "here"
        here.mkdir()
        rc, out, err = _ask(server.socket_path, str(here), b"import os; print(os.getcwd())")
        assert (rc, out.strip(), err) == (0, str(here).encode(), b"")  # the server goes on serving
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err
