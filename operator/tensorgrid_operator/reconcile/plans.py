"""What one reconcile pass produces (:class:`Plan`, :class:`Event`) and the scratch state it works in.

Apart from ``reconcile`` (the flow of a pass), ``outcomes`` (what the job's policies do
when replicas or the job end) and ``jobstatus`` (the status a pass writes), so that all
three can read and write one :class:`Work` without importing each other in a circle,
and ``creation`` (the API server's refusals) can amend a plan without the reconciler.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import terminating

Obj = dict[str, Any]
RT = spec_lib.ReplicaType
# The API server refused to create a pod or Service (quota, admission, an outage): retried after a delay.
FAILED_CREATE = "FailedCreate"


@dataclasses.dataclass(frozen=True)
class Event:
    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class PodToCreate:
    """A pod a pass decided to create: its name and replica at once, its manifest when it is sent.

    Every manifest carries the job's whole cluster in TF_CONFIG (80 KB at 2,000 replicas): a
    plan holding each manifest of a 2,000-replica job took 144 MB, most of the operator's peak
    memory. Built as its creation goes out, a manifest is held only while it is sent.
    """

    name: str
    replica: spec_lib.ReplicaKey
    build: Callable[[], Obj] = dataclasses.field(repr=False, compare=False)
    """Makes the manifest (``manifests.build_pod`` with the pass's job, epoch and cluster)."""

    def manifest(self) -> Obj:
        """A new manifest of the pod, the caller's to change."""
        return self.build()


@dataclasses.dataclass(frozen=True)
class PSTakeover:
    """A PS's standby pod made the PS (``ps_takeover``): one metadata patch of that pod, by its uid."""

    replica: str
    """The PS replica it becomes (``ps-0``)."""
    pod: str
    uid: str
    patch: Obj
    """The pod's metadata patch (``resources.ps_standby.takeover_patch``)."""
    message: str = ""
    """What the event ``PSTakenOverByStandby`` says once the patch applied."""


class Transition(NamedTuple):
    """A job-level change of one pass, as the operator's counters count it (``metrics.count_transitions``)."""

    name: str
    """``created``, ``succeeded``, ``failed`` (the job's) or ``restarted`` (a replica's)."""
    reason: str = ""
    """Why: the Failed condition's reason, or the restart's (docs/metrics.md); empty for the others."""
    replica_type: str = ""
    """The restarted replica's type (``Worker``, ``PS``, ...); empty for the others."""


@dataclasses.dataclass
class Plan:
    create_pods: list[PodToCreate] = dataclasses.field(default_factory=list)
    create_services: list[Obj] = dataclasses.field(default_factory=list)
    delete_pods: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(name, uid): deleted with a uid precondition, so a newer pod of that name is never hit."""
    delete_services: list[str] = dataclasses.field(default_factory=list)
    force_delete_pods: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(name, uid) of pods stuck terminating, deleted with a grace period of 0 (``terminating``)."""
    close_group_pods: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(name, uid) of a finished Kueue-queued job's pods to annotate ``retriable-in-group: "false"``
    (``kueue``), before any deletion: Kueue then releases the group's quota."""
    status: Optional[Obj] = None
    """The complete new status, or ``None`` when it did not change."""
    events: list[Event] = dataclasses.field(default_factory=list)
    delete_job: bool = False
    requeue_after: Optional[float] = None
    """Seconds until a deadline, a TTL or a retry falls due; ``None`` when no timer is pending."""
    transitions: list[Transition] = dataclasses.field(default_factory=list)
    """Job-level transitions for metrics: ``created``, ``restarted`` (a replica's), ``succeeded``, ``failed``."""
    all_running_seconds: Optional[float] = None
    """Set once, when every pod first runs: seconds since the job was created."""
    ps_takeovers: list[PSTakeover] = dataclasses.field(default_factory=list)
    """Standby pods to make their PS's (``ps_takeover``), applied before the status that records them."""

    @property
    def has_actions(self) -> bool:
        return bool(self.create_pods or self.create_services or self.delete_pods or self.delete_services
                    or self.force_delete_pods or self.close_group_pods or self.delete_job or self.ps_takeovers)


@dataclasses.dataclass
class Work:
    """Mutable scratch state of one reconcile pass."""

    job: Mapping[str, Any]
    now: datetime.datetime
    plan: Plan
    conditions: list[Obj]
    finished: dict[str, Obj]
    restarted_uids: dict[str, str]
    restarts: dict[str, int]
    epoch: int
    """The restart epoch: pods labelled with an older one belong to a run the job restarted away from."""
    backoff: dict[str, Obj]
    """``status.replicaBackoff`` by replica: how many times in a row it failed, when it may be created again."""
    retry_delay: policies.RetryDelay
    stuck: terminating.StuckPolicy
    ps_loss: Optional[Obj]
    """``status.parameterServerLoss``: which parameter servers were last seen down, and when."""
    start_time: Optional[datetime.datetime] = None
    """The startTime to write, when this reconcile (re)starts the active clock."""
    finished_now: bool = False
    """Whether the job reached Succeeded or Failed in this reconcile."""
    suspended: bool = False
    """Whether the job is suspended: ``status.startTime`` is cleared, as a suspended Job's is."""
    awaiting_admission: bool = False
    """Whether Kueue holds the queued job (``kueue.awaiting_admission``): ``status.startTime`` is cleared
    and the active deadline waits, as a queued Job's does while Kueue keeps it suspended."""
    status_fields: Obj = dataclasses.field(default_factory=dict)
    """Status fields a decision beside the flow sets (``ps_takeover``'s record), written as they are."""
    deleting_pods: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    """``plan.delete_pods`` as a set: a pass over thousands of pods asks it once per pod."""

    def event(self, etype: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(etype, reason, message))

    def total_restarts(self) -> int:
        return sum(self.restarts.values())

    def delete_pod(self, view: podview.PodView) -> None:
        if (view.name, view.uid) not in self.deleting_pods:
            self.deleting_pods.add((view.name, view.uid))
            self.plan.delete_pods.append((view.name, view.uid))

    def deleting(self, view: podview.PodView) -> bool:
        return (view.name, view.uid) in self.deleting_pods

    def delete_services(self, names: Iterable[str]) -> None:
        """Delete these Services (each once, however often it is asked)."""
        planned = set(self.plan.delete_services)
        for name in names:
            if name not in planned:
                planned.add(name)
                self.plan.delete_services.append(name)

    def back_off(self, short: str, reason: str, message: str) -> Obj:
        """Record that a replica failed: it is created again only after its (growing) delay."""
        entry = policies.backoff_entry(self.backoff.get(short), self.retry_delay, self.now, short, reason, message)
        self.backoff[short] = entry
        return entry

    def refused(self, short: str) -> bool:
        """Whether the API server refused this replica's last creation (and it was not seen since)."""
        return self.backoff.get(short, {}).get("reason") == FAILED_CREATE

    def wait_before_creating(self, short: str) -> float:
        """Seconds this replica must still wait; while a parameter server waits, every replica does."""
        waits = [policies.seconds_until_retry(e, self.now) for name, e in self.backoff.items()
                 if name == short or name.startswith(RT.PS.task_type + "-")]
        return max(waits, default=0.0)

    def requeue(self, seconds: float) -> None:
        """Look again in ``seconds`` at the latest (a deadline, a TTL, a retry falls due)."""
        if self.plan.requeue_after is None or seconds < self.plan.requeue_after:
            self.plan.requeue_after = seconds
