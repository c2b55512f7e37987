"""kopf logs in with the credentials the operator's own API client uses (kube.load_config),
read from the settings of that operator: nothing is taken from, or written to, the process
environment, so two operators with two kubeconfigs log in to two clusters."""

from __future__ import annotations

import os
import pathlib

import yaml

from tensorgrid_operator import config
from tensorgrid_operator.controller import registrations
from tensorgrid_operator.controller import state as state_lib


def _kubeconfig(path: pathlib.Path, server: str, token: str) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "team-a"}}],
        "clusters": [{"name": "k", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": token}}],
    }))
    return str(path)


def test_each_operator_logs_in_with_the_kubeconfig_of_its_own_settings(tmp_path: pathlib.Path) -> None:
    environment_before = os.environ.get("KUBECONFIG")
    first = state_lib.memo_for(config.Settings(kubeconfig=_kubeconfig(tmp_path / "a", "https://a.example:6443", "ta")))
    second = state_lib.memo_for(config.Settings(kubeconfig=_kubeconfig(tmp_path / "b", "https://b.example:6443", "tb")))
    a, b = registrations.login(memo=first), registrations.login(memo=second)
    assert a is not None and b is not None
    assert (a.server, a.scheme, a.token, a.insecure) == ("https://a.example:6443", "Bearer", "ta", True)
    assert (b.server, b.scheme, b.token) == ("https://b.example:6443", "Bearer", "tb")
    assert os.environ.get("KUBECONFIG") == environment_before


def test_a_memo_without_operator_state_gets_the_default_settings() -> None:
    memo: dict[str, object] = {}
    assert state_lib.state_of(memo).settings == config.Settings()
    assert state_lib.state_of(memo) is state_lib.state_of(memo)
