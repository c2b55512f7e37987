"""Everything a TrainingJob owns, built as pure functions of the job and the operator's settings.

``manifests`` (its pods and headless Services, TF_CONFIG, owner references),
``jobobjects`` (its NetworkPolicy, the parameter servers' PodDisruptionBudget, the pod
defaults), ``podgroups`` (the PodGroup of a gang scheduler and what its pods carry),
``kueue`` (the labels and annotations that make Kueue admit the job as one pod group),
``job_certificates`` (its CA and each replica's certificate, in Secrets) and
``cert_manager`` (the Issuers and Certificates of cert-manager's mode). Nothing here
talks to the API server: ``cluster`` creates what these build.
"""
