"""Assemble operator-sdk's advanced-molecule-operator from ansible-operator-plugins' public source.

Upstream generates the project with the operator-sdk CLI (``hack/generate/samples/ansible/generate.go``,
``GenerateAdvancedMoleculeSample``) and never publishes the result; this script replays what that generator
does, reading every role, playbook and edit from the module's own files, so nothing of the project is kept in
this repository. hack/upstream-testdata.sh calls it; tests/integration/test_upstream_advanced.py runs the
result. Three kinds of content:

- **upstream, as is**: the playbooks and role tasks (Go raw-string constants of ``advanced_molecule.go``,
  applied with the same replace-in-file edits), ``testdata/`` (watches.yaml, ansible.cfg, inventory/,
  plugins/, fixture_collection/, secret.yml, the finalizer playbook, the molecule verify tasks), the
  manager's flag and environment (``updateConfig``) and the Dockerfile's steps (``updateDockerfile``);
- **synthesized** from the scaffold's templates (kubebuilder and the Ansible plugin write these; the CLI is
  not run here): the kinds' empty playbooks and role skeleton, the CRDs, the samples;
- **image layout**: the image's ``HOME=/opt/ansible`` is the assembled directory, so ``/opt/ansible`` in the
  project's files becomes that directory, and the inventory's ``/usr/local/bin/python3`` (upstream's image
  Python, which has the Kubernetes client) becomes the Python given with ``--python``.

``hybrid-operator-run.json`` in the result lists the operator's arguments and environment as the project's
manifests give them, and every synthesized and substituted file.

    python hack/upstream_advanced.py --source MODULE_DIR --dest DIR [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

IMAGE_HOME = "/opt/ansible"
IMAGE_PYTHON = "/usr/local/bin/python3"
GROUP, VERSION = "test.example.com", "v1alpha1"
SAMPLES = Path("hack/generate/samples/ansible")
# What the Ansible plugin's templates write (pkg/plugins/ansible/v1/scaffolds/internal/templates/).
PLAYBOOK = (
    "---\n- hosts: localhost\n  gather_facts: no\n  collections:\n    - kubernetes.core\n    - operator_sdk.util\n"
)
PLAYBOOK_TASKS = "  tasks: []\n"
PLAYBOOK_ROLE = '  tasks:\n    - import_role:\n        name: "{role}"\n'
ROLE_META = (
    "---\ngalaxy_info:\n  author: your name\n  description: your description\n  company: your company (optional)\n"
    "  license: license (GPLv2, CC-BY, etc)\n  min_ansible_version: 2.9\n  galaxy_tags: []\ndependencies: []\n"
    "collections:\n- operator_sdk.util\n- kubernetes.core\n"
)
SAMPLE = (
    "apiVersion: {group}/{version}\nkind: {kind}\nmetadata:\n  labels:\n"
    "    app.kubernetes.io/name: advanced-molecule-operator\n    app.kubernetes.io/managed-by: kustomize\n"
    "  name: {lower}-sample\nspec:\n  # TODO(user): Add fields here\n"
)
CRD = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names:
    kind: {kind}
    listKind: {kind}List
    plural: {plural}
    singular: {lower}
  scope: Namespaced
  versions:
  - name: {version}
    schema:
      openAPIV3Schema:
        description: {kind} is the Schema for the {plural} API
        properties:
          apiVersion:
            type: string
          kind:
            type: string
          metadata:
            type: object
          spec:
            description: Spec defines the desired state of {kind}
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            description: Status defines the observed state of {kind}
            type: object
            x-kubernetes-preserve-unknown-fields: true
        type: object
    served: true
    storage: true
    subresources:
      status: {{}}
"""


class AssemblyError(Exception):
    """The upstream source no longer looks as this script expects: say where, never guess."""


def go_constants(source: str) -> dict[str, str]:
    """Every ``const name = `raw string``` of a Go file (a raw string cannot contain a backtick)."""
    return dict(re.findall(r"const (\w+) = `([^`]*)`", source))


def go_string(literal: str) -> str:
    """A Go interpreted string literal ("...\\n...") as its value."""
    return str(json.loads(literal))


def function_body(source: str, name: str) -> str:
    start = source.find(f"func {name}(")
    if start < 0:
        raise AssemblyError(f"no func {name} in the generator")
    end = source.find("\n}\n", start)
    return source[start:end]


def replace_in_file(path: Path, old: str, new: str) -> None:
    """kubebuilder's ReplaceInFile: the old text must be there."""
    text = path.read_text()
    if old not in text:
        raise AssemblyError(f"{path.name}: the text to replace is not there: {old[:60]!r}")
    path.write_text(text.replace(old, new))


def kinds_of(generate: str) -> tuple[list[str], list[str]]:
    """The kinds created with --generate-playbook only, and those with a role too (InventoryTest)."""
    body = function_body(generate, "GenerateAdvancedMoleculeSample")
    block = re.search(r"kinds := \[\]string\{([^}]*)\}", body)
    with_role = re.findall(r'Kind:\s+"(\w+)"', body)
    if block is None or not with_role:
        raise AssemblyError("no kinds list in GenerateAdvancedMoleculeSample")
    return re.findall(r'"(\w+)"', block.group(1)), with_role


def scaffold(dest: Path, kinds: list[str], with_role: list[str]) -> list[str]:
    """What `operator-sdk init` and `create api` would write for these kinds (only what the tests read)."""
    written = []
    for kind in kinds + with_role:
        lower = kind.lower()
        plural = f"{lower}s"  # flect.Pluralize of these names
        role = kind in with_role
        files = {
            f"playbooks/{lower}.yml": PLAYBOOK + (PLAYBOOK_ROLE.format(role=lower) if role else PLAYBOOK_TASKS),
            f"config/samples/{GROUP.split('.')[0]}_{VERSION}_{lower}.yaml": SAMPLE.format(
                group=GROUP, version=VERSION, kind=kind, lower=lower
            ),
            f"config/crd/bases/{GROUP}_{plural}.yaml": CRD.format(
                group=GROUP, version=VERSION, kind=kind, lower=lower, plural=plural
            ),
        }
        if role:
            for part in ("tasks", "defaults", "handlers", "vars"):
                files[f"roles/{lower}/{part}/main.yml"] = f"---\n# {part} file for {kind}\n"
            files[f"roles/{lower}/meta/main.yml"] = ROLE_META
        for rel, text in files.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_text(text)
            written.append(rel)
    return written


def implement(dest: Path, advanced: str) -> None:
    """ImplementAdvancedMolecule's edits of roles, samples and playbooks, from the generator's own text."""
    consts = go_constants(advanced)
    body = function_body(advanced, "ImplementAdvancedMolecule")
    task = re.search(r'ReplaceInFile\(\s*inventoryRoleTask,\s*("(?:[^"\\]|\\.)*"),\s*(\w+)\)', body)
    if task is None:
        raise AssemblyError("no inventory role edit in ImplementAdvancedMolecule")
    replace_in_file(dest / "roles/inventorytest/tasks/main.yml", go_string(task.group(1)), consts[task.group(2)])
    edits = re.findall(
        r'ReplaceInFile\(\s*filepath\.Join\(sample\.Dir\(\), "config", "samples", "([\w.]+)"\),\s*'
        r'("(?:[^"\\]|\\.)*"|\w+),\s*("(?:[^"\\]|\\.)*"|\w+)\)',
        body,
    )
    if len(edits) != 2:
        raise AssemblyError(f"expected two sample edits in ImplementAdvancedMolecule, found {len(edits)}")
    for name, old, new in edits:
        text = [go_string(v) if v.startswith('"') else consts[v] for v in (old, new)]
        replace_in_file(dest / "config/samples" / name, text[0], text[1])
    playbooks = re.findall(
        r'ReplaceInFile\(\s*filepath\.Join\(dir, "playbooks", "([\w.]+)"\),\s*("(?:[^"\\]|\\.)*"|\w+),\s*(\w+)\)',
        function_body(advanced, "updatePlaybooks"),
    )
    if len(playbooks) < 8:
        raise AssemblyError(f"expected a playbook per kind in updatePlaybooks, found {len(playbooks)}")
    for name, old, new in playbooks:
        replace_in_file(dest / "playbooks" / name, go_string(old) if old.startswith('"') else consts[old], consts[new])


def add_testdata(dest: Path, testdata: Path) -> None:
    """addMocksFromTestdata: the same copies, to the same places."""
    shutil.copy(testdata / "ansible.cfg", dest)
    for tree, target in (
        ("plugins", "plugins"),
        ("fixture_collection", "fixture_collection"),
        ("tasks", "molecule/default/tasks"),
        ("inventory", "inventory"),
    ):
        shutil.copytree(testdata / tree, dest / target, dirs_exist_ok=True)
    shutil.copy(testdata / "watches.yaml", dest)
    shutil.copy(testdata / "secret.yml", dest / "playbooks/secret.yml")
    shutil.copy(testdata / "playbooks/finalizerconcurrencyfinalizer.yml", dest / "playbooks")
    for path in dest.rglob("*"):  # the module cache is read-only, and so are copies of it
        path.chmod(path.stat().st_mode | 0o200)


def dockerfile(dest: Path, advanced: str, collections: Path) -> None:
    """updateDockerfile's RUN steps: the fixture collection built and installed, the vault file written."""
    fragment = go_constants(advanced)["dockerfileFragment"]
    vault = re.search(
        r"echo (\S+) > /opt/ansible/pwd\.yml.*encrypt_string --vault-password-file /opt/ansible/pwd\.yml "
        r"'([^']*)' --name '([^']*)' > /opt/ansible/vars\.yml",
        fragment,
        re.S,
    )
    if vault is None or "ansible-galaxy collection build /tmp/fixture_collection/" not in fragment:
        raise AssemblyError("the Dockerfile fragment no longer builds the collection and the vault file this way")
    password, plaintext, name = vault.groups()
    with tempfile.TemporaryDirectory() as out:
        run("ansible-galaxy", "collection", "build", str(dest / "fixture_collection"), "--output-path", out)
        (tarball,) = Path(out).glob("*.tar.gz")
        run("ansible-galaxy", "collection", "install", str(tarball), "-p", str(collections))
    (dest / "pwd.yml").write_text(f"{password}\n")
    encrypted = run(
        "ansible-vault", "encrypt_string", "--vault-password-file", str(dest / "pwd.yml"), plaintext, "--name", name
    )
    (dest / "vars.yml").write_text(encrypted)


def manager(advanced: str) -> tuple[list[str], dict[str, str]]:
    """updateConfig's manager flag and environment (plus the scaffold's ANSIBLE_GATHERING), as written."""
    consts = go_constants(advanced)
    args = [line.strip()[2:] for line in consts["ansibleVaultArg"].splitlines() if line.strip().startswith("- ")]
    names = re.findall(r"- name: (\w+)", consts["managerEnv"])
    values = [v.strip('"') for v in re.findall(r"value: (.+)", consts["managerEnv"])]
    if not args or len(names) != len(values):
        raise AssemblyError("the manager's flag or environment fragment changed shape")
    return args, {"ANSIBLE_GATHERING": "explicit", **dict(zip(names, values, strict=True))}


def image_layout(dest: Path, python: str) -> list[str]:
    """The image's paths, as they are in the image, pointed at the assembled directory and Python."""
    changed = []
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and "fixture_collection" not in p.parts):
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = text.replace(IMAGE_HOME, str(dest)).replace(IMAGE_PYTHON, python)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(dest)))
    return changed


def run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssemblyError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def assemble(source: Path, dest: Path, python: str) -> dict[str, object]:
    samples = source / SAMPLES
    advanced = (samples / "advanced_molecule.go").read_text()
    kinds, with_role = kinds_of((samples / "generate.go").read_text())
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    synthesized = scaffold(dest, kinds, with_role)
    implement(dest, advanced)
    add_testdata(dest, samples / "testdata")
    collections = dest / ".ansible" / "collections"
    dockerfile(dest, advanced, collections)
    args, env = manager(advanced)
    substituted = image_layout(dest, python)
    env = {k: v.replace(IMAGE_HOME, str(dest)) for k, v in env.items()}
    env["ANSIBLE_CONFIG"] = str(dest / "ansible.cfg")  # the Dockerfile puts it at /etc/ansible/ansible.cfg
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)  # where ansible-galaxy installs it under HOME
    manifest: dict[str, object] = {
        "args": [a.replace(IMAGE_HOME, str(dest)) for a in args],
        "env": env,
        "kinds": kinds + with_role,
        "synthesized": synthesized,
        "substituted": substituted,
    }
    (dest / "hybrid-operator-run.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", type=Path, required=True, help="ansible-operator-plugins' module directory")
    parser.add_argument("--dest", type=Path, required=True, help="the project directory to write (replaced)")
    parser.add_argument("--python", default=sys.executable, help="the Python that stands in for the image's")
    opts = parser.parse_args(argv)
    try:
        assemble(opts.source, opts.dest.resolve(), opts.python)
    except (AssemblyError, OSError, KeyError) as exc:
        print(f"[upstream-advanced] error: {exc}", file=sys.stderr)
        return 1
    print(opts.dest.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
