{{/* The proxy container's ports: the DaemonSet includes this with the root context. */}}
{{- define "definefix.ports" -}}
- name: https
  containerPort: 8443
  hostPort: {{ .Values.proxy.hostPort }}
- name: metrics
  containerPort: {{ .Values.proxy.metricsPort }}
{{- end }}
