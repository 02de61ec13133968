"""A forked child that takes a run's or a module's environment gets the temp dir that environment names, as a
new interpreter would, not the one its parent had already looked up (``forking.enter``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hybrid_operator.ansible import forking


def _temp_dir_in_child(env: dict[str, str], replace_env: bool) -> str:
    tempfile.gettempdir()  # the parent has looked its own up (and Python keeps it)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            forking.enter(env, None, replace_env=replace_env)
            os.write(write, tempfile.gettempdir().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        seen = pipe.read().decode()
    os.waitpid(pid, 0)
    return seen


def test_the_child_uses_the_tmpdir_of_the_environment_it_enters(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert tempfile.gettempdir() != str(private)
    assert _temp_dir_in_child({"TMPDIR": str(private)}, replace_env=True) == str(private)
    assert _temp_dir_in_child({"TMPDIR": str(private)}, replace_env=False) == str(private)


def test_without_tmpdir_the_child_falls_back_as_python_does(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "")}
    assert _temp_dir_in_child(env, replace_env=True) in ("/tmp", "/var/tmp", "/usr/tmp", os.getcwd())
