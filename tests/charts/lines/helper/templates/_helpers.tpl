{{/* The proxy container's ports: the Deployment includes this with the root context. */}}
{{- define "helper.ports" -}}
- name: https
  containerPort: 8443
  hostPort: {{ .Values.proxy.hostPort }}
- name: metrics
  containerPort: {{ .Values.proxy.metricsPort }}
{{- end }}

{{- define "helper.name" -}}
{{ .Release.Name }}-proxy
{{- end }}
