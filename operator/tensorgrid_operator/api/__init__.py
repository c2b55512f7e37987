"""The TrainingJob resource (tensorgrid.io/v1) as the operator reads it: no I/O, imports nothing of the operator.

``spec`` (the API group, names, labels, ports and the typed spec with the CRD's
defaults), ``conditions`` (Kubernetes-style conditions and their order in the status)
and ``exitcodes`` (which exit codes ``restartPolicy: ExitCode`` retries). Every other
package of the operator reads the resource through these.
"""
