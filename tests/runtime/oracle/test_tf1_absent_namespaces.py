"""TF1 namespaces tensorgrid leaves out on purpose (``tf.contrib``, ``tf.keras``, ...)
say so by name and point to docs/api.md, while staying AttributeErrors (issue 24); TensorFlow
2.21's ``tf.compat.v1``, which also lacks ``tf.contrib``, is the oracle of how a program probing
for them sees it. (``tf.estimator``, absent from TensorFlow 2.21, is in tensorgrid: issue 25.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

import tensorgrid
from tensorgrid import not_provided


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TF1 (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.mark.parametrize("name", ["contrib"])
def test_probing_for_a_namespace_absent_from_both_reads_the_same(lib: Any, name: str) -> None:
    assert not hasattr(lib, name)
    assert getattr(lib, name, None) is None
    with pytest.raises(AttributeError):
        getattr(lib, name)


@pytest.mark.parametrize("name", sorted(not_provided.ABSENT_NAMESPACES))
def test_an_absent_namespace_names_itself_and_the_api_page(name: str) -> None:
    assert not hasattr(tensorgrid, name)
    with pytest.raises(not_provided.NotProvidedError) as failure:
        getattr(tensorgrid, name)
    assert isinstance(failure.value, AttributeError)
    message = str(failure.value)
    assert f"does not provide tf.{name}" in message and "docs/api.md" in message


def test_contrib_says_not_provided_and_estimator_is_provided() -> None:
    assert hasattr(tensorgrid, "estimator")
    with pytest.raises(AttributeError, match=r"does not provide tf\.contrib: .*tf\.layers"):
        tensorgrid.contrib


def test_another_missing_name_is_python_s_plain_attribute_error() -> None:
    with pytest.raises(AttributeError) as failure:
        tensorgrid.no_such_name
    assert type(failure.value) is AttributeError
    assert str(failure.value) == "module 'tensorgrid' has no attribute 'no_such_name'"


def test_real_names_and_imports_are_unaffected_in_a_fresh_process() -> None:
    program = textwrap.dedent("""
        from tensorgrid import Session, lookup, train
        import tensorgrid.compat.v1 as tf
        from tensorgrid.compat.v1 import layers
        assert tf.Session is Session and tf.layers is layers and tf.train is train
        print(hasattr(tf, "contrib"), hasattr(tf, "Session"))
        try:
            tf.contrib.layers
        except AttributeError as error:
            print(type(error).__name__)
    """)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "NotProvidedError"]
