"""Whether the operator runs with kopf peering or standalone, decided against a real API server.

kopf given a peering name waits forever for a peering object nobody created, doing nothing: so
an operator started with no flags runs standalone unless the object exists, and says which and
why; an explicit ``--peering`` with no object is an error that says what to apply.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Iterator

import pytest

from kube_controlplane import wait_crds_established
from operator_cluster import ControlPlane
from tensorgrid_operator import cli
from tensorgrid_operator import config
from tensorgrid_operator.controller import peering

pytestmark = pytest.mark.controlplane

ROOT = pathlib.Path(__file__).resolve().parents[3]
PEERING_OBJECT = """
apiVersion: kopf.dev/v1
kind: ClusterKopfPeering
metadata:
  name: tensorgrid-operator
"""


def _settings(controlplane: ControlPlane, *flags: str) -> config.Settings:
    return cli.parse_args(["--kubeconfig", controlplane.kubeconfig, *flags])


@pytest.fixture
def no_peering_crd(controlplane: ControlPlane) -> Iterator[None]:
    """kopf's peering CRDs deleted for the test, and installed again after it: the control plane is
    the run's one, and the chart's tests install the chart's peering object."""
    crd = str(ROOT / "crds" / "kopf-peering.yaml")
    controlplane.kubectl("delete", "-f", crd, "--ignore-not-found", "--wait")
    yield
    controlplane.kubectl("apply", "-f", crd)
    wait_crds_established(controlplane, "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")


@pytest.fixture
def peering_object(controlplane: ControlPlane) -> Iterator[None]:
    controlplane.kubectl("apply", "-f", str(ROOT / "crds" / "kopf-peering.yaml"))
    wait_crds_established(controlplane, "clusterkopfpeerings.kopf.dev")
    controlplane.kubectl("apply", "-f", "-", stdin=PEERING_OBJECT)
    yield
    controlplane.kubectl("delete", "clusterkopfpeering", "tensorgrid-operator", "--ignore-not-found")


def test_no_flags_and_no_peering_crd_runs_standalone_and_says_why(
        controlplane: ControlPlane, no_peering_crd: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tensorgrid_operator")
    settings = peering.resolve_peering(_settings(controlplane))
    assert settings.peering is None
    assert "running standalone: clusterkopfpeering/tensorgrid-operator does not exist" in caplog.text


def test_no_flags_with_the_peering_object_runs_with_peering(
        controlplane: ControlPlane, peering_object: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tensorgrid_operator")
    settings = peering.resolve_peering(_settings(controlplane))
    assert settings.peering == "tensorgrid-operator"
    assert "running with kopf peering 'tensorgrid-operator'" in caplog.text


def test_a_namespaced_operator_looks_for_a_peering_object_in_each_namespace(
        controlplane: ControlPlane, peering_object: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tensorgrid_operator")
    settings = peering.resolve_peering(_settings(controlplane, "-n", "team-a"))
    assert settings.peering is None
    assert "kopfpeering/tensorgrid-operator -n team-a does not exist" in caplog.text


def test_explicit_peering_without_the_object_is_a_clear_error(controlplane: ControlPlane,
                                                              no_peering_crd: None) -> None:
    with pytest.raises(SystemExit) as raised:
        peering.resolve_peering(_settings(controlplane, "--peering", "team-operator"))
    message = str(raised.value)
    assert "clusterkopfpeering/team-operator does not exist" in message
    assert "crds/kopf-peering.yaml" in message and "--standalone" in message


def test_standalone_flag_skips_the_lookup(controlplane: ControlPlane) -> None:
    settings = peering.resolve_peering(_settings(controlplane, "--standalone"))
    assert settings.peering is None and not settings.peering_required
