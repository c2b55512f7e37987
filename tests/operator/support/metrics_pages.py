"""A task's /metrics page served by a test that plays the kubelet and the task: pods get
the IP 127.0.0.1, where the page answers on the port their template declares as
``metrics`` (tests/operator/controlplane/test_progress_over_http.py,
test_ps_recovery_on_the_api_server.py)."""

from __future__ import annotations

from typing import Any, Sequence

import prometheus_client

from operator_cluster import free_port


class MetricsPage:
    """An HTTP /metrics page on 127.0.0.1:``port`` with the gauges ``gauge`` adds; a context
    manager that stops serving at its end."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        self.port = free_port()
        self.server, self.thread = prometheus_client.start_http_server(self.port, addr="127.0.0.1",
                                                                       registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> prometheus_client.Gauge:
        return prometheus_client.Gauge(name, documentation, list(labels), registry=self.registry)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "MetricsPage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
