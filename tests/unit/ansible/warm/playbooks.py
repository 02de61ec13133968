"""A real ``ansible-playbook`` run in a new interpreter, with or without a zygote hook, for the differential
tests of the hooks that change what a playbook run does (``test_factcache``, ``test_templatelookup``).

The child runs the playbook through ``PlaybookCLI`` as a run does, with the fact cache ansible-runner
configures (``jsonfile`` in a directory of the run), and reports the playbook's output, the fact cache files
and what the test asked it to count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.ansible.warm.speedups import in_child

_CHILD = r"""
import json, os, sys
workdir, mode, install = sys.argv[1], sys.argv[2], sys.argv[3]
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader()
from hybrid_operator.ansible import compat
counts = {}
exec(open(os.path.join(workdir, "count.py")).read())  # the test's install_counters, finish_counters
if mode == "hooked":
    assert getattr(compat, install + "_problems")("UNSET_SWITCH") == [], install
    getattr(compat, {"unchanged_fact_write": "skip_unchanged_fact_writes",
                     "template_lookup": "copy_template_variables_shallow",
                     "stack_walk": "walk_stack_lazily"}[install])()
install_counters(counts, workdir)
from ansible.cli.playbook import PlaybookCLI
out = os.open(os.path.join(workdir, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
saved = os.dup(1)
sys.stdout.flush()
os.dup2(out, 1)
try:
    rc = PlaybookCLI(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e",
                      "ansible_python_interpreter=" + sys.executable, os.path.join(workdir, "play.yml")]).run()
finally:
    sys.stdout.flush()
    os.dup2(saved, 1)
finish_counters(counts, workdir)
cache = os.path.join(workdir, "fact_cache")
names = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
files = {name: open(os.path.join(cache, name)).read() for name in names}
stdout = open(os.path.join(workdir, "stdout")).read()
print(json.dumps({"rc": rc, "stdout": stdout, "fact_cache": files, "counts": counts}))
"""


def run_playbook(workdir: Path, mode: str, install: str, files: dict[str, str], counters: str) -> dict[str, Any]:
    """Run ``files["play.yml"]`` (and the other ``files`` beside it) in ``workdir`` in a new interpreter,
    ``mode`` "plain" or "hooked" (with the hook whose problems function is ``<install>_problems``);
    ``counters`` defines ``install_counters(counts, workdir)``, called after the hook went in, and
    ``finish_counters(counts, workdir)``, after the playbook (tasks run in forks of the child: a counter
    of what they do writes to a file in ``workdir``)."""
    workdir.mkdir(parents=True)
    for name, text in {**files, "count.py": counters}.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)
    env = {
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CACHE_PLUGIN": "jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(workdir / "fact_cache"),
        "ANSIBLE_LOCAL_TEMP": str(workdir / "tmp"),
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
    }
    out: dict[str, Any] = in_child(_CHILD, str(workdir), mode, install, env=env)
    out["stdout"] = out["stdout"].replace(str(workdir), "<workdir>")
    out["fact_cache"] = {name: text.replace(str(workdir), "<workdir>") for name, text in out["fact_cache"].items()}
    return out
