"""Flags and environment into Config: flag parsing, WATCH_NAMESPACE and the per-kind environment overrides."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
import tempfile
from pathlib import Path

import pytest

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings.config import Config, add_run_flags, per_kind

FOO = GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")


@pytest.fixture(autouse=True)
def _no_flag_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WATCHES_FILE", "KUBECONFIG", "LOG_FORMAT", "LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_flags(parser)
    return parser.parse_args(list(argv))


def config(*argv: str, env: dict[str, str] | None = None) -> Config:
    return Config.from_args(parse(*argv), env=env or {})


def test_defaults() -> None:
    cfg = config()
    assert cfg.watching.watches_file == Path("watches.yaml")
    assert cfg.watching.reconcile_period == 36000.0
    assert cfg.reconciles.max_concurrent_reconciles >= 1
    assert cfg.reconciles.max_concurrent_total == cfg.reconciles.max_concurrent_reconciles
    assert cfg.runs.verbosity == 2
    assert cfg.runs.timeout == 600.0
    assert cfg.runs.max_artifacts_bytes == 1 << 30
    assert cfg.proxy.inject_owner_ref is True
    assert cfg.election.leader_elect is False
    assert cfg.reconciles.graceful_shutdown_timeout == 30.0
    assert cfg.runs.roles_paths == ()
    assert cfg.watching.namespaces == ()


def test_flags_are_parsed() -> None:
    cfg = config(
        "--reconcile-period=1m30s",
        "--max-concurrent-reconciles=3",
        "--max-concurrent-reconciles-total=8",
        "--ansible-roles-path=/a/roles:/b/roles",
        "--ansible-collections-path=/c",
        "--max-artifacts-size=500Mi",
        "--inject-owner-ref=false",
        "--ansible-run-timeout=90s",
        "--leader-elect",
    )
    assert cfg.watching.reconcile_period == 90.0
    assert cfg.reconciles.max_concurrent_reconciles == 3
    assert cfg.reconciles.max_concurrent_total == 8
    assert cfg.runs.roles_paths == (Path("/a/roles"), Path("/b/roles"))
    assert cfg.runs.collections_paths == (Path("/c"),)
    assert cfg.runs.max_artifacts_bytes == 500 << 20
    assert cfg.proxy.inject_owner_ref is False
    assert cfg.runs.timeout == 90.0
    assert cfg.election.leader_elect is True


@pytest.mark.parametrize(
    ("argv", "seconds"),
    [
        ((), 120.0),  # well below the run's own 10 minutes, by default
        (("--ansible-run-timeout=90s",), 90.0),  # never longer than the run
        (("--ansible-run-timeout=90s", "--proxy-stream-timeout=30s"), 30.0),
        (("--ansible-run-timeout=90s", "--proxy-stream-timeout=0"), 90.0),
        (("--ansible-run-timeout=0",), 120.0),
        (("--ansible-run-timeout=0", "--proxy-stream-timeout=0"), math.inf),  # streams end with their run only
    ],
)
def test_a_runs_requests_last_two_minutes_at_most_unless_told(argv: tuple[str, ...], seconds: float) -> None:
    assert config(*argv).proxy.stream_timeout == seconds


@pytest.mark.parametrize(("text", "size"), [("1024", 1024), ("2Gi", 2 << 30), ("10K", 10 << 10), ("3MB", 3 << 20)])
def test_sizes(text: str, size: int) -> None:
    assert config(f"--max-artifacts-size={text}").runs.max_artifacts_bytes == size


@pytest.mark.parametrize(
    "argv",
    [
        ["--reconcile-period=soon"],
        ["--reconcile-period=100ms"],
        ["--reconcile-period=9000h"],
        ["--max-concurrent-reconciles=0"],
        ["--max-concurrent-reconciles=many"],
        ["--max-artifacts-size=lots"],
        ["--inject-owner-ref=maybe"],
        ["--ansible-log-events=all"],
    ],
)
def test_bad_flags_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)
    assert argv[0].split("=")[0] in capsys.readouterr().err


def test_verbosity_out_of_range() -> None:
    with pytest.raises(ConfigError, match="--ansible-verbosity must be 0-7"):
        config("--ansible-verbosity=9")


def test_watch_namespace_is_a_comma_list() -> None:
    assert config(env={"WATCH_NAMESPACE": "team-a, team-b,,"}).watching.namespaces == ("team-a", "team-b")
    assert config(env={"WATCH_NAMESPACE": ""}).watching.namespaces == ()


@pytest.mark.parametrize(
    ("gvk", "name"),
    [
        (FOO, "MAX_CONCURRENT_RECONCILES_FOO_SAMPLECONTROLLER_K8S_IO"),
        (
            GVK("cache.example.com", "v1alpha1", "Memcached"),
            "MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM",
        ),
        (GVK("my-group.example.com", "v1", "Bar"), "MAX_CONCURRENT_RECONCILES_BAR_MY_GROUP_EXAMPLE_COM"),
        (GVK("", "v1", "ConfigMap"), "MAX_CONCURRENT_RECONCILES_CONFIGMAP"),
    ],
)
def test_per_kind_env_name(gvk: GVK, name: str) -> None:
    assert per_kind("MAX_CONCURRENT_RECONCILES", gvk, 1, env={name: "4"}) == 4
    assert per_kind("MAX_CONCURRENT_RECONCILES", gvk, 1, env={}) == 1


def test_concurrency_and_verbosity_per_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config("--max-concurrent-reconciles=2", "--ansible-verbosity=1")
    monkeypatch.delenv("MAX_CONCURRENT_RECONCILES_FOO_SAMPLECONTROLLER_K8S_IO", raising=False)
    monkeypatch.delenv("ANSIBLE_VERBOSITY_FOO_SAMPLECONTROLLER_K8S_IO", raising=False)
    assert cfg.reconciles.concurrency(FOO) == 2
    assert cfg.runs.verbosity_of(FOO) == 1
    monkeypatch.setenv("MAX_CONCURRENT_RECONCILES_FOO_SAMPLECONTROLLER_K8S_IO", "6")
    monkeypatch.setenv("ANSIBLE_VERBOSITY_FOO_SAMPLECONTROLLER_K8S_IO", "4")
    assert cfg.reconciles.concurrency(FOO) == 6
    assert cfg.runs.verbosity_of(FOO) == 4
    monkeypatch.setenv("MAX_CONCURRENT_RECONCILES_FOO_SAMPLECONTROLLER_K8S_IO", "0")
    assert cfg.reconciles.concurrency(FOO) == 1  # never zero workers for a kind


@pytest.mark.parametrize(("raw", "problem"), [("lots", "whole number"), ("-1", "negative")])
def test_per_kind_bad_value_names_the_variable(raw: str, problem: str) -> None:
    name = "MAX_CONCURRENT_RECONCILES_FOO_SAMPLECONTROLLER_K8S_IO"
    with pytest.raises(ConfigError, match=f"{name} must .*{problem}"):
        per_kind("MAX_CONCURRENT_RECONCILES", FOO, 1, env={name: raw})


def test_the_default_artifacts_dir_is_per_user() -> None:
    """A shared default would be the same dir for every user: whoever made it first would own the runs."""
    expected = Path(tempfile.gettempdir()) / f"hybrid-operator-{os.geteuid()}" / "runner"
    assert config().runs.artifacts_dir == expected


# An operator-sdk project's manager Deployment, unchanged: config/manager/manager.yaml's args with
# config/default/manager_metrics_patch.yaml's three flags put in front, as kustomize renders them.
UPSTREAM_SCAFFOLD_ARGS = [
    "--metrics-require-rbac",
    "--metrics-secure",
    "--metrics-bind-address=:8443",
    "--leader-elect",
    "--leader-election-id=memcached-molecule-operator",
    "--health-probe-bind-address=:6789",
]


def test_an_upstream_scaffold_deployment_parses() -> None:
    cfg = config(*UPSTREAM_SCAFFOLD_ARGS)
    serving = cfg.serving
    assert (serving.metrics_require_rbac, serving.metrics_secure, cfg.election.leader_elect) == (True, True, True)
    assert cfg.serving.metrics_address == ":8443"
    assert cfg.election.lease_name == "memcached-molecule-operator"
    assert cfg.serving.health_address == ":6789"


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        # operator-sdk's manifests quote the value inside the argument: no shell removes those quotes
        ("'--vault-password-file /opt/ansible/pwd.yml'", "--vault-password-file /opt/ansible/pwd.yml"),
        ("--vault-password-file /opt/ansible/pwd.yml", "--vault-password-file /opt/ansible/pwd.yml"),
        ("''--check''", "'--check'"),  # one pair only, as upstream
        ("'-e x=1' '-e y=2'", "-e x=1' '-e y=2"),  # first and last character, whatever lies between
        ("'--check", "'--check"),
        ("'", "'"),
        ('"--check"', '"--check"'),  # double quotes are ansible-runner's shlex to read
        ("", ""),
    ],
)
def test_ansible_args_lose_one_pair_of_surrounding_single_quotes(raw: str, parsed: str) -> None:
    assert config(f"--ansible-args={raw}").runs.ansible_args == parsed


def test_quoted_ansible_args_split_into_ansible_playbook_arguments() -> None:
    cfg = config("--ansible-args='--vault-password-file /opt/ansible/pwd.yml'")
    split = shlex.split(cfg.runs.ansible_args)  # what ansible-runner does with its cmdline
    assert split == ["--vault-password-file", "/opt/ansible/pwd.yml"]


@pytest.mark.parametrize(
    ("argv", "value"),
    [([], False), (["--leader-elect"], True), (["--leader-elect=true"], True), (["--leader-elect=false"], False)],
)
def test_boolean_flags_read_as_go_reads_them(argv: list[str], value: bool) -> None:
    assert config(*argv).election.leader_elect is value
    flipped = [a.replace("leader-elect", "metrics-secure") for a in argv]
    assert config(*flipped).serving.metrics_secure is value


def test_inject_owner_ref_and_module_server_also_take_a_bare_flag() -> None:
    cfg = config("--inject-owner-ref", "--module-server")
    assert (cfg.proxy.inject_owner_ref, cfg.runs.module_server) == (True, True)


def test_metrics_are_plain_http_unless_asked() -> None:
    serving = config().serving
    assert (serving.metrics_secure, serving.metrics_require_rbac, serving.metrics_cert_dir) == (False, False, None)
    serving = config(
        "--metrics-secure", "--metrics-cert-path=/certs", "--metrics-cert-name=c.pem", "--metrics-cert-key=k.pem"
    ).serving
    assert (serving.metrics_cert_dir, serving.metrics_cert_name, serving.metrics_key_name) == (
        Path("/certs"),
        "c.pem",
        "k.pem",
    )


def test_rbac_without_tls_is_refused() -> None:
    """A scraper's bearer token would cross the network in clear text."""
    with pytest.raises(ConfigError, match="--metrics-require-rbac needs --metrics-secure"):
        config("--metrics-require-rbac")


@pytest.mark.parametrize(
    ("argv", "fmt", "level"),
    [
        (["--zap-log-level=debug"], "text", "DEBUG"),
        (["--zap-log-level=error"], "text", "ERROR"),
        (["--zap-log-level", "3"], "text", "DEBUG"),
        (["--zap-log-level=0"], "text", "INFO"),
        (["--zap-encoder=json"], "json", "INFO"),
        (["--zap-encoder=console", "--log-format=json"], "json", "INFO"),  # the last one given wins
        (["--log-level=WARNING", "--zap-log-level=info"], "text", "INFO"),
    ],
)
def test_zap_flags_map_onto_ours(argv: list[str], fmt: str, level: str) -> None:
    args = parse(*argv)
    assert (args.log_format, args.log_level) == (fmt, level)


def test_other_zap_flags_are_accepted_and_named_for_a_warning() -> None:
    args = parse("--zap-devel", "--zap-stacktrace-level=error", "--zap-time-encoding=iso8601")
    assert args.ignored_flags == ["--zap-devel", "--zap-stacktrace-level", "--zap-time-encoding"]
    assert not hasattr(parse(), "ignored_flags")


@pytest.mark.parametrize("argv", [["--zap-log-level=loud"], ["--zap-encoder=xml"], ["--metrics-secure=maybe"]])
def test_bad_upstream_flag_values_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)
    assert argv[0].split("=")[0] in capsys.readouterr().err


def test_sharding_is_off_by_default_and_its_lease_defaults_to_upstreams_15s() -> None:
    cfg = config()
    assert (cfg.election.sharding, cfg.election.sharding_lease_duration) == (False, 15.0)
    cfg = config("--sharding", "--sharding-lease-duration=3s")
    assert (cfg.election.sharding, cfg.election.sharding_lease_duration) == (True, 3.0)


def test_sharding_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_OPERATOR_SHARDING", "true")
    assert config().election.sharding is True
    assert config("--sharding=false").election.sharding is False


def test_sharding_and_leader_election_exclude_each_other() -> None:
    with pytest.raises(ConfigError, match="--sharding and --leader-elect exclude each other"):
        config("--sharding", "--leader-elect")


def test_a_sharding_lease_under_a_second_is_refused() -> None:
    with pytest.raises(ConfigError, match="--sharding-lease-duration"):
        config("--sharding", "--sharding-lease-duration=500ms")


def test_ansible_inventory_names_the_runs_inventory(tmp_path: Path) -> None:
    assert config().runs.inventory is None
    (tmp_path / "inventory").mkdir()
    assert config(env={"ANSIBLE_INVENTORY": str(tmp_path / "inventory")}).runs.inventory == tmp_path / "inventory"
    (tmp_path / "hosts").write_text("localhost\n")
    assert config(env={"ANSIBLE_INVENTORY": str(tmp_path / "hosts")}).runs.inventory == tmp_path / "hosts"


@pytest.mark.parametrize("raw", ["/no/such/inventory", "/etc/ansible/hosts,/tmp/other"])
def test_an_ansible_inventory_that_is_no_path_stops_the_operator(raw: str) -> None:
    with pytest.raises(ConfigError, match="ANSIBLE_INVENTORY"):
        config(env={"ANSIBLE_INVENTORY": raw})


def test_the_bind_addresses_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """So `make run` of a scaffolded project (a plain `hybrid-operator run`) can avoid the default ports, as the
    docs' tutorial test does when it runs the page's commands as written."""
    assert (config().serving.metrics_address, config().serving.health_address) == (":8443", ":6789")
    monkeypatch.setenv("HYBRID_OPERATOR_METRICS_BIND_ADDRESS", "127.0.0.1:0")
    monkeypatch.setenv("HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS", "127.0.0.1:7000")
    assert (config().serving.metrics_address, config().serving.health_address) == ("127.0.0.1:0", "127.0.0.1:7000")
    assert config("--health-probe-bind-address=:6789").serving.health_address == ":6789"  # a flag wins


@pytest.mark.parametrize(
    ("argv", "watch", "confined"),
    [
        ((), "a,b", True),  # auto: an operator serving a list of tenants' namespaces confines each run
        ((), "a", False),  # auto: one namespace, as operator-sdk's test projects run
        ((), "", False),  # auto: all namespaces, as Kiali's operator runs by default
        (("--run-namespaces=own",), "", True),
        (("--run-namespaces=own",), "a", True),
        (("--run-namespaces=any",), "a,b", False),
    ],
)
def test_run_namespaces_confines_runs_where_the_operator_serves_several(
    argv: tuple[str, ...], watch: str, confined: bool
) -> None:
    assert config(*argv, env={"WATCH_NAMESPACE": watch}).proxy.confine_runs is confined


def test_run_namespaces_takes_only_its_three_values() -> None:
    with pytest.raises(SystemExit):
        config("--run-namespaces=all")


def test_help_shows_the_flags_under_configs_groups() -> None:
    parser = argparse.ArgumentParser()
    add_run_flags(parser)
    groups = {group.title: group for group in parser._action_groups if group.title in GROUPS_OF_CONFIG}
    assert list(groups) == GROUPS_OF_CONFIG
    flags_of = {title: {o for a in group._group_actions for o in a.option_strings} for title, group in groups.items()}
    assert {"--watches-file", "--reconcile-period"} <= flags_of["watching"]
    assert {"--max-concurrent-reconciles", "--graceful-shutdown-timeout"} <= flags_of["reconciles"]
    assert {"--executor", "--ansible-run-timeout", "--runner-artifacts-dir"} <= flags_of["runs"]
    assert {"--inject-owner-ref", "--proxy-stream-timeout"} <= flags_of["proxy"]
    assert {"--leader-elect", "--sharding"} <= flags_of["election"]
    assert {"--metrics-bind-address", "--health-probe-bind-address"} <= flags_of["serving"]
    assert {"--log-format", "--zap-log-level"} <= flags_of["logging"]
    text = parser.format_help()
    assert all(f"\n{title}:\n" in text for title in GROUPS_OF_CONFIG)


GROUPS_OF_CONFIG = [field.name for field in dataclasses.fields(Config)]
