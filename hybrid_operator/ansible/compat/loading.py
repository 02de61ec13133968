"""Role YAML parsed once for every run (``warm.parsed``): ``DataLoader.load_from_file`` answered from files the
zygote parsed ahead, while each file is unchanged. The same ``DataLoader`` in 2.19-2.21; ``loader_hook_problems``
checks its shape before ``hook_parsed_files``.

Only the calls role and playbook loading make are served: a copy (``unsafe`` false) of a file read as trusted
templates (``trusted_as_template``), YAML or JSON, that may be cached (``cache`` not ``none``). What they get is
what Ansible returns after parsing the file itself: a deep copy of the parsed data, so no caller ever holds the
shared original. A file counts as unchanged while its device, inode, size, modification and change times are the
ones the zygote saw (an edit in place changes the times, a replacement the inode); anything else, including a
file whose text was vault-encrypted (never parsed ahead: the zygote has no vault secrets), takes Ansible's path.
"""

from __future__ import annotations

import copy
import inspect
import os
from dataclasses import dataclass
from typing import Any

_LOAD_PARAMS = ("self", "file_name", "cache", "unsafe", "json_only", "trusted_as_template")


@dataclass(frozen=True)
class _Parsed:
    identity: tuple[int, ...]
    data: Any


class ParsedFiles:
    """Parsed files by absolute path, with what they were when parsed. Counts what it served."""

    def __init__(self) -> None:
        self.hits = self.stale = 0
        self._files: dict[str, _Parsed] = {}

    def __len__(self) -> int:
        return len(self._files)

    def contents(self) -> list[Any]:
        """Everything parsed (to read, never to change)."""
        return [parsed.data for parsed in self._files.values()]

    def add(self, path: str, identity: tuple[int, ...], data: Any) -> None:
        self._files[path] = _Parsed(identity, data)

    def get(self, path: str) -> Any | None:
        """The parsed data of ``path`` if the file is still the one parsed (never to be handed out as is)."""
        parsed = self._files.get(path)
        if parsed is None:
            return None
        if file_identity(path) != parsed.identity:
            self.stale += 1
            return None
        self.hits += 1
        return parsed.data


def file_identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def loader_hook_problems() -> list[str]:
    """Why ``hook_parsed_files`` cannot be installed on this ansible-core (empty: it can)."""
    try:
        from ansible.parsing.dataloader import DataLoader

        problems = []
        if tuple(inspect.signature(DataLoader.load_from_file).parameters) != _LOAD_PARAMS:
            problems.append("DataLoader.load_from_file: not the expected parameters")
        if not callable(getattr(DataLoader, "path_dwim", None)):
            problems.append("DataLoader.path_dwim: not found")
        if not isinstance(getattr(DataLoader(), "_FILE_CACHE", None), dict):
            problems.append("DataLoader._FILE_CACHE: not a dict")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def parse_ahead(paths: list[str], parsed: ParsedFiles) -> None:
    """Parse these files as role loading does (trusted as templates) into ``parsed``; a file that does not
    parse (or is vault-encrypted) is left for the runs, which report it as they always did."""
    from ansible.parsing.dataloader import DataLoader

    loader = DataLoader()
    for given in paths:
        path = loader.path_dwim(given)  # the name role loading asks for it by
        identity = file_identity(path)
        try:
            with open(path, "rb") as handle:
                if b"$ANSIBLE_VAULT" in handle.read(1 << 20):
                    continue
            data = loader.load_from_file(path, cache="none", unsafe=True, trusted_as_template=True)
        except Exception:
            continue
        if identity is not None and identity == file_identity(path):  # not changed while it was read
            parsed.add(path, identity, data)


def hook_parsed_files(parsed: ParsedFiles) -> None:
    """Answer role and playbook loading from ``parsed`` (see the module docstring). Check
    ``loader_hook_problems`` first."""
    from ansible.parsing.dataloader import DataLoader

    original = DataLoader.load_from_file

    def load_from_file(
        self: Any,
        file_name: str,
        cache: str = "all",
        unsafe: bool = False,
        json_only: bool = False,
        trusted_as_template: bool = False,
    ) -> Any:
        if cache != "none" and not unsafe and not json_only and trusted_as_template:
            path = self.path_dwim(file_name)
            if path not in self._FILE_CACHE and (data := parsed.get(path)) is not None:
                return copy.deepcopy(data)
        return original(self, file_name, cache, unsafe, json_only, trusted_as_template)

    DataLoader.load_from_file = load_from_file
