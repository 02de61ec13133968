"""A forked child that takes a run's or a module's environment gets the temp dir that environment names, as a
new interpreter would, not the one its parent had already looked up (``forking.enter``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from hybrid_operator.ansible import forking


def _in_child(work: Callable[[], str]) -> str:
    """Run ``work`` in a forked child that ends with ``forking.end``; what it returned."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.write(write, work().encode())
        finally:
            forking.end(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        seen = pipe.read().decode()
    os.waitpid(pid, 0)
    return seen


def _temp_dir_in_child(env: dict[str, str], replace_env: bool) -> str:
    tempfile.gettempdir()  # the parent has looked its own up (and Python keeps it)

    def work() -> str:
        forking.enter(env, None, replace_env=replace_env)
        return tempfile.gettempdir()

    return _in_child(work)


def test_the_child_uses_the_tmpdir_of_the_environment_it_enters(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert tempfile.gettempdir() != str(private)
    assert _temp_dir_in_child({"TMPDIR": str(private)}, replace_env=True) == str(private)
    assert _temp_dir_in_child({"TMPDIR": str(private)}, replace_env=False) == str(private)


def test_without_tmpdir_the_child_falls_back_as_python_does(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "")}
    assert _temp_dir_in_child(env, replace_env=True) in ("/tmp", "/var/tmp", "/usr/tmp", os.getcwd())


def _mp_temp_dir_after_child(make_own: bool) -> tuple[str, bool]:
    """A forked child enters, lets multiprocessing make (or reuse) its temp dir, and ends: (that dir, whether
    it still exists after the child is gone)."""
    import multiprocessing.process
    import multiprocessing.util

    def work() -> str:
        forking.enter({}, None, replace_env=False)
        if make_own:  # as a run that starts ansible-core's RPC host: a dir of its own
            multiprocessing.process.current_process()._config["tempdir"] = None  # type: ignore[attr-defined]
        return multiprocessing.util.get_temp_dir()

    path = _in_child(work)
    return path, os.path.exists(path)


def test_the_multiprocessing_temp_dir_a_child_made_goes_with_it_and_the_parents_stays() -> None:
    import multiprocessing.util

    parents = multiprocessing.util.get_temp_dir()  # the parent's own (removed at its exit, as always)
    path, exists = _mp_temp_dir_after_child(make_own=True)
    assert path != parents and Path(path).name.startswith("pymp-")
    assert not exists, "a forked run leaves its pymp- dir behind"
    path, exists = _mp_temp_dir_after_child(make_own=False)
    assert path == parents and exists, "the child removed its parent's dir"
