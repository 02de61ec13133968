"""Kubernetes name rules as the API server applies them: groups, versions, kinds, qualified names, label values."""

from __future__ import annotations

import pytest

from hybrid_operator.settings import names


@pytest.mark.parametrize("text", ["", "apps", "cache.example.com", "x-1.example.com", "a" * 63 + "." + "b" * 63])
def test_valid_groups(text: str) -> None:
    assert names.group_problem(text) is None


@pytest.mark.parametrize(
    "text", ["Cache.example.com", "cache..example.com", "-cache.com", "cache.com.", "a b", "a/b", "é.com", "a" * 254]
)
def test_invalid_groups(text: str) -> None:
    assert names.group_problem(text)


@pytest.mark.parametrize("text", ["v1", "v1alpha1", "v2beta3", "v1-rc", "a" * 63])
def test_valid_versions(text: str) -> None:
    assert names.version_problem(text) is None


@pytest.mark.parametrize("text", ["1", "V1", "v1/../..", "v1.0", "v1-", "v 1", "a" * 64, "v1\n"])
def test_invalid_versions(text: str) -> None:
    assert names.version_problem(text)


@pytest.mark.parametrize("text", ["Memcached", "ConfigMap", "Foo2", "Foo-Bar", "a"])
def test_valid_kinds(text: str) -> None:
    assert names.kind_problem(text) is None


@pytest.mark.parametrize("text", ["Mem cached", "2Foo", "Foo_Bar", "Foo.Bar", "Foo-", "Föo", "F" * 64])
def test_invalid_kinds(text: str) -> None:
    assert names.kind_problem(text)


@pytest.mark.parametrize(
    "text", ["tier", "app.kubernetes.io/name", "example.com/cleanup", "a_b.c-d", "A", "x/" + "n" * 63]
)
def test_valid_qualified_names(text: str) -> None:
    assert names.qualified_name_problem(text) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "name part must not be empty"),
        ("example.com/", "name part must not be empty"),
        ("/name", "prefix before '/' must not be empty"),
        ("a/b/c", "at most one '/'"),
        ("Example.com/x", "prefix 'Example.com'"),
        ("n" * 64, "longer than 63"),
        ("clean up", "letters, digits"),
        ("-x", "letters, digits"),
        ("b,c!=d", "letters, digits"),
    ],
)
def test_invalid_qualified_names(text: str, problem: str) -> None:
    found = names.qualified_name_problem(text)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize("text", ["", "cache", "a.b_c-d", "V1", "x" * 63])
def test_valid_label_values(text: str) -> None:
    assert names.label_value_problem(text) is None


@pytest.mark.parametrize("text", ["b,c!=d", "a b", "-a", "a-", "x" * 64, "a=b", "(a)", "é"])
def test_invalid_label_values(text: str) -> None:
    assert names.label_value_problem(text)
