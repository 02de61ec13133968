"""The extra-vars file: read by Ansible's own loader as exactly the data written, every string still data.

The property tests load what ``inputdir`` writes through ansible-core's ``load_extra_vars`` (the code
``-e @file`` runs) in this process and template the result with its ``Templar``: every string must come
back equal and unrendered, whatever the resource held. Run on every supported minor by the matrix.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hybrid_operator.ansible import extravars, inputdir, reserved
from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.extravars import KNOWN_RESERVED_KEYS, dump, reserved_key_paths

TEMPLATE = "{{ 'hyop' ~ 'rendered' }}"


class AnsibleLoader:
    """ansible-core's own reading of an extra-vars file, and its templating of what it read."""

    def __init__(self, scratch: Path) -> None:
        from ansible import context
        from ansible.utils.vars import load_extra_vars

        self.context, self.load_extra_vars = context, load_extra_vars
        self.saved = context.CLIARGS
        self.path = scratch / "extravars"

    def load(self, text: str) -> tuple[Any, Any]:
        from ansible.module_utils.common.collections import ImmutableDict
        from ansible.parsing.dataloader import DataLoader
        from ansible.template import Templar

        self.path.write_text(text, encoding="utf-8")
        self.context.CLIARGS = ImmutableDict({"extra_vars": ["@" + str(self.path)]})
        self.load_extra_vars.extra_vars = None  # type: ignore[attr-defined]
        loader = DataLoader()
        loader.set_basedir(str(self.path.parent))
        try:
            loaded = self.load_extra_vars(loader)
            return loaded, Templar(loader=loader, variables={}).template(loaded)
        finally:
            self.load_extra_vars.extra_vars = None  # type: ignore[attr-defined]
            self.context.CLIARGS = self.saved


@pytest.fixture(scope="module")
def ansible(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnsibleLoader]:
    yield AnsibleLoader(tmp_path_factory.mktemp("extravars"))


def run_vars(obj: dict[str, Any], *, unsafe: bool) -> dict[str, Any]:
    return inputdir.build_extravars(
        obj, group="g.example.com", kind="Thing", snake_case=False, unsafe=unsafe, watch_vars={}
    )


def test_the_file_is_json_that_no_yaml_parser_reads() -> None:
    text = dump({"a": {"__ansible_unsafe": "{{ x }}"}, "b": [1, None]})
    assert json.loads(text) == {"a": {"__ansible_unsafe": "{{ x }}"}, "b": [1, None]}
    for loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        with pytest.raises(yaml.YAMLError):
            yaml.load(text, Loader=loader)


def test_a_hostile_key_is_refused_or_stays_data(ansible: AnsibleLoader) -> None:
    """2.19 and later: the decoder raises on ``{"__ansible_unsafe": 1}``, and the file is refused whole. 2.18's
    decoder takes it (the 1 comes back as itself), and every string of the resource stays data."""
    variables = run_vars({"spec": {"message": TEMPLATE, "x": {"__ansible_unsafe": 1}}}, unsafe=True)
    try:
        _loaded, templated = ansible.load(dump(variables))
    except Exception as exc:
        assert re.search(r"(?i)yaml|json|tab", str(exc))
        # What the old format did with the same object: read it as YAML, the payload a trusted template.
        _loaded, templated = ansible.load(json.dumps(variables))
        assert "hyoprendered" in json.dumps(templated)
    else:
        assert ansible_version()[:2] < (2, 19), "only 2.18's decoder takes this key"
        assert templated["message"] == TEMPLATE and templated["x"] == 1


def test_text_the_json_decoder_refuses_is_never_read_as_yaml(ansible: AnsibleLoader) -> None:
    """The second defence, whatever makes the decoder raise on a minor: after the tab, the YAML reading fails."""
    yaml_only = "{message: " + json.dumps(TEMPLATE) + "}"  # YAML, not JSON
    _loaded, templated = ansible.load(yaml_only)
    assert templated == {"message": "hyoprendered"}  # what Ansible does with it: YAML, a trusted template
    assert dump({}).startswith("\t")
    with pytest.raises(Exception, match=r"(?i)yaml|json|tab"):
        ansible.load("\t" + yaml_only)


def test_the_probe_objects_load_as_written(ansible: AnsibleLoader) -> None:
    obj = {"metadata": {"name": TEMPLATE}, "spec": extravars.probe(TEMPLATE, hostile=False), "status": {"s": TEMPLATE}}
    loaded, templated = ansible.load(dump(run_vars(obj, unsafe=True)))
    assert loaded == templated == run_vars(obj, unsafe=False)


# Never the rendered marker itself as data: hypothesis draws string constants it finds in the test's source,
# and "hyoprendered" given as data would look rendered.
_strings = st.one_of(
    st.text(max_size=20),
    st.sampled_from([TEMPLATE, "{% if true %}x{% endif %}", "{{", "", "true", "null", "1e3", "\x00\x7f\u2028"]),
    st.builds(lambda a, b: a + TEMPLATE + b, st.text(max_size=5), st.text(max_size=5)),
).filter(lambda text: "hyoprendered" not in text)
_keys = st.text(max_size=10).filter(lambda k: not k.startswith("__ansible_"))
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.dictionaries(st.from_regex(r"[a-z][a-zA-Z0-9]{0,8}", fullmatch=True), _json, max_size=5), status=_json)
def test_any_resource_loads_through_ansible_equal_and_never_rendered(
    ansible: AnsibleLoader, spec: dict[str, Any], status: Any
) -> None:
    obj = {"metadata": {"name": "n", "namespace": "ns"}, "spec": spec, "status": status}
    loaded, templated = ansible.load(dump(run_vars(obj, unsafe=True)))
    expected = run_vars(obj, unsafe=False)
    assert loaded == expected
    assert templated == expected


def reserved_key_case(ansible: AnsibleLoader, value: Any, key: str, bad: Any) -> str:
    """One example of the property below: a resource holding ``{key: bad}`` deep in its spec is refused
    whole, or loads with every string still data. A refusal counts only as the decoder's, for the key: the
    same resource without it must load as written, else the file was unreadable for another reason (a
    broken writer) and the example proves nothing. Returns which it was: "refused" or "loaded"."""
    obj = {"metadata": {"name": "n"}, "spec": {"message": TEMPLATE, "held": [value, {key: bad}]}}
    assert reserved_key_paths(obj) == [f"spec.held[1].{key}"]
    text = dump(run_vars(obj, unsafe=True))  # a writer's failure is a failure, never a refusal
    try:
        _loaded, templated = ansible.load(text)
    except AnsibleError as exc:
        clean = {"metadata": {"name": "n"}, "spec": {"message": TEMPLATE, "held": [value, {}]}}
        loaded, templated = ansible.load(dump(run_vars(clean, unsafe=True)))
        assert loaded == templated == run_vars(clean, unsafe=False), f"refused without the key too: {exc}"
        return "refused"
    assert "hyoprendered" not in json.dumps(templated, default=lambda o: type(o).__name__)  # 2.18: a vault object
    return "loaded"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=_json, key=st.sampled_from(sorted(KNOWN_RESERVED_KEYS)), bad=st.none() | st.integers() | st.lists(_strings)
)
def test_any_resource_with_a_reserved_key_is_refused_or_stays_data(
    ansible: AnsibleLoader, value: Any, key: str, bad: Any
) -> None:
    event(reserved_key_case(ansible, value, key, bad))


def test_the_reserved_key_property_fails_a_writer_ansible_cannot_read(
    ansible: AnsibleLoader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal is no pass when the file could not be read anyway: here every file is cut short."""
    monkeypatch.setattr(sys.modules[__name__], "dump", lambda variables: extravars.dump(variables)[:-1])
    with pytest.raises(AnsibleError):
        reserved_key_case(ansible, 1, "__ansible_unsafe", None)


def test_the_reserved_key_property_fails_the_old_file_format(
    ansible: AnsibleLoader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old format (plain JSON, which Ansible reads as YAML when its decoder refuses a key): 2.19+ renders
    the resource's strings as templates, and the property says so. 2.18's decoder took these keys, so
    nothing was ever read as YAML there."""
    monkeypatch.setattr(sys.modules[__name__], "dump", lambda variables: json.dumps(variables, default=str))
    if ansible_version()[:2] < (2, 19):
        assert reserved_key_case(ansible, 1, "__ansible_unsafe", None) == "loaded"
        return
    with pytest.raises(AssertionError, match="hyoprendered"):
        reserved_key_case(ansible, 1, "__ansible_unsafe", None)


def test_the_start_up_check_passes_on_the_installed_ansible() -> None:
    found = reserved._probe()
    assert found.loading_problem is None and found.final
    assert found.keys >= KNOWN_RESERVED_KEYS


def test_the_start_up_check_fails_the_old_file_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extravars, "dump", lambda variables: json.dumps(variables, default=str))
    found = reserved._probe()
    if ansible_version()[:2] < (2, 19):  # 2.18's decoder never raised on those keys: no YAML reading
        assert found.loading_problem is None and found.keys >= {"__ansible_unsafe", "__ansible_vault"}
    else:
        assert found.loading_problem == "a resource holding a reserved key had its strings rendered as templates"


def test_the_start_up_check_fails_a_file_read_as_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """On every minor: the wrappers read as YAML are plain mappings, not the data written."""
    monkeypatch.setattr(extravars, "dump", lambda variables: yaml.safe_dump(json.loads(json.dumps(variables))))
    found = reserved._probe()
    assert found.loading_problem is not None and "differs from what was written" in found.loading_problem


def test_a_probe_that_cannot_run_is_retried_and_refuses_runs_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reserved.sys, "executable", "/nonexistent/python")
    found = reserved._probe()
    assert not found.final
    assert found.loading_problem and "could not run" in found.loading_problem
