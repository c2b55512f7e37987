"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way Kubernetes' own controllers elect one.

Why it exists: several operator replicas must never reconcile the same jobs at once. kopf's peering
does that with kopf's own CRD and keep-alives; platform engineers expect a Lease instead (no CRD,
``kubectl get lease`` names the holder, the same rules as kube-controller-manager's). The replicas
share one Lease; the one named in ``spec.holderIdentity`` leads while it renews ``spec.renewTime``
every few seconds; another takes the Lease over once it has seen the same record unchanged for
``spec.leaseDurationSeconds`` (its own clock only: no comparison of timestamps written by other
machines, so clock skew between nodes cannot elect two), or at once when the holder released it
(an empty holder) on its way out. Every write carries the resourceVersion that was read, so of two
replicas taking over together the API server lets one win (409 for the other).

``verdict`` is the rule, pure; ``LeaseElector`` reads and writes the Lease (the controller's
``leadership`` runs it around kopf).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from typing import Any, Callable, Mapping, Optional

import kubernetes
import urllib3
from kubernetes.client import exceptions as kube_exceptions

Obj = dict[str, Any]

RENEWED = "renewed the Lease"
"""``Verdict.reason`` of a holder that found the Lease as it left it."""
RECREATED = "created the Lease again (it had been deleted)"
"""``Verdict.reason`` of a holder whose renewal found its Lease deleted."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a replica does with the Lease it read."""

    lead: bool
    """Whether it holds the Lease after ``write`` (when there is one) succeeds."""
    holder: str
    """Who holds the Lease: this replica's identity when ``lead``, else the other one's ('' for nobody)."""
    reason: str
    """Why, in words for the log."""
    write: Optional[Obj] = None
    """The Lease's new spec to write, or ``None`` to write nothing (standing by)."""


def micro_time(now: datetime.datetime) -> str:
    """A Lease's MicroTime (acquireTime, renewTime): RFC 3339 with microseconds, in UTC."""
    return now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def verdict(spec: Optional[Mapping[str, Any]], identity: str, duration_seconds: int, unchanged_for: float,
            now: datetime.datetime) -> Verdict:
    """The rule: ``spec`` is the Lease's (``None``: no Lease yet), ``unchanged_for`` how long (seconds, by this
    replica's clock) it has seen that same spec. Creates, renews, takes over an expired or released Lease, or
    stands by while another replica's is live."""
    stamp = micro_time(now)
    if spec is None:
        return Verdict(True, identity, "created the Lease", {
            "holderIdentity": identity, "leaseDurationSeconds": duration_seconds, "acquireTime": stamp,
            "renewTime": stamp, "leaseTransitions": 0})
    holder = str(spec.get("holderIdentity") or "")
    if holder == identity:
        return Verdict(True, identity, RENEWED, {**spec, "renewTime": stamp, "leaseDurationSeconds": duration_seconds})
    lease_seconds = int(spec.get("leaseDurationSeconds") or duration_seconds)
    if holder and unchanged_for < lease_seconds:
        return Verdict(False, holder, f"{holder} holds it (not renewed for {unchanged_for:.0f}s of its "
                                      f"{lease_seconds}s; this replica takes over if that reaches {lease_seconds}s)")
    reason = (f"took it over from {holder}, which did not renew it for {unchanged_for:.0f}s (lease {lease_seconds}s)"
              if holder else "took it over: its last holder released it")
    return Verdict(True, identity, reason, {
        "holderIdentity": identity, "leaseDurationSeconds": duration_seconds, "acquireTime": stamp,
        "renewTime": stamp, "leaseTransitions": int(spec.get("leaseTransitions") or 0) + 1})


class LeaseElector:
    """One replica's side of the election on the Lease ``namespace/name``."""

    def __init__(self, configuration: kubernetes.client.Configuration, namespace: str, name: str, identity: str,
                 duration_seconds: int, clock: Callable[[], float] = time.monotonic,
                 request_timeout_seconds: Optional[float] = None) -> None:
        """``request_timeout_seconds`` bounds each call to the API server (None: no bound), so that a
        connection that hangs (an API server cut off without a reset) fails instead of blocking the caller."""
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_seconds = duration_seconds
        self._timeout = request_timeout_seconds
        self._api = kubernetes.client.ApiClient(configuration)
        # Any: its calls are made with _preload_content=False, whose raw answers the stubs do not know.
        self._leases: Any = kubernetes.client.CoordinationV1Api(self._api)
        self._clock = clock
        self._seen: Optional[str] = None
        self._seen_since = 0.0
        self._written: Optional[Obj] = None
        """The Lease as this replica last wrote it while holding it: the next renewal replaces it at once."""

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def attempt(self, timeout_seconds: Optional[float] = None) -> Verdict:
        """Reads the Lease and creates, renews or takes it over when the rule says so. A write that
        another replica's beat (409) leaves this one standing by; other API errors raise.
        ``timeout_seconds`` bounds each call instead of the elector's request timeout.

        A holder renews with one call, as client-go's elector does: it replaces the Lease it last wrote
        (that write's resourceVersion), so a slow API server costs one round trip a renewal, not two. A
        Lease changed or deleted since (409, 404) is read and decided on as below."""
        timeout = self._timeout if timeout_seconds is None else timeout_seconds
        if self._written is not None:
            renewed = self._renew_written(timeout)
            if renewed is not None:
                return renewed
        lease = self._read(timeout)
        spec = None if lease is None else dict(lease.get("spec") or {})
        seen = json.dumps(spec, sort_keys=True)
        if seen != self._seen:
            self._seen, self._seen_since = seen, self._clock()
        decided = verdict(spec, self.identity, self.duration_seconds, self._clock() - self._seen_since,
                          datetime.datetime.now(datetime.timezone.utc))
        if decided.write is None:
            return decided
        body: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace}, "spec": decided.write}
        try:
            if lease is None:
                written = self._leases.create_namespaced_lease(self.namespace, body, _preload_content=False,
                                                               _request_timeout=timeout).read()
            else:
                body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
                written = self._leases.replace_namespaced_lease(self.name, self.namespace, body,
                                                                _preload_content=False,
                                                                _request_timeout=timeout).read()
        except kube_exceptions.ApiException as e:
            if e.status != 409:
                raise
            return Verdict(False, "", "another replica wrote the Lease first")
        self._written = dict(json.loads(written)) if decided.lead else None
        return decided

    def _renew_written(self, timeout: Optional[float]) -> Optional[Verdict]:
        """Renews the Lease this replica last wrote without reading it first; None when it changed or
        went away since (409, 404): the caller reads it then."""
        assert self._written is not None
        now = micro_time(datetime.datetime.now(datetime.timezone.utc))
        body: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace,
                                  "resourceVersion": self._written["metadata"]["resourceVersion"]},
                     "spec": {**self._written["spec"], "renewTime": now,
                              "leaseDurationSeconds": self.duration_seconds}}
        try:
            written = self._leases.replace_namespaced_lease(self.name, self.namespace, body, _preload_content=False,
                                                            _request_timeout=timeout).read()
        except kube_exceptions.ApiException as e:
            if e.status not in (404, 409):
                raise
            self._written = None
            return None
        before, self._written = self._written, dict(json.loads(written))
        spec = self._written.get("spec") or {}
        self._seen, self._seen_since = json.dumps(spec, sort_keys=True), self._clock()
        # The API server creates a Lease on an update when there is none (Leases allow it): a Lease
        # deleted under its holder comes back with its next renewal, as another object.
        recreated = before["metadata"].get("uid") != self._written["metadata"].get("uid")
        return Verdict(True, self.identity, RECREATED if recreated else RENEWED, body["spec"])

    def release(self) -> Optional[str]:
        """Hands the Lease back (an empty holder) if this replica holds it, so another takes over at once
        instead of after the lease duration. None when it did, else why not: errors are left to the
        Lease's expiry. A write another beat (409) is read again and retried a few times."""
        self._written = None
        for _ in range(3):
            try:
                lease = self._read()
                if lease is None:
                    return "there is no Lease"
                holder = (lease.get("spec") or {}).get("holderIdentity")
                if holder != self.identity:
                    return f"{holder or 'nobody'} holds it"
                spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace,
                                     "resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": spec}
                self._leases.replace_namespaced_lease(self.name, self.namespace, body, _preload_content=False,
                                                      _request_timeout=self._timeout).read()
                return None
            except kube_exceptions.ApiException as e:
                if e.status != 409:
                    return f"the API server answered {e.status} {e.reason}"
            except (OSError, urllib3.exceptions.HTTPError) as e:  # unreachable, or no answer in time
                return f"the API server is unreachable: {e}"
        return "the Lease kept changing under the release (409 Conflict)"

    def _read(self, timeout: Optional[float] = None) -> Optional[Obj]:
        try:
            response = self._leases.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                          _request_timeout=self._timeout if timeout is None
                                                          else timeout)
        except kube_exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(json.loads(response.data))
