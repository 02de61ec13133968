"""watches.yaml loading: every field of a valid file; for a bad one, a ConfigError naming entry and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings.watches import Finalizer, Target, Watch, load_watches

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
WATCHES = FIXTURES / "watches"
ROLES = FIXTURES / "roles"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")


def load(name: str, env: dict[str, str] | None = None) -> list[Watch]:
    return load_watches(WATCHES / name, roles_paths=[ROLES], env=env or {})


# -- valid files ---------------------------------------------------------------------------------------


def test_all_fields_are_read() -> None:
    [watch] = load("valid-all-fields.yaml")
    assert watch.gvk == MEMCACHED
    assert watch.target == Target(role=str(ROLES / "memcached"))
    assert watch.vars == {"memcached_image": "docker.io/library/memcached:1.6", "memcached_port": 11211}
    assert watch.reconcile_period == 90.0
    assert watch.manage_status is False
    assert watch.watch_dependent_resources is False
    assert watch.watch_cluster_scoped_resources is True
    assert watch.watch_annotations_changes is True
    assert watch.watch_dependent_status_changes is True
    assert watch.skip_converged_at_start is True
    assert watch.snake_case_parameters is False
    assert watch.mark_unsafe is False
    assert watch.max_runner_artifacts == 5
    assert watch.finalizer == Finalizer(
        name="cache.example.com/cleanup",
        target=Target(role=str(ROLES / "memcached_cleanup")),
        vars={"memcached_state": "absent"},
    )
    assert watch.selector == "tier=cache,environment in (production,staging),!legacy"
    assert watch.blacklist == frozenset({GVK("apps", "v1", "ReplicaSet"), GVK("", "v1", "Secret")})


def test_defaults_when_only_the_required_fields_are_given() -> None:
    [watch] = load("valid-collection-role.yaml")
    assert watch.vars == {}
    assert watch.reconcile_period is None  # the --reconcile-period flag decides
    assert watch.manage_status is True
    assert watch.watch_dependent_resources is True
    assert watch.watch_cluster_scoped_resources is False
    assert watch.watch_annotations_changes is False
    assert watch.watch_dependent_status_changes is False
    assert watch.skip_converged_at_start is False
    assert watch.snake_case_parameters is True
    assert watch.mark_unsafe is True
    assert watch.max_runner_artifacts == 20
    assert watch.finalizer is None
    assert watch.selector == ""
    assert watch.blacklist == frozenset()


def test_collection_fqcn_role_is_left_for_ansible_to_resolve() -> None:
    [watch] = load("valid-collection-role.yaml")
    assert watch.target == Target(role="example.cache.memcached")
    assert watch.target.describe() == "role example.cache.memcached"


def test_env_references_are_expanded_and_unset_ones_stay() -> None:
    env = {"WATCH_VERSION": "v1beta1", "MEMCACHED_PERIOD": "30s", "MEMCACHED_IMAGE": "memcached:1.6"}
    [watch] = load("valid-env-expansion.yaml", env)
    assert watch.gvk == GVK("cache.example.com", "v1beta1", "Memcached")
    assert watch.reconcile_period == 30.0
    assert watch.vars == {"memcached_image": "memcached:1.6", "memcached_note": "${NOT_SET_ANYWHERE}"}


def test_playbook_wins_over_role() -> None:
    [watch] = load("valid-playbook-and-role.yaml")
    assert watch.target == Target(playbook=WATCHES / "playbooks" / "memcached.yml")
    assert watch.target.role is None


def test_gvk_strings() -> None:
    assert MEMCACHED.api_version == "cache.example.com/v1alpha1"
    assert str(MEMCACHED) == "Memcached.v1alpha1.cache.example.com"
    assert GVK("", "v1", "ConfigMap").api_version == "v1"
    assert str(GVK("", "v1", "ConfigMap")) == "ConfigMap.v1"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read watches file"):
        load_watches(tmp_path / "watches.yaml", env={})


# -- invalid files: one fixture per problem ------------------------------------------------------------

ENTRY0 = "entry 0 (cache.example.com/v1alpha1/Memcached)"

INVALID: dict[str, list[str]] = {
    "invalid-missing-kind.yaml": ["entry 1 (cache.example.com/v1alpha1/?)", "field 'kind'", "is required"],
    "invalid-missing-version.yaml": [
        "entry 0 (cache.example.com/?/Memcached)",
        "field 'version'",
        "required",
    ],
    "invalid-no-role-or-playbook.yaml": [ENTRY0, "field 'role'", "one of 'role' or 'playbook'"],
    "invalid-role-not-found.yaml": [ENTRY0, "field 'role'", "'no_such_role_anywhere' not found"],
    "invalid-playbook-not-found.yaml": [ENTRY0, "field 'playbook'", "playbooks/no-such-playbook.yml"],
    "invalid-duplicate-gvk.yaml": [
        "entry 1 (cache.example.com/v1alpha1/Memcached)",
        "duplicate group/version/kind",
        "entry 0",
    ],
    "invalid-unknown-field.yaml": [ENTRY0, "field 'reconcilePeriode'", "unknown field"],
    "invalid-reconcile-period.yaml": [ENTRY0, "field 'reconcilePeriod'", "'five minutes'"],
    "invalid-max-runner-artifacts.yaml": [ENTRY0, "field 'maxRunnerArtifacts'", ">= 1, got 0"],
    "invalid-bool-field.yaml": [ENTRY0, "field 'watchDependentResources'", "true or false, got 'false'"],
    "invalid-finalizer-without-name.yaml": [ENTRY0, "field 'finalizer.name'", "required"],
    "invalid-finalizer-nothing-to-run.yaml": [ENTRY0, "field 'finalizer'", "a role, a playbook or vars"],
    "invalid-selector-operator.yaml": [ENTRY0, "field 'selector.matchExpressions[0]'", "NotIn"],
    "invalid-blacklist-without-kind.yaml": [ENTRY0, "field 'blacklist[0]'", "kind"],
    "invalid-not-a-list.yaml": ["invalid-not-a-list.yaml", "expected a list of entries, found dict"],
    "invalid-empty.yaml": ["invalid-empty.yaml", "empty watches file"],
    "invalid-yaml-syntax.yaml": ["invalid-yaml-syntax.yaml", "not valid YAML", "line 5"],
    # hostile or subtly wrong input
    "invalid-alias-bomb.yaml": [ENTRY0, "field 'vars.lol1'", "anchors and aliases", "are not allowed", "line 8"],
    "invalid-duplicate-key.yaml": [ENTRY0, "field 'reconcilePeriod'", "duplicate key 'reconcilePeriod'", "line 8"],
    "invalid-selector-label-value.yaml": [ENTRY0, "field 'selector.matchLabels.tier'", "label value 'b,c!=d'"],
    "invalid-version.yaml": ["entry 0", "field 'version'", "'v1/../..'", "like v1 or v1alpha1"],
    "invalid-kind.yaml": ["entry 0", "field 'kind'", "'Mem cached'", "starting with a letter"],
    "invalid-group.yaml": ["entry 0", "field 'group'", "'Cache.Example.com'", "lower-case DNS name"],
    "invalid-reconcile-period-too-short.yaml": [ENTRY0, "field 'reconcilePeriod'", "0 (never) or from 1s to 8760h"],
    "invalid-reconcile-period-infinite.yaml": [ENTRY0, "field 'reconcilePeriod'", "not a finite duration"],
    "invalid-finalizer-name.yaml": [ENTRY0, "field 'finalizer.name'", "'example.com/clean up'", "qualified name"],
    "invalid-tag.yaml": [ENTRY0, "field 'vars.payload'", "tag tag:yaml.org,2002:binary is not allowed"],
    "invalid-playbook-not-a-playbook.yaml": [
        ENTRY0,
        "field 'playbook'",
        "not an Ansible playbook: not a list of plays",
    ],
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_file_names_entry_and_field(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(name)
    message = str(caught.value)
    for fragment in INVALID[name]:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_every_invalid_fixture_has_a_case() -> None:
    assert {p.name for p in WATCHES.glob("invalid-*.yaml")} == set(INVALID)


# -- cases built on the fly ----------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "watches.yaml"
    path.write_text("---\n" + text, encoding="utf-8")
    return path


def test_role_found_next_to_the_watches_file(tmp_path: Path) -> None:
    (tmp_path / "roles" / "local_role" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "local_role" / "tasks" / "main.yml").write_text("---\n[]\n", encoding="utf-8")
    path = write(tmp_path, "- {version: v1, group: example.com, kind: Foo, role: local_role}\n")
    [watch] = load_watches(path, env={})
    assert watch.target == Target(role=str((tmp_path / "roles" / "local_role").resolve()))


def test_absolute_role_path_must_exist(tmp_path: Path) -> None:
    path = write(tmp_path, f"- {{version: v1, kind: Foo, role: {tmp_path / 'nowhere'}}}\n")
    with pytest.raises(ConfigError, match=r"entry 0 \(\?/v1/Foo\): field 'role': role directory not found"):
        load_watches(path, env={})


def test_reconcile_period_as_a_bare_number_is_seconds(tmp_path: Path) -> None:
    path = write(tmp_path, "- {version: v1, kind: Foo, role: memcached, reconcilePeriod: 45}\n")
    [watch] = load_watches(path, roles_paths=[ROLES], env={})
    assert watch.reconcile_period == 45.0


def test_finalizer_with_only_vars_runs_the_watch_target(tmp_path: Path) -> None:
    text = "- version: v1\n  kind: Foo\n  role: memcached\n  finalizer: {name: example.com/x, vars: {gone: true}}\n"
    [watch] = load_watches(write(tmp_path, text), roles_paths=[ROLES], env={})
    assert watch.finalizer == Finalizer(name="example.com/x", target=None, vars={"gone": True})


def test_several_unknown_keys_of_mixed_types_are_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "- version: v1\n  kind: Foo\n  role: memcached\n  on: 1\n  foo: 2\n")
    with pytest.raises(ConfigError, match="unknown field"):
        load_watches(path, roles_paths=[ROLES], env={})


def test_blacklist_entry_with_empty_group_is_the_core_group(tmp_path: Path) -> None:
    text = (
        "- version: v1\n  kind: Foo\n  role: memcached\n  blacklist:\n    - {group: null, version: v1, kind: Secret}\n"
    )
    [watch] = load_watches(write(tmp_path, text), roles_paths=[ROLES], env={})
    assert watch.blacklist == frozenset({GVK("", "v1", "Secret")})


def test_run_namespaces_are_namespace_names(tmp_path: Path) -> None:
    text = "- version: v1\n  kind: Foo\n  role: memcached\n  runNamespaces: [ops, shared-config]\n"
    [watch] = load_watches(write(tmp_path, text), roles_paths=[ROLES], env={})
    assert watch.run_namespaces == frozenset({"ops", "shared-config"})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("ops", "must be a list"),
        ("[Ops]", "runNamespaces[0]': must be a lower-case DNS label"),
        ("['../b']", "runNamespaces[0]': must be a lower-case DNS label"),
        ("[1]", "runNamespaces[0]': must be a string"),
        ("[" + ", ".join(f"n{i}" for i in range(65)) + "]", "at most 64"),
        ("['" + "a" * 64 + "']", "longer than 63"),
    ],
)
def test_bad_run_namespaces_are_a_config_error_naming_the_field(tmp_path: Path, value: str, problem: str) -> None:
    path = write(tmp_path, f"- version: v1\n  kind: Foo\n  role: memcached\n  runNamespaces: {value}\n")
    with pytest.raises(ConfigError, match="runNamespaces") as refused:
        load_watches(path, roles_paths=[ROLES], env={})
    assert problem in str(refused.value)
