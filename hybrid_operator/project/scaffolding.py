"""``hybrid-operator new DIR`` and ``create api``: a project in this repository's layout, and a kind in it.

Called by ``cli``. ``new`` renders ``templates/new`` (watches.yaml, roles/, playbooks/, deploy/ kustomize,
molecule/default, requirements.yml, Containerfile, Makefile, README, a ``PROJECT`` file with the domain)
into an empty directory. ``create api`` renders ``templates/api`` into a project: a role in the conventions
of ``roles/foo`` (preflight, role-prefixed defaults, ``meta/argument_specs.yml``, ``meta/operator.yml``,
README), a sample, a Molecule check; then adds the watches.yaml entry, the kind's RBAC rules and the sample
to their files, and generates the CRD (``crds``).

Every name a person types is checked here first (a DNS label, an API version, an UpperCamel kind), so no
template is rendered with something that would make a broken file or a spec key the operator refuses.
Templates hold ``__NAME__`` placeholders; a path segment ``dot-x`` becomes ``.x`` (packaging drops
dotfiles).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from hybrid_operator.ansible import naming
from hybrid_operator.errors import ConfigError
from hybrid_operator.project import crds

TEMPLATES = Path(__file__).resolve().parent / "templates"
_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_VERSION = re.compile(r"^v[1-9][0-9]{0,4}((alpha|beta)[1-9][0-9]{0,4})?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{1,62}$")
_PLACEHOLDER = re.compile(r"__[A-Z]+__")


class ScaffoldError(ConfigError):
    """A name or a project the scaffold cannot work with; nothing was written."""


def new_project(directory: Path, domain: str) -> list[Path]:
    """Render a new project into ``directory`` (missing or empty); the files written."""
    name = directory.resolve().name
    if not _LABEL.fullmatch(name):
        raise ScaffoldError(
            f"the project's name comes from its directory, {name!r}: it must be a DNS label (lower-case letters, "
            "digits and '-', starting with a letter, at most 63 characters)"
        )
    _check_domain(domain)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ScaffoldError(f"{directory} exists and is not an empty directory")
    values = {"PROJECT": name, "DOMAIN": domain}
    return _render(TEMPLATES / "new", directory, values, skip=lambda _rel: False)


def create_api(
    project: Path, *, group: str, version: str, kind: str, playbook: bool, reserved: Callable[[], frozenset[str]]
) -> list[Path]:
    """Add a kind to the project in ``project``; the files written or changed."""
    settings = _project_settings(project)
    if not _LABEL.fullmatch(group):
        raise ScaffoldError(f"--group {group!r}: a DNS label (lower-case letters, digits, '-'), e.g. cache")
    if not _VERSION.fullmatch(version):
        raise ScaffoldError(f"--version {version!r}: a Kubernetes API version such as v1, v1alpha1 or v2beta3")
    if not _KIND.fullmatch(kind):
        raise ScaffoldError(f"--kind {kind!r}: UpperCamelCase letters and digits, 2 to 63 characters, e.g. Memcached")
    full_group = f"{group}.{settings['domain']}"
    if len(full_group) > 253 - len(crds.plural(kind)) - 1:
        raise ScaffoldError(f"group {full_group!r} is too long for a CRD name")
    role = kind.lower()
    if (project / "roles" / role).exists():
        raise ScaffoldError(f"{project / 'roles' / role} exists already")
    watches_file = project / "watches.yaml"
    _check_not_watched(watches_file, full_group, version, kind)
    values = {
        "PROJECT": settings["projectName"],
        "DOMAIN": settings["domain"],
        "NAMESPACE": settings["projectName"].replace("-", "_"),
        "KIND": kind,
        "ROLE": role,
        "GROUP": full_group,
        "VERSION": version,
        "OBJVAR": naming.object_var_name(full_group, kind),
        "SAMPLE": f"{group}_{version}_{role}",
    }
    written = _render(
        TEMPLATES / "api", project, values, skip=lambda rel: rel.startswith("playbooks/") and not playbook
    )
    target = f"playbook: playbooks/{role}.yml" if playbook else f"role: {role}"
    entry = (
        f"\n# {kind} ({full_group}/{version}), reconciled by roles/{role}.\n"
        f"- version: {version}\n  group: {full_group}\n  kind: {kind}\n  {target}\n"
    )
    text = watches_file.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^\[\]\s*$", "", text).rstrip("\n") + "\n" + entry
    watches_file.write_text(text, encoding="utf-8")
    written.append(watches_file)
    written += _add_rbac(project / "deploy" / "watch" / "role.yaml", full_group, crds.plural(kind))
    written += _add_resource(project / "deploy" / "samples" / "kustomization.yaml", f"{values['SAMPLE']}.yaml")
    changes = crds.generate(watches_file, reserved=reserved)
    crds.write(changes)
    return written + [c.path for c in changes]


def _render(source: Path, target: Path, values: Mapping[str, str], skip: Callable[[str], bool]) -> list[Path]:
    """Every template under ``source`` into ``target``, placeholders filled; refuses to overwrite a file."""
    plans: list[tuple[Path, str]] = []
    for template in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = template.relative_to(source).as_posix()
        if skip(rel):
            continue
        rel = "/".join("." + part[4:] if part.startswith("dot-") else part for part in rel.split("/"))
        path = target / _fill(rel, values)
        if path.exists():
            raise ScaffoldError(f"{path} exists already; nothing was written")
        plans.append((path, _fill(template.read_text(encoding="utf-8"), values)))
    for path, text in plans:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return [path for path, _ in plans]


def _fill(text: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        text = text.replace(f"__{name}__", value)
    left = _PLACEHOLDER.search(text)
    if left:  # a template names a value this command does not have: a bug, never a half-filled file
        raise ScaffoldError(f"template placeholder {left.group(0)} has no value")
    return text


def _check_domain(domain: str) -> None:
    labels = domain.split(".")
    if len(domain) > 200 or len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ScaffoldError(f"--domain {domain!r}: a DNS name of at least two labels, e.g. example.com")


def _project_settings(project: Path) -> dict[str, str]:
    path = project / "PROJECT"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")[:10000])
    except OSError as exc:
        raise ScaffoldError(f"{project} is not a project made by `hybrid-operator new` (no PROJECT file)") from exc
    except yaml.YAMLError as exc:
        raise ScaffoldError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ScaffoldError(f"{path}: expected projectName and domain")
    name, domain = raw.get("projectName"), raw.get("domain")
    if not isinstance(name, str) or not _LABEL.fullmatch(name):
        raise ScaffoldError(f"{path}: projectName must be a DNS label, got {name!r}")
    if not isinstance(domain, str):
        raise ScaffoldError(f"{path}: domain must be a string, got {domain!r}")
    _check_domain(domain)
    return {"projectName": name, "domain": domain}


def _check_not_watched(watches_file: Path, group: str, version: str, kind: str) -> None:
    try:
        entries = yaml.safe_load(watches_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"cannot read {watches_file}: {exc}") from exc
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and (entry.get("group"), entry.get("version"), entry.get("kind")) == (
            group,
            version,
            kind,
        ):
            raise ScaffoldError(f"{watches_file} already maps {kind} {group}/{version}")


def _add_rbac(path: Path, group: str, plural: str) -> list[Path]:
    """The kind's rules in the watched namespaces' Role: watch and patch it, its status, its finalizers."""
    rules = [
        ([plural], ["get", "list", "watch", "update", "patch"]),
        ([f"{plural}/status"], ["get", "update", "patch"]),
        # An ownerReference with blockOwnerDeletion is only accepted from who may update the finalizers.
        ([f"{plural}/finalizers"], ["update", "patch"]),
    ]

    def edit(doc: CommentedMap) -> None:
        existing = doc.setdefault("rules", CommentedSeq())
        for resources, verbs in rules:
            existing.append(CommentedMap(apiGroups=[group], resources=resources, verbs=verbs))

    return _edit_yaml(path, edit)


def _add_resource(path: Path, resource: str) -> list[Path]:
    def edit(doc: CommentedMap) -> None:
        resources = doc.get("resources")
        if not isinstance(resources, list):
            resources = doc["resources"] = CommentedSeq()
        if resource not in resources:
            resources.append(resource)

    return _edit_yaml(path, edit)


def _edit_yaml(path: Path, edit: Callable[[CommentedMap], None]) -> list[Path]:
    if not path.is_file():
        return []
    rt = crds.yaml_rt()
    doc = rt.load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, CommentedMap):
        raise ScaffoldError(f"{path}: expected a mapping")
    edit(doc)
    buffer = io.StringIO()
    rt.dump(doc, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return [path]
