"""The operator under Lease leader election (``--leader-election LEASE``): only the Lease's holder runs kopf.

Why it exists: ``cluster.leader_lease`` says who leads; this wires it around the operator. A replica
first stands by until it holds the Lease: it serves /metrics (``tensorgrid_operator_active`` 0 and
``tensorgrid_operator_lease_holder_info`` naming the holder) and its liveness endpoint, and logs who
holds the Lease whenever that changes, so a standby says why it is idle. Holding it, it runs kopf
(standalone: the Lease, not kopf's peering, keeps it alone) while a thread renews the Lease; a
replica that finds another holder in the Lease, or cannot renew it for ``renew_deadline``, stops at
once (exit status 4, as Kubernetes' controllers stop on a lost lease) so that it never acts beside
the next holder, and Kubernetes starts it again as a standby. The deadline is kept by a thread of
its own: a renewal whose connection hangs (an API server cut off without a reset) cannot hold the
replica past it, and each call to the API server gives up after ``request_timeout_seconds`` (a renewal:
when the deadline comes, so that a slow API server still renews in time).
Stopped (SIGTERM), it releases the Lease so a standby takes over within a retry period instead of
the lease duration.
"""

from __future__ import annotations

import http.server
import logging
import os
import threading
import time
from typing import Any, Optional

from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import leader_lease
from tensorgrid_operator import config
from tensorgrid_operator import metrics
from tensorgrid_operator.controller import state as state_lib

# The exit status of a replica that lost the Lease while leading.
EXIT_LOST_LEASE = 4

log = logging.getLogger("tensorgrid_operator")


def retry_seconds(settings: config.Settings) -> float:
    """How often a standby tries the Lease and the holder renews it: client-go's 2 s of a 15 s lease."""
    return settings.lease_duration_seconds * 2 / 15


def renew_deadline_seconds(settings: config.Settings) -> float:
    """How long the holder may fail to renew before it stops: client-go's 10 s of a 15 s lease, so it
    stops before another replica may take the Lease over."""
    return settings.lease_duration_seconds * 2 / 3


def request_timeout_seconds(settings: config.Settings) -> float:
    """How long a standby's call (or a release's) to the API server about the Lease may take: half the
    renew deadline, so that a slow API server (calls of 2-3 s on a loaded control plane) still answers
    it, and a hung call leaves time for another try before a holder's Lease could expire."""
    return renew_deadline_seconds(settings) / 2


def renewal_timeout_seconds(settings: config.Settings, since_renewed: float) -> float:
    """How long the holder's renewal may take, ``since_renewed`` seconds after its last renewal began:
    the time left before the renew deadline, as client-go bounds it. A renewal is one call, so a holder
    renews in time while calls take up to (deadline - retry period) / 2, 4 s of a 15 s lease."""
    return max(0.1, renew_deadline_seconds(settings) - since_renewed)


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200 if self.path.split("?")[0] == "/healthz" else 404
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"standing by for the Lease\n" if status == 200 else b"not found\n")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        return


def _serve_liveness(port: Optional[int]) -> Optional[http.server.ThreadingHTTPServer]:
    """/healthz while standing by (kopf serves it once this replica leads): the probes keep a standby running."""
    if port is None:
        return None
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), _Healthz)
    threading.Thread(target=server.serve_forever, name="standby liveness", daemon=True).start()
    return server


def _show_holder(lease: str, holder: str) -> None:
    metrics.LEASE_HOLDER.clear()
    if holder:
        metrics.LEASE_HOLDER.labels(lease=lease, holder=holder).set(1)


def wait_to_lead(settings: config.Settings, state: state_lib.OperatorState,
                 identity: str) -> leader_lease.LeaseElector:
    """Blocks until this replica holds the Lease, standing by meanwhile; returns its elector."""
    assert settings.leader_election_lease is not None and settings.leader_election_namespace is not None
    lease = f"{settings.leader_election_namespace}/{settings.leader_election_lease}"
    elector = leader_lease.LeaseElector(kube.load_config(settings.kubeconfig), settings.leader_election_namespace,
                                        settings.leader_election_lease, identity,
                                        int(settings.lease_duration_seconds),
                                        request_timeout_seconds=request_timeout_seconds(settings))
    if settings.metrics_port is not None and state.metrics_server is None:
        state.metrics_server = metrics.serve(settings.metrics_port)
        log.info("metrics on :%d/metrics", state.metrics_server.port)
    metrics.ACTIVE.set(0)
    liveness = _serve_liveness(settings.liveness_port)
    log.info("leader election on the Lease %s as %s: only its holder reconciles TrainingJobs", lease, identity)
    said = None
    try:
        while True:
            try:
                decided = elector.attempt()
            except Exception as e:  # noqa: BLE001 - the API server may be away for a while: try again
                log.warning("standing by: could not read or write the Lease %s: %s", lease, e)
            else:
                _show_holder(lease, decided.holder)
                if decided.lead:
                    log.info("leading: %s %s; reconciling TrainingJobs", decided.reason, lease)
                    return elector
                if decided.holder != said:
                    log.info("standing by, not reconciling: the Lease %s: %s", lease, decided.reason)
                    said = decided.holder
            time.sleep(retry_seconds(settings))
    finally:
        if liveness is not None:
            liveness.shutdown()
            liveness.server_close()


class Renewal:
    """The threads renewing the Lease and keeping its deadline: stopped (the renewal waited for) before
    the Lease is released, so that a renewal in flight cannot change the Lease under the release."""

    def __init__(self, stop: threading.Event, thread: threading.Thread) -> None:
        self._stop, self._thread = stop, thread

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._thread.join(timeout)


def keep_renewing(settings: config.Settings, elector: leader_lease.LeaseElector) -> Renewal:
    """Renews the Lease on a thread until stopped; stops the process when the Lease names another holder,
    or has not been renewed within the renew deadline, checked on a second thread that no hung call
    to the API server can hold up."""
    lease = f"{elector.namespace}/{elector.name}"
    deadline = renew_deadline_seconds(settings)
    stop = threading.Event()
    # When the last renewal that succeeded began (its read): the Lease's renewTime is at least that
    # recent, so a standby, which counts from when it saw that renewal, cannot take over before
    # renewed + lease duration, and the deadline stops this replica well before.
    renewed = [time.monotonic()]

    def renew() -> None:
        while not stop.wait(retry_seconds(settings)):
            began = time.monotonic()
            try:
                decided = elector.attempt(renewal_timeout_seconds(settings, began - renewed[0]))
            except Exception as e:  # noqa: BLE001 - retried until the deadline
                log.warning("could not renew the Lease %s: %s", lease, e)
                continue
            if decided.lead:
                renewed[0] = began
                if decided.reason != leader_lease.RENEWED:  # e.g. deleted under its holder: created again
                    log.warning("the Lease %s was not as this replica left it: %s, still leading", lease,
                                decided.reason)
                continue
            _show_holder(lease, decided.holder)
            _lost(f"the Lease {lease} is no longer this replica's: {decided.reason}")

    def keep_deadline() -> None:
        while not stop.wait(retry_seconds(settings) / 2):
            if time.monotonic() - renewed[0] > deadline:
                _lost(f"the Lease {lease} was not renewed for {deadline:.0f}s")

    thread = threading.Thread(target=renew, name="lease renewal", daemon=True)
    thread.start()
    threading.Thread(target=keep_deadline, name="lease renew deadline", daemon=True).start()
    return Renewal(stop, thread)


def _lost(why: str) -> None:
    log.error("stopping at once, exit status %d: %s (Kubernetes starts this replica again, standing by)",
              EXIT_LOST_LEASE, why)
    metrics.ACTIVE.set(0)
    logging.shutdown()
    os._exit(EXIT_LOST_LEASE)


def step_down(settings: config.Settings, elector: leader_lease.LeaseElector, renewing: Renewal) -> None:
    """After kopf stopped: stop renewing (waiting out a renewal in flight) and release the Lease, so a
    standby takes over at once; a release that fails leaves the Lease to expire, and says so."""
    renewing.stop(timeout=renew_deadline_seconds(settings))
    lease = f"{elector.namespace}/{elector.name}"
    why = elector.release()
    if why is None:
        log.info("released the Lease %s", lease)
    else:
        log.warning("did not release the Lease %s (%s): a standby takes over once it expires, after %ss",
                    lease, why, settings.lease_duration_seconds)
    elector.close()
