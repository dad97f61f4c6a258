{{- define "mas-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mas-operator.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: maslab
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mas-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The web console's name: its ServiceAccount, Deployment, Service and RBAC. */ -}}
{{- define "mas-operator.consoleName" -}}
{{- printf "%s-console" (include "mas-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mas-operator.serviceAccountName" -}}
{{- default (include "mas-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- /* What reconciling an Application needs in a namespace it watches. No wildcards. */ -}}
{{- define "mas-operator.reconcileRules" -}}
- apiGroups: ["infra.maslab.io"]
  resources: ["applications"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["infra.maslab.io"]
  resources: ["applications/status"]
  verbs: ["get", "patch"]
# ownerReferences with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)
- apiGroups: ["infra.maslab.io"]
  resources: ["applications/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["configmaps", "services", "persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# each deployed agent's own ServiceAccount: no token automounted
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# ... bound to its Application's one Role that may only create Events (denial Events,
# spec.runtime.denial_events): the operator can grant only what it holds, events create below
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# the PodDisruptionBudget of a replicated agent
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# conformance Jobs (spec.conformance): created once and never updated, deleted when stale;
# the verdicts are their pods' termination messages, read from a list
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# only the metadata (resourceVersion) of referenced Secrets, for the config hash
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/*
The API server as a pod's traffic reaches it: after the kubernetes Service's translation,
its endpoints' addresses and ports, as JSON {"cidrs": [...], "ports": [...]}. Unless the
values (networkPolicy.apiServer) name them, they are read from the cluster at install (helm
lookup of the EndpointSlice default/kubernetes); without a cluster (helm template), any
address on 443 and 6443. The operator's NetworkPolicy uses them, and the operator puts them
in every agent's NetworkPolicy (--api-server-cidr/--api-server-port): an agent's caller
check reads the cluster issuer's keys there.
*/}}
{{- define "mas-operator.apiServer" -}}
{{- $np := .Values.networkPolicy -}}
{{- $cidrs := $np.apiServer.cidrs -}}
{{- $ports := $np.apiServer.ports -}}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- if not $np.apiServer.cidrs -}}
{{- range ($slice.endpoints | default list) -}}
{{- range (.addresses | default list) -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $np.apiServer.ports -}}
{{- range ($slice.ports | default list) -}}
{{- $ports = append $ports .port -}}
{{- end -}}
{{- end -}}
{{- $ports = $ports | default (list 443 6443) | uniq -}}
{{- $cidrs = $cidrs | uniq -}}
{{- dict "cidrs" $cidrs "ports" $ports | toJson -}}
{{- end -}}
