"""A tiny in-memory cluster for the reconciler's pure tests: it applies plans like the API server would.

Pods get fresh uids on creation, deleted pods vanish (they are unscheduled or
terminal, which the API server deletes at once), and the status is replaced by the
plan's. Objects named in :attr:`Sim.refuse` are refused on creation, as a quota or an
admission webhook would, and the outcome is applied as the controller applies it (controller/plan_application.py). Tests
then play the kubelet with :meth:`Sim.set_phase`.
"""

from __future__ import annotations

import copy
import functools
import datetime
import itertools
from typing import Any, Optional

from tensorgrid_operator.api import conditions
from tensorgrid_operator.reconcile import creation
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import reconcile
from tensorgrid_operator.reconcile import terminating

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
_uids = itertools.count(1)


def container(name: str = "tensorgrid", image: str = "tensorgrid:test") -> dict[str, Any]:
    return {"name": name, "image": image}


def replica(replicas: int, restart_policy: Optional[str] = None, **template_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container()]}
    spec.update(template_spec)
    entry: dict[str, Any] = {"replicas": replicas, "template": {"spec": spec}}
    if restart_policy is not None:
        entry["restartPolicy"] = restart_policy
    return entry


def make_job(name: str = "mnist", namespace: str = "team", ps: int = 0, workers: int = 0, chief: int = 0,
             evaluators: int = 0, policy: Optional[str] = None, run_policy: Optional[dict[str, Any]] = None,
             success_policy: Optional[str] = None, **replica_policies: str) -> dict[str, Any]:
    """A TrainingJob object as the API server returns it (uid, generation, creationTimestamp)."""
    specs: dict[str, Any] = {}
    for rtype, count in (("PS", ps), ("Worker", workers), ("Chief", chief), ("Evaluator", evaluators)):
        if count:
            specs[rtype] = replica(count, replica_policies.get(rtype.lower(), policy))
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    return {
        "apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": namespace, "uid": f"job-uid-{next(_uids)}", "generation": 1,
                     "creationTimestamp": conditions.format_time(T0), "resourceVersion": "1"},
        "spec": spec,
    }


class Sim:
    """The job, its pods and Services, and a clock."""

    def __init__(self, job: dict[str, Any], retry_delay: policies.RetryDelay = policies.RetryDelay()) -> None:
        self.job = job
        self.retry_delay = retry_delay
        self.pods: dict[str, dict[str, Any]] = {}
        self.services: dict[str, dict[str, Any]] = {}
        self.now = T0
        self.plans: list[plans.Plan] = []
        self.events: list[plans.Event] = []
        self.outcome: Optional[creation.Outcome] = None
        """What the last applied plan's creations came to."""
        self.job_deleted = False
        self.stuck = terminating.StuckPolicy()
        """When terminating pods count as stuck and whether they are force-deleted."""
        self.refuse: dict[tuple[str, str], tuple[Optional[int], str]] = {}
        """(kind, name) -> (HTTP status, message) of the creations the API server refuses."""

    @property
    def status(self) -> dict[str, Any]:
        return self.job.get("status") or {}

    def condition(self, ctype: str) -> dict[str, Any]:
        """The condition of that type, or ``{}``."""
        found = conditions.get_condition(self.status.get("conditions") or [], ctype)
        return dict(found) if found is not None else {}

    def plan(self) -> plans.Plan:
        """Reconcile without applying, reading the pods and Services as the operator's indexes keep them."""
        return reconcile.reconcile(self.job, [indexed.pod(p) for p in self.pods.values()],
                                   [indexed.service(s) for s in self.services.values()], self.now,
                                   self.retry_delay, self.stuck)

    def step(self, seconds: float = 0.0) -> plans.Plan:
        """Advance the clock, reconcile, and apply the plan."""
        self.now += datetime.timedelta(seconds=seconds)
        plan = self.plan()
        self.apply(plan)
        self.plans.append(plan)
        return plan

    def apply(self, plan: plans.Plan, status: bool = True, deletes: bool = True, creates: bool = True) -> None:
        if status and plan.status is not None:
            self.job["status"] = copy.deepcopy(plan.status)
        if deletes:
            for name, uid in plan.delete_pods + plan.force_delete_pods:
                if name in self.pods and self.pods[name]["metadata"]["uid"] == uid:
                    del self.pods[name]
            for name in plan.delete_services:
                self.services.pop(name, None)
        if creates:
            failures = []
            for kind, made in (("Service", [(s["metadata"]["name"], functools.partial(copy.deepcopy, s))
                                             for s in plan.create_services]),
                               ("Pod", [(p.name, p.manifest) for p in plan.create_pods])):
                for name, manifest in made:
                    if (kind, name) in self.refuse:
                        failures.append(creation.CreateFailure(kind, name, *self.refuse[kind, name]))
                    elif kind == "Service":
                        self.services.setdefault(name, manifest())
                    elif name not in self.pods:
                        created = manifest()
                        created["metadata"]["uid"] = f"pod-uid-{next(_uids)}"
                        created["status"] = {"phase": "Pending"}
                        self.pods[name] = created
            outcome = creation.after_creates(self.job, plan, failures, self.now, self.retry_delay)
            if outcome.status is not None:
                self.job["status"] = copy.deepcopy(outcome.status)
            self.events.extend(outcome.events)
            self.outcome = outcome
        else:
            self.events.extend(plan.events)
        if plan.delete_job:
            self.job_deleted = True

    def settle(self, max_steps: int = 5) -> None:
        """Reconcile until a reconcile changes nothing."""
        for _ in range(max_steps):
            plan = self.step()
            if not plan.has_actions and plan.status is None:
                return
        raise AssertionError(f"no fixed point after {max_steps} reconciles: {self.plans[-1]}")

    def set_phase(self, name: str, phase: str, exit_code: Optional[int] = None, reason: str = "") -> None:
        pod = self.pods[name]
        status: dict[str, Any] = {"phase": phase}
        cname = pod["spec"]["containers"][0]["name"]
        if exit_code is not None:
            status["containerStatuses"] = [{"name": cname, "state": {"terminated": {
                "exitCode": exit_code, "reason": reason or ("Completed" if exit_code == 0 else "Error")}}}]
        elif phase == "Running":
            status["containerStatuses"] = [{"name": cname, "state": {"running": {}}}]
        pod["status"] = status

    def run_all(self) -> None:
        for name, pod in self.pods.items():
            if pod["status"]["phase"] == "Pending":
                self.set_phase(name, "Running")

    def event_reasons(self) -> list[str]:
        return [e.reason for e in self.events]


def started(job: dict[str, Any]) -> Sim:
    """A simulated job whose pods were created and all run: state Running."""
    sim = Sim(job)
    sim.step()
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running", sim.status
    return sim
