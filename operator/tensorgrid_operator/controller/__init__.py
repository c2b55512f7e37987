"""The kopf controller: the only package of the operator that imports kopf.

It registers the watches, indexes and daemons, runs one loop per job that reads the job
and what it owns, calls the pure reconcile, applies the plan through ``cluster``, reads
the job's progress from its metrics, decides the peering mode, and keeps an operator's
state in kopf's memo. Everything below it (``cluster``, ``reconcile``, ``resources``,
``api``) runs without kopf.
"""
