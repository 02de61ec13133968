"""The kubernetes client hooks (``kube.runclient``) against the client without them, in the same process.

Each test installs the hooks and takes them out again after (``hooked``). What is compared: the kubeconfig a
caller gets (equal, its own copy, the same error for a file that does not parse), and the error the dynamic
client raises for each status (the same class, fields, traceback text and ``str``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.rest import ApiException
from kubernetes.config import kube_config
from kubernetes.dynamic import client, exceptions

from hybrid_operator.kube import runclient

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: tenant-a}
current-context: ctx
anchored: &a {x: [1, 2]}
again: *a
"""


@contextlib.contextmanager
def installed() -> Iterator[Any]:
    """The hooks installed in this process, everything put back after; yields the unhooked api_exception."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(runclient, "_installed", [])
        monkeypatch.setattr(kube_config, "yaml", kube_config.yaml)
        monkeypatch.setattr(exceptions, "api_exception", exceptions.api_exception)
        monkeypatch.setattr(client, "api_exception", client.api_exception)
        monkeypatch.setattr(exceptions.DynamicApiError, "original_traceback", None, raising=False)
        original = exceptions.api_exception
        assert runclient.install() == []
        yield original


@pytest.fixture
def hooked() -> Iterator[Any]:
    with installed() as original:
        yield original


def test_the_hooks_fit_the_installed_client() -> None:
    assert runclient.hook_problems() == []


def test_a_kubeconfig_parsed_once_gives_each_caller_its_own_equal_copy(hooked: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    expected = yaml.safe_load(KUBECONFIG)
    first = kube_config.KubeConfigMerger(str(path))
    assert first.config_files[str(path)] == expected
    first.config_files[str(path)]["users"][0]["user"]["token"] = "changed by the first caller"
    second = kube_config.KubeConfigMerger(str(path))
    assert second.config_files[str(path)] == expected
    again = second.config_files[str(path)]
    assert again["anchored"] is again["again"]  # an anchor's aliases stay one object, as a parse gives them
    assert second.config.value["current-context"] == "ctx"


def test_another_text_is_parsed_again(hooked: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    kube_config.KubeConfigMerger(str(path))
    path.write_text(KUBECONFIG.replace("tenant-a", "tenant-b"))
    merged = kube_config.KubeConfigMerger(str(path))
    assert merged.config_files[str(path)]["contexts"][0]["context"]["namespace"] == "tenant-b"


def test_a_kubeconfig_that_does_not_parse_fails_as_without_the_hook(hooked: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: [\n  - {name: c\n")
    with pytest.raises(yaml.YAMLError) as unhooked, path.open() as f:
        yaml.safe_load(f)
    for _ in range(2):  # the failure is not remembered either
        with pytest.raises(yaml.YAMLError) as got:
            kube_config.KubeConfigMerger(str(path))
        assert str(got.value) == str(unhooked.value) and str(path) in str(got.value)


def test_an_empty_kubeconfig_is_refused_as_without_the_hook(hooked: Any, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("")
    for _ in range(2):
        with pytest.raises(kube_config.ConfigException, match="file is empty"):
            kube_config.KubeConfigMerger(str(path))


def _raise_api_error(status: int) -> None:
    raise ApiException(status=status, reason="Reason")


def _both(original: Any, status: int) -> tuple[Any, Any]:
    """The error of each ``api_exception`` for one ``ApiException``, made in the same ``except`` block."""
    try:
        _raise_api_error(status)
    except ApiException as exc:
        exc.body = '{"kind": "Status", "message": "not there"}'
        exc.headers = {"Content-Type": "application/json"}
        return original(exc), client.api_exception(exc)
    raise AssertionError("not raised")


@settings(max_examples=60, deadline=None)
@given(status=st.one_of(st.sampled_from([code for code, _ in runclient._ERRORS]), st.integers(100, 599)))
def test_the_dynamic_clients_errors_are_the_same_with_their_traceback_formatted_when_read(status: int) -> None:
    with installed() as original:
        want, got = _both(original, status)
        assert type(got) is type(want)
        assert (got.status, got.reason, got.body, got.headers) == (want.status, want.reason, want.body, want.headers)
        assert got.summary() == want.summary() == "not there"
        assert got.original_traceback == want.original_traceback and "_raise_api_error" in got.original_traceback
        assert str(got) == str(want)
        copied = copy.copy(got)
        assert copied.original_traceback == want.original_traceback


def test_a_traceback_set_by_hand_is_kept(hooked: Any) -> None:
    error = exceptions.NotFoundError(ApiException(status=404, reason="Not Found"), "given")
    assert error.original_traceback == "given"
    error.original_traceback = "changed"
    assert "Original traceback: \nchanged" in str(error)
