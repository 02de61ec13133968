"""``hybrid-operator generate crds``: each watched kind's CRD schema written from its role's argument spec.

Called by ``cli``. For every watches.yaml entry whose role (or the one role its playbook runs) has
``meta/argument_specs.yml``, the CRD of that group and kind in the CRD directory (``deploy/crds``) gets the
``spec`` and ``status`` schema ``crdschema`` makes; a kind without a CRD gets a new file (status
subresource, printer columns) listed in the directory's kustomization.yaml.

Hand edits survive: the generator owns, in each schema node it writes, only ``type``, ``description`` (when
the argument spec has one), ``default``, ``enum``, ``required``, ``properties``, ``items`` and
``x-kubernetes-preserve-unknown-fields``. Every other keyword a person adds to a field (``pattern``,
``minimum``, ``maxLength``, ``format``, ``x-kubernetes-validations``...) stays as long as the field does, and
so does everything outside the schema (printer columns, short names, annotations) and every comment. A
field marked ``x-kubernetes-int-or-string`` by hand keeps that instead of a generated type. Files are
edited with ruamel.yaml, so a CRD that is up to date is written back byte for byte.
"""

from __future__ import annotations

import difflib
import io
import textwrap
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import FoldedScalarString, ScalarString

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.project import crdschema
from hybrid_operator.project.argspecs import load_role_spec
from hybrid_operator.settings.watches import Watch, load_watches

OWNED = frozenset({"type", "description", "default", "enum", "required", "properties", "items", crdschema.PRESERVE})
_LINE = 118  # yamllint allows 120
_ROLE_ACTIONS = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")


@dataclass(frozen=True)
class Change:
    """One CRD file as it is (``before``, empty if new) and as generated (``after``)."""

    path: Path
    before: str
    after: str

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                f"{self.path} (on disk)",
                f"{self.path} (generated)",
            )
        )


def generate(
    watches_file: Path,
    *,
    crds_dir: Path | None = None,
    roles_paths: tuple[Path, ...] = (),
    reserved: Callable[[], frozenset[str]],
    note: Callable[[str], None] = lambda _: None,
) -> list[Change]:
    """The CRD files that differ from what the roles say (nothing is written; see ``write``)."""
    crds_dir = crds_dir or watches_file.resolve().parent / "deploy" / "crds"
    if not _has_entries(watches_file):
        note(f"{watches_file}: no entries yet (add one with `hybrid-operator create api`)")
        return []
    files = _CrdFiles(crds_dir)
    for watch in load_watches(watches_file, roles_paths=roles_paths):
        role_dir = _role_dir(watch, watches_file, roles_paths)
        spec = load_role_spec(role_dir) if role_dir is not None else None
        if spec is None:
            note(f"{watch.gvk}: skipped, {watch.target.describe()} has no meta/argument_specs.yml to generate from")
            continue
        where = f"{role_dir}/meta"
        watch_vars = set(watch.vars) | set(watch.finalizer.vars if watch.finalizer else {})
        options = crdschema.spec_options(
            spec,
            group=watch.gvk.group,
            kind=watch.gvk.kind,
            watch_vars=watch_vars,
            snake_case=watch.snake_case_parameters,
            reserved=reserved(),
        )
        spec_node = crdschema.spec_schema(options, snake_case=watch.snake_case_parameters, where=where)
        status_node = crdschema.status_schema(spec.status, where=where)
        root = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec_node,
                "status": status_node,
            },
        }
        if spec_node.get("required"):
            root["required"] = ["spec"]
        files.update(watch.gvk, root, description=spec.short_description)
    return files.changes()


def write(changes: list[Change]) -> None:
    for change in changes:
        change.path.parent.mkdir(parents=True, exist_ok=True)
        change.path.write_text(change.after, encoding="utf-8")


def plural(kind: str) -> str:
    """Kubernetes' default plural of a kind, lower case (as operator-sdk and kubebuilder make it)."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def yaml_rt() -> YAML:
    """ruamel.yaml as this project's files are written: comments and quotes kept, lists indented."""
    rt = YAML()
    rt.preserve_quotes = True
    rt.indent(mapping=2, sequence=4, offset=2)
    rt.width = 4096  # long descriptions are folded by ``_fold``, nothing else is wrapped
    rt.explicit_start = True
    return rt


class _CrdFiles:
    """The CRD directory: its files loaded once, CRDs found by group and kind, new ones added."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rt = yaml_rt()
        self.texts: dict[Path, str] = {}
        self.docs: dict[Path, list[Any]] = {}
        for path in sorted(directory.glob("*.y*ml")) if directory.is_dir() else []:
            if path.name != "kustomization.yaml":
                self._load(path)

    def _load(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        try:
            self.docs[path] = list(self.rt.load_all(text))
        except Exception as exc:  # ruamel raises many kinds; all mean the same here
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        self.texts[path] = text

    def find(self, gvk: GVK) -> CommentedMap | None:
        for docs in self.docs.values():
            for doc in docs:
                spec = doc.get("spec") if isinstance(doc, MutableMapping) else None
                if (
                    isinstance(spec, MutableMapping)
                    and doc.get("kind") == "CustomResourceDefinition"
                    and spec.get("group") == gvk.group
                    and (spec.get("names") or {}).get("kind") == gvk.kind
                ):
                    return doc  # type: ignore[no-any-return]
        return None

    def update(self, gvk: GVK, root: dict[str, Any], description: str) -> None:
        crd = self.find(gvk)
        if crd is None:
            path = self.directory / f"{gvk.kind.lower()}.yaml"
            if path in self.docs:
                raise ConfigError(f"{path} exists but holds no CRD of {gvk.kind} in {gvk.group}")
            crd = new_crd(gvk, description)
            self.docs[path], self.texts[path] = [crd], ""
        version = _version(crd, gvk)
        schema = version.setdefault("schema", CommentedMap())
        schema["openAPIV3Schema"] = merge(schema.get("openAPIV3Schema"), root)

    def changes(self) -> list[Change]:
        out = []
        for path, docs in self.docs.items():
            for doc in docs:
                _fold(doc, 0)
            buffer = io.StringIO()
            self.rt.dump_all(docs, buffer)
            if buffer.getvalue() != self.texts[path]:
                out.append(Change(path, self.texts[path], buffer.getvalue()))
            if not self.texts[path]:
                kustomization = _kustomization_with(self.directory / "kustomization.yaml", path.name)
                if kustomization is not None:
                    out.append(kustomization)
        return out


def new_crd(gvk: GVK, description: str) -> CommentedMap:
    """A CRD for a kind that has none yet: namespaced, status subresource, printer columns."""
    many = plural(gvk.kind)
    metadata: dict[str, Any] = {"name": f"{many}.{gvk.group}"}
    if gvk.group == "k8s.io" or gvk.group.endswith((".k8s.io", ".kubernetes.io")):
        # The API server refuses a CRD in these groups unless it says it is not an approved API.
        metadata["annotations"] = {"api-approved.kubernetes.io": "unapproved, experimental-only"}
    crd = CommentedMap(
        apiVersion="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        metadata=metadata,
        spec=CommentedMap(
            group=gvk.group,
            scope="Namespaced",
            names={"kind": gvk.kind, "listKind": f"{gvk.kind}List", "plural": many, "singular": gvk.kind.lower()},
            versions=CommentedSeq(),
        ),
    )
    crd.yaml_set_start_comment(
        f"{gvk.kind}: {description or 'reconciled by its role'}.\n"
        "The schema is written by `hybrid-operator generate crds` from the role's meta/argument_specs.yml and\n"
        "meta/operator.yml; what it does not write (printer columns, short names, pattern, bounds,\n"
        "x-kubernetes-validations) may be edited here and is kept."
    )
    return crd


def _version(crd: CommentedMap, gvk: GVK) -> CommentedMap:
    versions = crd["spec"].setdefault("versions", CommentedSeq())
    for version in versions:
        if version.get("name") == gvk.version:
            return version  # type: ignore[no-any-return]
    version = CommentedMap(name=gvk.version, served=True, storage=not versions, subresources={"status": {}})
    version["additionalPrinterColumns"] = _commented(_new_columns())
    versions.append(version)
    return version


def _new_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Synced", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Successful")].status'},
        {
            "name": "Reason",
            "type": "string",
            "description": "Why the last run failed",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Failure")].reason',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def merge(existing: Any, generated: dict[str, Any]) -> Any:
    """``generated`` laid over ``existing`` (a schema node from the file), keeping what a person added."""
    if not isinstance(existing, MutableMapping):
        return _commented(generated)
    for key in [k for k in existing if k in OWNED - {"description"} and k not in generated]:
        del existing[key]
    for key, value in generated.items():
        if key == "properties":
            old = existing.get("properties")
            props = old if isinstance(old, MutableMapping) else CommentedMap()
            for name in [n for n in props if n not in value]:
                del props[name]
            for name, sub in value.items():
                props[name] = merge(props.get(name), sub)
            existing["properties"] = props
        elif key == "items":
            existing["items"] = merge(existing.get("items"), value)
        elif existing.get(key) != value:
            _set(existing, key, _commented(value))
    if existing.get(crdschema.INT_OR_STRING) is True:  # narrowed by hand: int-or-string has no type
        existing.pop("type", None)
        existing.pop(crdschema.PRESERVE, None)
    return existing


def _set(node: Any, key: str, value: Any) -> None:
    """``node[key] = value``, except that ruamel would keep the old value's scalar style (a ``>-`` block
    without folds) for a new string: the new one is put in its place as given, and ``_fold`` styles it."""
    if key in node and isinstance(node[key], ScalarString) and not isinstance(value, ScalarString):
        position = list(node).index(key)
        del node[key]
        node.insert(position, key, value)
    else:
        node[key] = value


def _commented(value: Any) -> Any:
    if isinstance(value, dict):
        return CommentedMap((k, _commented(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_commented(v) for v in value)
    return value


def _fold(node: Any, indent: int) -> None:
    """Fold long descriptions into ``>-`` blocks that fit the line length at their indentation."""
    if isinstance(node, MutableMapping):
        for key, value in node.items():
            if key == "description" and isinstance(value, str) and not isinstance(value, ScalarString):
                if indent + len("description: ") + len(value) > _LINE:
                    node[key] = _folded(value, max(40, _LINE - indent - 2))
            elif isinstance(value, MutableMapping):
                _fold(value, indent + 2)
            elif isinstance(value, list):
                for item in value:
                    _fold(item, indent + 4)


def _folded(text: str, width: int) -> Any:
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    folded = FoldedScalarString(" ".join(lines))
    positions, at = [], 0
    for line in lines[:-1]:
        at += len(line)
        positions.append(at)
        at += 1
    folded.fold_pos = positions
    return folded


def _kustomization_with(path: Path, resource: str) -> Change | None:
    """The kustomization.yaml beside a new CRD file, listing it too."""
    if not path.is_file():
        return None
    rt = yaml_rt()
    before = path.read_text(encoding="utf-8")
    doc = rt.load(before)
    resources = doc.get("resources")
    if resources is None or not isinstance(resources, list):
        resources = doc["resources"] = CommentedSeq()
    if resource in resources:
        return None
    resources.append(resource)
    buffer = io.StringIO()
    rt.dump(doc, buffer)
    return Change(path, before, buffer.getvalue())


def _has_entries(watches_file: Path) -> bool:
    try:
        return bool(yaml.safe_load(watches_file.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError):
        return True  # let load_watches say what is wrong


def _role_dir(watch: Watch, watches_file: Path, roles_paths: tuple[Path, ...]) -> Path | None:
    """The role's directory: the watch's role, or the only role its playbook runs (None: not found)."""
    if watch.target.role is not None:
        path = Path(watch.target.role)
        return path if path.is_dir() else None  # a collection role (ns.coll.role): not on disk here
    assert watch.target.playbook is not None
    names = set(_playbook_roles(watch.target.playbook))
    if len(names) != 1:
        return None
    (name,) = names
    bases = (*roles_paths, watch.target.playbook.parent / "roles", watches_file.resolve().parent / "roles")
    return next((base / name for base in bases if (base / name).is_dir()), None)


def _playbook_roles(playbook: Path) -> Iterator[str]:
    try:
        plays = yaml.safe_load(playbook.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return
    for play in plays if isinstance(plays, list) else []:
        if not isinstance(play, dict):
            continue
        for role in play.get("roles") or []:
            name = role.get("role") or role.get("name") if isinstance(role, dict) else role
            if isinstance(name, str):
                yield name
        for task in play.get("tasks") or []:
            for action in _ROLE_ACTIONS:
                args = task.get(action) if isinstance(task, dict) else None
                if isinstance(args, dict) and isinstance(args.get("name"), str):
                    yield args["name"]
