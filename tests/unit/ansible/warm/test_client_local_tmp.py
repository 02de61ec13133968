"""``ZygoteClient`` removes a killed zygote's local temp dir from the path the zygote noted, and nothing else:
the note is a file on disk, so it is read as one another hand could have written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hybrid_operator.ansible.warm import protocol
from hybrid_operator.ansible.warm.client import ZygoteClient


def _client_of_a_dead_process(home: Path, note: str | None) -> tuple[ZygoteClient, int]:
    client = ZygoteClient(home)
    proc = subprocess.Popen(["true"])
    proc.wait()
    client.proc = proc
    (home / "cwd").mkdir(parents=True)
    if note is not None:
        (home / "cwd" / protocol.LOCAL_TMP_NOTE).write_text(note, encoding="utf-8")
    return client, proc.pid


def _dir_with_a_file(path: Path) -> Path:
    (path / "ansiballz_cache").mkdir(parents=True)
    (path / "ansiballz_cache" / "payload.zip").write_bytes(b"zip")
    return path


def test_the_dir_ansible_named_after_the_dead_zygote_is_removed(tmp_path: Path) -> None:
    client, pid = _client_of_a_dead_process(tmp_path / "home", None)
    local = _dir_with_a_file(tmp_path / f"ansible-local-{pid}abc_1234")
    (tmp_path / "home" / "cwd" / protocol.LOCAL_TMP_NOTE).write_text(str(local), encoding="utf-8")
    client._remove_local_tmp()
    assert not local.exists()


@pytest.mark.parametrize(
    "name",
    [
        "ansible-local-1abcdefgh",  # another process's (a pid no test process has)
        "ansible-local-{pid}7abcdefgh",  # another zygote's, whose pid starts with this one's
        "ansible-local-{pid}",  # not Ansible's name
        "victim",  # any other dir
        "",  # the note's own parent
    ],
)
def test_a_note_naming_anything_else_removes_nothing(tmp_path: Path, name: str) -> None:
    client, pid = _client_of_a_dead_process(tmp_path / "home", None)
    name = name.format(pid=pid)
    target = _dir_with_a_file(tmp_path / "t" / name) if name else _dir_with_a_file(tmp_path / "t")
    (tmp_path / "home" / "cwd" / protocol.LOCAL_TMP_NOTE).write_text(str(target), encoding="utf-8")
    client._remove_local_tmp()
    assert (target / "ansiballz_cache" / "payload.zip").exists()


def test_a_relative_a_linked_or_a_missing_note_removes_nothing(tmp_path: Path) -> None:
    client, pid = _client_of_a_dead_process(tmp_path / "home", None)
    real = _dir_with_a_file(tmp_path / "real")
    link = tmp_path / f"ansible-local-{pid}linklink"
    link.symlink_to(real)
    note = tmp_path / "home" / "cwd" / protocol.LOCAL_TMP_NOTE
    for text in (str(link), f"ansible-local-{pid}relative", "\0"):
        note.write_text(text, encoding="utf-8")
        client._remove_local_tmp()
    note.unlink()
    client._remove_local_tmp()
    assert (real / "ansiballz_cache" / "payload.zip").exists() and link.is_symlink()


def test_a_live_zygotes_dir_is_its_own(tmp_path: Path) -> None:
    client = ZygoteClient(tmp_path / "home")
    proc = subprocess.Popen(["sleep", "30"])
    try:
        client.proc = proc
        (tmp_path / "home" / "cwd").mkdir(parents=True)
        local = _dir_with_a_file(tmp_path / f"ansible-local-{proc.pid}xxxxxxxx")
        (tmp_path / "home" / "cwd" / protocol.LOCAL_TMP_NOTE).write_text(str(local), encoding="utf-8")
        client._remove_local_tmp()
        assert local.exists()
    finally:
        proc.kill()
        proc.wait()
