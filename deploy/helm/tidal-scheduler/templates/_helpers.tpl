{{/* The chart's name. */}}
{{- define "tidal-scheduler.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Names of the release's objects (and its Lease): the release name when it contains
the chart's name, else RELEASE-tidal-scheduler. */}}
{{- define "tidal-scheduler.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "tidal-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidal-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tidal-scheduler.labels" -}}
{{ include "tidal-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* What the controller may do with TidalSchedulers and their targets (ClusterRole, or
one Role per watched namespace). Same rules as deploy/rbac.yaml. */}}
{{- define "tidal-scheduler.rules" -}}
- apiGroups: ["scheduling.tidal.io"]
  resources: ["tidalschedulers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["scheduling.tidal.io"]
  resources: ["tidalschedulers/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["scheduling.tidal.io"]
  resources: ["tidalcalendars", "clustertidalcalendars"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "replicasets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["deployments/scale", "statefulsets/scale", "replicasets/scale"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
