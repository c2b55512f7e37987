"""``tf.__git_version__``/``tf.GIT_VERSION`` and ``tf.__compiler_version__``/``tf.COMPILER_VERSION``,
on tensorgrid and on TensorFlow 2.21: Kubeflow's ``tf_smoke.py`` logs the git version beside
``__version__`` before it starts. Strings on both; tensorgrid's say which library ran."""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def test_build_version_names_are_strings_on_both(lib: Any) -> None:
    assert isinstance(lib.__git_version__, str) and lib.__git_version__ == lib.GIT_VERSION
    assert isinstance(lib.__compiler_version__, str) and lib.__compiler_version__ == lib.COMPILER_VERSION
    assert lib.version.GIT_VERSION == lib.GIT_VERSION and lib.version.COMPILER_VERSION == lib.COMPILER_VERSION


def test_tensorgrids_git_version_names_its_own_release() -> None:
    assert tensorgrid.GIT_VERSION == f"tensorgrid-{tensorgrid.version.TENSORGRID_VERSION}"
