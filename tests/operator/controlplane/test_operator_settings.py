"""What the operator asks of kopf: watch selectors, finalizer, event level, and watch timeouts."""

from __future__ import annotations

import asyncio

import kopf

from tensorgrid_operator import config
from tensorgrid_operator.controller import registrations


def test_watches_cannot_stall_forever() -> None:
    """A watch whose connection stalls silently must be cut and renewed, or new jobs go unseen."""
    settings = kopf.OperatorSettings()
    registrations.configure_kopf(settings, config.Settings())
    assert settings.watching.server_timeout == 300
    # kopf sends it as the watch's timeoutSeconds, which the API server parses as an integer.
    assert isinstance(settings.watching.server_timeout, int)
    assert settings.watching.client_timeout == 330
    assert settings.watching.client_timeout > settings.watching.server_timeout, \
        "the client must leave the server time to end the watch itself"
    assert settings.watching.connect_timeout == 30


def test_only_the_jobs_objects_are_watched_and_the_finalizer_is_ours() -> None:
    settings = kopf.OperatorSettings()
    registrations.configure_kopf(settings, config.Settings(watch_server_timeout_seconds=60,
                                                      watch_client_timeout_seconds=90))
    assert settings.watching.server_timeout == 60 and settings.watching.client_timeout == 90
    assert settings.persistence.finalizer == "tensorgrid.io/operator"
    selectors = settings.watching.label_selectors
    assert selectors.collect(kopf.Resource("", "v1", "pods")) == ["tensorgrid.io/job-name"]
    assert selectors.collect(kopf.Resource("", "v1", "services")) == ["tensorgrid.io/job-name"]
    assert selectors.collect(kopf.Resource("networking.k8s.io", "v1", "networkpolicies")) == ["tensorgrid.io/job-name"]
    assert selectors.collect(kopf.Resource("policy", "v1", "poddisruptionbudgets")) == ["tensorgrid.io/job-name"]


def test_idle_per_object_tasks_let_go_of_their_last_event_soon() -> None:
    """kopf's task per pod holds that pod's last event whole until it idles out: at a thousand new
    jobs, kopf's 5 s kept thousands of them at once."""
    settings = kopf.OperatorSettings()
    registrations.configure_kopf(settings, config.Settings())
    assert settings.queueing.idle_timeout == 0.5 < kopf.OperatorSettings().queueing.idle_timeout
    registrations.configure_kopf(settings, config.Settings(watch_worker_idle_seconds=2.0))
    assert settings.queueing.idle_timeout == 2.0


def test_the_operator_has_no_handlers_that_compare_states() -> None:
    # registrations.NoDiffBase keeps no last-handled state: right only while no handler needs one
    # (on.create/update/delete/resume/field compare states; on.event, index and daemon do not).
    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []  # a handler added there needs kopf's diff base back
    assert [h for h in registry._spawning.get_all_handlers() if getattr(h, "idle", None)] == []
    assert [h.fn.__name__ for h in registry._indexing.get_all_handlers()] == [
        "pods_by_job", "services_by_job", "network_policies_by_job", "disruption_budgets_by_job"]
    settings = kopf.OperatorSettings()
    registrations.configure_kopf(settings, config.Settings())
    assert isinstance(settings.persistence.diffbase_storage, registrations.NoDiffBase)


def test_the_index_and_event_handlers_run_on_the_event_loop() -> None:
    # kopf runs a plain function on a thread for each call: for every pod event, a hand-off
    # costing more than the function itself.
    registry = kopf.get_default_registry()
    every = [*registry._indexing.get_all_handlers(), *registry._watching.get_all_handlers()]
    assert every and all(asyncio.iscoroutinefunction(h.fn) for h in every), \
        [h.fn.__name__ for h in every if not asyncio.iscoroutinefunction(h.fn)]
