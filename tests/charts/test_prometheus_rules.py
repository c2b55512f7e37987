"""The chart's PrometheusRule (``metrics.prometheusRule.enabled``): its rules parse (``promtool check
rules``) and each alert fires on the series that should fire it, and not on those that should
not (``promtool test rules``, series written by hand, with the summary and description a user
reads). Without promtool (Debian's prometheus package, ``make tools``) the test is skipped, except
in CI.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from chart_support import RELEASE_NAMESPACE, one, render, unavailable

OPERATOR = f'namespace="{RELEASE_NAMESPACE}"'
TEAM = {"job_namespace": "team-a"}


def _alert(labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    return {"exp_labels": labels, "exp_annotations": {"summary": summary, "description": description}}


# (name, input series, [(eval time, alert, expected alerts)]): each case is its own promtool test.
CASES: list[tuple[str, list[dict[str, str]], list[tuple[str, str, list[dict[str, Any]]]]]] = [
    ("no replica active", [
        {"series": f'tensorgrid_operator_active{{{OPERATOR},pod="a"}}', "values": "0x10"},
        {"series": f'tensorgrid_operator_active{{{OPERATOR},pod="b"}}', "values": "0x10"}],
     [("4m", "TensorgridOperatorNotActive", []),
      ("6m", "TensorgridOperatorNotActive", [_alert(
          {"severity": "critical"}, f"No tensorgrid operator replica is active in {RELEASE_NAMESPACE}",
          "No replica of the operator reports tensorgrid_operator_active 1 (or none is scraped), so no "
          "TrainingJob is reconciled.")])]),
    ("one replica active", [
        {"series": f'tensorgrid_operator_active{{{OPERATOR},pod="a"}}', "values": "0x10"},
        {"series": f'tensorgrid_operator_active{{{OPERATOR},pod="b"}}', "values": "1x10"}],
     [("8m", "TensorgridOperatorNotActive", [])]),
    ("no operator scraped", [{"series": 'up{job="other"}', "values": "1x10"}],
     [("6m", "TensorgridOperatorNotActive", [_alert(
         {"severity": "critical"}, f"No tensorgrid operator replica is active in {RELEASE_NAMESPACE}",
         "No replica of the operator reports tensorgrid_operator_active 1 (or none is scraped), so no "
         "TrainingJob is reconciled.")])]),
    ("failing jobs", [
        {"series": f'tensorgrid_operator_jobs_failed_total{{{OPERATOR},job_namespace="team-a",reason="ReplicaFailed"}}',
         "values": "0+1x60"},
        {"series": f'tensorgrid_operator_jobs_failed_total{{{OPERATOR},job_namespace="team-b",reason="ReplicaFailed"}}',
         "values": "0x30 1x30"}],
     [("60m", "TensorgridJobsFailing", [_alert(
         {"severity": "warning", **TEAM}, "TrainingJobs are failing in team-a",
         "60 TrainingJobs failed in the last hour (threshold 3); tensorgrid_operator_jobs_failed_total's "
         "reason label says why.")])]),
    ("slow reconciles", [
        {"series": f'tensorgrid_operator_reconcile_duration_seconds_bucket{{{OPERATOR},le="10"}}', "values": "0x30"},
        {"series": f'tensorgrid_operator_reconcile_duration_seconds_bucket{{{OPERATOR},le="30"}}',
         "values": "0+10x30"},
        {"series": f'tensorgrid_operator_reconcile_duration_seconds_bucket{{{OPERATOR},le="+Inf"}}',
         "values": "0+10x30"}],
     [("10m", "TensorgridReconcileSlow", []),
      ("25m", "TensorgridReconcileSlow", [_alert(
          {"severity": "warning"}, "The tensorgrid operator's reconciles are slow",
          "The 99th percentile reconcile took 29.8s (threshold 10 s).")])]),
    ("a busy event loop", [
        {"series": f'tensorgrid_operator_event_loop_lag_seconds_bucket{{{OPERATOR},le="1"}}', "values": "0x30"},
        {"series": f'tensorgrid_operator_event_loop_lag_seconds_bucket{{{OPERATOR},le="2.5"}}', "values": "0+10x30"},
        {"series": f'tensorgrid_operator_event_loop_lag_seconds_bucket{{{OPERATOR},le="+Inf"}}', "values": "0+10x30"}],
     [("25m", "TensorgridOperatorLoopLag", [_alert(
         {"severity": "warning"}, "The tensorgrid operator's event loop is busy",
         "Watches, /healthz and every job's loop wait 2.485s (99th percentile; threshold 1 s).")])]),
    ("API errors", [
        {"series": f'tensorgrid_operator_api_errors_total{{{OPERATOR},operation="patch_status"}}', "values": "0+60x30"}],
     [("20m", "TensorgridOperatorAPIErrors", [_alert(
         {"severity": "warning"}, "The tensorgrid operator's Kubernetes API calls fail",
         "1 failed calls per second (threshold 0.1); tensorgrid_operator_api_errors_total's operation label "
         "says which.")])]),
    ("a job that never runs, whatever it waits for", [
        {"series": 'kube_customresource_trainingjob_info{job_namespace="team-a",name="mnist",state="Created"}',
         "values": "1x8 stale"},
        {"series": 'kube_customresource_trainingjob_info{job_namespace="team-a",name="mnist",state="Unschedulable"}',
         "values": "_x9 1x20"},
        {"series": 'kube_customresource_trainingjob_info{job_namespace="team-a",name="cifar",state="Running"}',
         "values": "1x30"}],
     [("10m", "TensorgridJobNotRunning", []),
      ("16m", "TensorgridJobNotRunning", [_alert(
          {"severity": "warning", "name": "mnist", **TEAM}, "TrainingJob team-a/mnist is not Running",
          "The job has not been Running for 15 minutes; kubectl describe tj shows its state and events.")])]),
    ("a certificate about to expire", [
        {"series": 'tensorgrid_tls_certificate_expiry_timestamp_seconds{namespace="team-a",pod="mnist-ps-0"}',
         "values": "259200"},
        # A task without TLS exports 0: no alert for it.
        {"series": 'tensorgrid_tls_certificate_expiry_timestamp_seconds{namespace="team-a",pod="plain-ps-0"}',
         "values": "0"}],
     [("0m", "TensorgridCertificateExpiring", [_alert(
         {"severity": "warning", "namespace": "team-a", "pod": "mnist-ps-0"},
         "A TLS certificate of team-a/mnist-ps-0 expires soon",
         "It expires in 3d 0h 0m 0s; peers refuse the task's new connections after that.")])]),
    ("data-channel fallbacks", [
        {"series": 'tensorgrid_data_channel_fallbacks_total{namespace="team-a",tensorgrid_io_job_name="mnist",'
                   'pod="mnist-worker-0",peer="mnist-ps-0"}', "values": "0x15 1+1x15"},
        {"series": 'tensorgrid_data_channel_fallbacks_total{namespace="team-a",tensorgrid_io_job_name="cifar",'
                   'pod="cifar-worker-0",peer="cifar-ps-0"}', "values": "0x30"}],
     [("14m", "TensorgridDataChannelFallbacks", []),
      ("30m", "TensorgridDataChannelFallbacks", [_alert(
          {"severity": "warning", "namespace": "team-a", "tensorgrid_io_job_name": "mnist"},
          "TrainingJob team-a/mnist falls back to gRPC",
          "Its tasks could not reach a peer's data channel and sent 15 calls over gRPC in 15 minutes "
          "(slower; docs/data-channel.md).")])]),
]


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("no promtool (Debian's prometheus package)")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    rule = one(render({"metrics": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")
    path = tmp_path_factory.mktemp("rules") / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def test_no_rule_without_the_value() -> None:
    assert not [m for m in render({}) if m["kind"] == "PrometheusRule"]


def test_the_rules_parse(rules_file: pathlib.Path) -> None:
    result = subprocess.run([_promtool(), "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = {r["alert"] for g in yaml.safe_load(rules_file.read_text())["groups"] for r in g["rules"]}
    assert alerts == {alert for _, _, checks in CASES for _, alert, _ in checks}


def test_each_alert_fires_on_its_series(rules_file: pathlib.Path) -> None:
    tests = [{"name": name, "interval": "1m", "input_series": series,
              "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expected}
                                  for at, alert, expected in checks]}
             for name, series, checks in CASES]
    test_file = rules_file.parent / "rules_test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m",
                                         "tests": tests}))
    result = subprocess.run([_promtool(), "test", "rules", test_file.name], capture_output=True, text=True,
                            cwd=rules_file.parent)
    assert result.returncode == 0, result.stdout + result.stderr
