{{/* Name of the chart, overridable. */}}
{{- define "tensorgrid-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects: the release name, with the chart name unless it contains it. */}}
{{- define "tensorgrid-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "tensorgrid-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tensorgrid-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the operator's pods. */}}
{{- define "tensorgrid-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tensorgrid-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tensorgrid-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tensorgrid-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image: <registry>/<repository>:<tag>, or <repository>:<tag> without a registry. */}}
{{- define "tensorgrid-operator.image" -}}
{{- $repository := .Values.image.repository }}
{{- with .Values.image.registry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
RBAC rules, exactly the API calls the operator makes (tests/charts/test_rbac.py
derives the same set from the code and compares both ways):
- operator/tensorgrid_operator/cluster/kube.py: read a TrainingJob, patch its status, delete
  it (ttlSecondsAfterFinished); list, create and delete its pods and Services;
  get and create the Secret holding a job's TLS certificates (resources/job_certificates.py);
  patch a finished Kueue-queued job's pods (resources/kueue.py: retriable-in-group "false");
- operator/tensorgrid_operator/resources/manifests.py: owner references with blockOwnerDeletion,
  which clusters enforcing owner-reference permissions (OpenShift, the
  OwnerReferencesPermissionEnforcement admission plugin) allow only with update on
  trainingjobs/finalizers;
- operator/tensorgrid_operator/cluster/kube.py, resources/jobobjects.py: create each job's NetworkPolicy
  and PodDisruptionBudget;
- kopf (controller/): list and watch TrainingJobs, pods and Services; patch
  TrainingJobs (its finalizer); create Events (kopf.event); list, watch and patch
  the peering object (kopf peering only); list and watch CRDs and, when given namespaces, namespaces.
*/}}
{{- define "tensorgrid-operator.namespacedRules" -}}
- apiGroups: ["tensorgrid.io"]
  resources: ["trainingjobs"]
  verbs: ["get", "list", "watch", "patch", "delete"]
- apiGroups: ["tensorgrid.io"]
  resources: ["trainingjobs/status"]
  verbs: ["patch"]
- apiGroups: ["tensorgrid.io"]
  resources: ["trainingjobs/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "delete", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["list", "watch", "create"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch", "create"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["create"]
{{- if .Values.kubeflowTFJob.enabled }}
- apiGroups: ["kubeflow.org"]
  resources: ["tfjobs"]
  verbs: ["get", "list", "watch", "patch", "delete"]
- apiGroups: ["kubeflow.org"]
  resources: ["tfjobs/status"]
  verbs: ["patch"]
- apiGroups: ["tensorgrid.io"]
  resources: ["trainingjobs"]
  verbs: ["create"]
{{- end }}
{{- if eq .Values.trainingPods.gangScheduler "volcano" }}
- apiGroups: ["scheduling.volcano.sh"]
  resources: ["podgroups"]
  verbs: ["create", "get", "patch"]
{{- else if eq .Values.trainingPods.gangScheduler "scheduler-plugins" }}
- apiGroups: ["scheduling.x-k8s.io"]
  resources: ["podgroups"]
  verbs: ["create", "get", "patch"]
{{- else if ne .Values.trainingPods.gangScheduler "none" }}
{{- fail (printf "trainingPods.gangScheduler %q is not one of none, volcano, scheduler-plugins" .Values.trainingPods.gangScheduler) }}
{{- end }}
{{- if eq .Values.certificates.issuer "cert-manager" }}
- apiGroups: ["cert-manager.io"]
  resources: ["issuers", "certificates"]
  verbs: ["create", "get"]
{{- else if ne .Values.certificates.issuer "operator" }}
{{- fail (printf "certificates.issuer %q is not one of operator, cert-manager" .Values.certificates.issuer) }}
{{- end }}
{{- end }}

{{/*
The peers the jobs' NetworkPolicies admit to the training pods' metrics port, as JSON:
the operator's own pods (it reads the global step for status.progress) and, when
networkPolicy.prometheus names them, Prometheus' namespaces and pods; then
networkPolicy.extraMetricsPeers as given.
*/}}
{{- define "tensorgrid-operator.metricsPeers" -}}
{{- $operator := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (include "tensorgrid-operator.selectorLabels" . | fromYaml)) }}
{{- $peers := list $operator }}
{{- with .Values.networkPolicy.prometheus }}
{{- if or .namespaceSelector .podSelector }}
{{- $prometheus := dict }}
{{- with .namespaceSelector }}{{ $_ := set $prometheus "namespaceSelector" . }}{{ end }}
{{- with .podSelector }}{{ $_ := set $prometheus "podSelector" . }}{{ end }}
{{- $peers = append $peers $prometheus }}
{{- end }}
{{- end }}
{{- range .Values.networkPolicy.extraMetricsPeers }}
{{- $peers = append $peers . }}
{{- end }}
{{- toJson $peers }}
{{- end }}

{{/*
RBAC of the uninstall hook: what `tensorgrid-operator --remove-finalizers` calls
(operator/tensorgrid_operator/cluster/uninstall.py through cluster/kube.py: list the TrainingJobs,
patch one to remove the finalizer).
*/}}
{{- define "tensorgrid-operator.uninstallRules" -}}
- apiGroups: ["tensorgrid.io"]
  resources: ["trainingjobs"]
  verbs: ["list", "patch"]
{{- end }}

{{- define "tensorgrid-operator.discoveryRules" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if .Values.kubeflowTFJob.enabled }}
# --serve-tfjob reads the TFJob CRD once at start: it serves TFJob only under the chart's.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["tfjobs.kubeflow.org"]
  verbs: ["get"]
{{- end }}
{{- end }}

{{/* "true" when the replicas elect the active one with kopf peering: peering.enabled, and no Lease
leader election (leaderElection.enabled, the default, wins); "" otherwise. */}}
{{- define "tensorgrid-operator.kopfPeering" -}}
{{- if and .Values.peering.enabled (not .Values.leaderElection.enabled) }}true{{ end }}
{{- end }}

{{/* The Lease the replicas elect the active one on: leaderElection.leaseName, or the release's full name. */}}
{{- define "tensorgrid-operator.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (include "tensorgrid-operator.fullname" .) }}
{{- end }}

{{/* The operator's argument saying how its replicas elect the active one: the Lease, kopf peering, or none. */}}
{{- define "tensorgrid-operator.electionArg" -}}
{{- if .Values.leaderElection.enabled }}--leader-election={{ include "tensorgrid-operator.leaseName" . }}
{{- else if .Values.peering.enabled }}--peering={{ .Values.peering.name }}
{{- else }}--standalone
{{- end }}
{{- end }}

{{/*
"true" when the Deployment the release runs now (read from the cluster; nothing under `helm template`)
elects differently: kopf peering before and the Lease now (this chart's default changed), another Lease
name, or the reverse. Old and new replicas would not see each other, so a rolling update would let
both act until the old pod ends: that one upgrade replaces the pods with the Recreate strategy instead.
*/}}
{{- define "tensorgrid-operator.electionChanged" -}}
{{- $running := lookup "apps/v1" "Deployment" .Release.Namespace (include "tensorgrid-operator.fullname" .) }}
{{- if $running }}
{{- $args := list }}
{{- range $running.spec.template.spec.containers }}{{ if eq .name "operator" }}{{ $args = .args | default list }}{{ end }}{{ end }}
{{- if not (has (include "tensorgrid-operator.electionArg" .) $args) }}true{{ end }}
{{- end }}
{{- end }}

{{/* Validation of value combinations that cannot work. */}}
{{- define "tensorgrid-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.peering.enabled) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled or peering.enabled: true (otherwise every replica would act on every job)" }}
{{- end }}
{{- range .Values.watchNamespaces }}
{{- if or (contains "*" .) (contains "?" .) (contains "!" .) (contains "," .) }}
{{- fail (printf "watchNamespaces takes exact namespace names (a Role is created in each), not the pattern %q; leave it empty to watch all namespaces" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The operator pods' affinity: .Values.affinity, plus, with more than one replica and no
podAntiAffinity of its own, anti-affinity between the replicas across nodes
(highAvailability.podAntiAffinity: preferred or required), so one node's loss does not
take the active operator and its standby together.
*/}}
{{- define "tensorgrid-operator.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) }}
{{- $mode := .Values.highAvailability.podAntiAffinity }}
{{- if not (has $mode (list "off" "preferred" "required")) }}
{{- fail (printf "highAvailability.podAntiAffinity %q is not one of off, preferred, required" $mode) }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (ne $mode "off") (not (hasKey $affinity "podAntiAffinity")) }}
{{- $term := dict "labelSelector" (dict "matchLabels" (include "tensorgrid-operator.selectorLabels" . | fromYaml)) "topologyKey" "kubernetes.io/hostname" }}
{{- if eq $mode "required" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- else }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- end }}
{{- end }}
{{- toYaml $affinity }}
{{- end }}
