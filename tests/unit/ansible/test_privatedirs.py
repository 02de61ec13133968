"""Private dirs: made 0700, refused when another user could have planted them, temporary ones removed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hybrid_operator.ansible.privatedirs import TempDir, check_private_dir, ensure_private_dir, write_private_file
from hybrid_operator.errors import ConfigError

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a dir to another user")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_creates_the_dir_and_its_missing_parents_at_0700(tmp_path: Path) -> None:
    wanted = tmp_path / "a" / "b" / "runner"
    assert ensure_private_dir(wanted) == wanted
    for path in (tmp_path / "a", tmp_path / "a" / "b", wanted):
        assert stat.S_ISDIR(os.lstat(path).st_mode)
        assert mode(path) == 0o700
        assert os.lstat(path).st_uid == os.geteuid()


def test_accepts_an_existing_private_dir_of_ours_and_keeps_its_contents(tmp_path: Path) -> None:
    wanted = tmp_path / "runner"
    wanted.mkdir(mode=0o700)
    (wanted / "kept").write_text("x")
    assert ensure_private_dir(wanted) == wanted
    assert (wanted / "kept").read_text() == "x"


@as_root
def test_refuses_a_dir_owned_by_another_user(tmp_path: Path) -> None:
    planted = tmp_path / "runner"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(ConfigError) as caught:
        ensure_private_dir(planted, "runner artifacts dir (--runner-artifacts-dir)")
    message = str(caught.value)
    assert str(planted) in message
    assert f"uid {NOBODY}" in message
    assert "mode 0700" in message
    assert "--runner-artifacts-dir" in message
    assert "give a directory of your own" in message


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777, 0o750, 0o701])
def test_refuses_a_dir_of_ours_that_group_or_others_can_enter(tmp_path: Path, bits: int) -> None:
    loose = tmp_path / "runner"
    loose.mkdir()
    loose.chmod(bits)
    with pytest.raises(ConfigError, match=rf"mode {bits:04o} lets group or others in.*chmod 700 {loose}"):
        ensure_private_dir(loose)


def test_refuses_a_symlink_even_to_a_private_dir_of_ours(tmp_path: Path) -> None:
    real = ensure_private_dir(tmp_path / "real")
    link = tmp_path / "runner"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match=rf"{link}: it is a symbolic link \(to {real}\)"):
        ensure_private_dir(link)


def test_refuses_a_dangling_symlink_instead_of_creating_its_target(tmp_path: Path) -> None:
    link = tmp_path / "runner"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="symbolic link"):
        ensure_private_dir(link)
    assert not (tmp_path / "elsewhere").exists()


def test_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "runner").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        ensure_private_dir(tmp_path / "runner")


@as_root
def test_refuses_a_dir_whose_parent_another_user_owns(tmp_path: Path) -> None:
    """The per-user default planted one level up: ``$TMPDIR/hybrid-operator-0`` made by nobody."""
    parent = tmp_path / "hybrid-operator-0"
    parent.mkdir(mode=0o777)
    os.chown(parent, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match=rf"its parent {parent} belongs to uid {NOBODY}"):
        ensure_private_dir(parent / "runner")
    assert not (parent / "runner").exists()  # refused before anything was made in it


@as_root
def test_refuses_a_private_dir_of_ours_inside_another_users_dir(tmp_path: Path) -> None:
    parent = tmp_path / "theirs"
    ensure_private_dir(parent / "runner")
    os.chown(parent, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match=f"belongs to uid {NOBODY}, who could replace it"):
        ensure_private_dir(parent / "runner")


def test_resolves_symlinked_parents_so_a_later_change_of_the_link_does_not_redirect_us(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert ensure_private_dir(tmp_path / "link" / "runner") == tmp_path / "real" / "runner"


def test_check_private_dir_accepts_ours_and_refuses_loose_ones(tmp_path: Path) -> None:
    check_private_dir(ensure_private_dir(tmp_path / "ok"))
    (tmp_path / "loose").mkdir(mode=0o755)
    (tmp_path / "loose").chmod(0o755)
    with pytest.raises(ConfigError):
        check_private_dir(tmp_path / "loose")


# -- write_private_file


@as_root
def test_write_private_file_replaces_a_planted_file_instead_of_writing_into_it(tmp_path: Path) -> None:
    target = tmp_path / "role.yml"
    target.write_text("- hosts: all\n  tasks: [{command: touch /tmp/pwned}]\n")
    target.chmod(0o666)
    os.chown(target, NOBODY, NOBODY)
    planted_inode = os.lstat(target).st_ino
    write_private_file(target, "ours\n")
    st = os.lstat(target)
    assert target.read_text() == "ours\n"
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o600)
    assert st.st_ino != planted_inode
    assert [p.name for p in tmp_path.iterdir()] == ["role.yml"]  # no temporary file left


def test_write_private_file_replaces_a_symlink_and_leaves_its_target_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "role.yml").symlink_to(victim)
    write_private_file(tmp_path / "role.yml", "ours")
    assert not (tmp_path / "role.yml").is_symlink()
    assert (tmp_path / "role.yml").read_text() == "ours"
    assert victim.read_text() == "untouched"


# -- TempDir


def test_temp_dir_is_private_named_for_the_process_and_removed_by_close(tmp_path: Path) -> None:
    scratch = TempDir("hyop-test-", tmp_path)
    assert scratch.path.parent == tmp_path
    assert scratch.path.name.startswith(f"hyop-test-{os.getpid()}-")
    assert mode(scratch.path) == 0o700
    (scratch.path / "secret").write_text("token")
    scratch.close()
    assert not scratch.path.exists()
    scratch.close()  # twice is fine


def test_temp_dir_as_a_context_manager(tmp_path: Path) -> None:
    with TempDir("hyop-test-", tmp_path) as path:
        assert path.is_dir()
    assert list(tmp_path.iterdir()) == []


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, check=True
    )


def test_temp_dirs_left_open_are_removed_when_the_process_exits(tmp_path: Path) -> None:
    out = _python(
        """
        from hybrid_operator.ansible.privatedirs import TempDir
        d = TempDir("hybrid-operator-runs-")
        (d.path / "run.kubeconfig").write_text("secret")
        print(d.path)
        """,
        tmp_path,
    )
    assert Path(out.stdout.strip()).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_a_forked_child_exiting_leaves_its_parents_temp_dirs_alone(tmp_path: Path) -> None:
    out = _python(
        """
        import os, sys
        from hybrid_operator.ansible.privatedirs import TempDir
        d = TempDir("hyop-")
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a normal exit: atexit handlers run in the child
        os.waitpid(pid, 0)
        print(d.path.is_dir())
        """,
        tmp_path,
    )
    assert out.stdout.strip() == "True"
    assert list(tmp_path.iterdir()) == []  # and the parent's own exit removed it
