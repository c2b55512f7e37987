"""Whether this operator runs with kopf peering or standalone, decided from the peering objects that exist.

kopf given a peering name but no peering object waits for it forever, doing nothing: so
without an explicit ``--peering`` the operator runs standalone unless the object exists
(the Helm chart creates it), and says which it chose and why.
"""

from __future__ import annotations

import dataclasses
import logging

from tensorgrid_operator.cluster import kube
from tensorgrid_operator import config

def resolve_peering(settings: config.Settings) -> config.Settings:
    """Settings with the peering mode decided, logged with the reason (peering objects are looked up).

    kopf with a peering name but no peering object waits for it forever, doing nothing: so
    without an explicit ``--peering`` the operator runs standalone unless the object exists.
    """
    log = logging.getLogger("tensorgrid_operator")
    if settings.leader_election_lease is not None:
        return settings  # a Lease elects the active replica (controller.leadership says which)
    if settings.peering is None:
        log.info("running standalone (--standalone): this replica acts on every TrainingJob")
        return settings
    missing = kube.missing_peering_objects(kube.load_config(settings.kubeconfig), settings.peering,
                                           settings.namespaces)
    if not missing:
        log.info("running with kopf peering %r: of the replicas sharing it, the one with the highest priority acts "
                 "and the others stand by (kopf logs 'Pausing operations in favour of ...' while one does)",
                 settings.peering)
        return settings
    if settings.peering_required:
        raise SystemExit(f"tensorgrid-operator: --peering {settings.peering} given, but {', '.join(missing)} does "
                         f"not exist: apply crds/kopf-peering.yaml and create it (the Helm chart does both), "
                         f"or run one replica with --standalone")
    log.info("running standalone: %s does not exist, so this replica acts on every TrainingJob; to run several "
             "replicas, create it (the Helm chart does) or pass --peering", ", ".join(missing))
    return dataclasses.replace(settings, peering=None)
