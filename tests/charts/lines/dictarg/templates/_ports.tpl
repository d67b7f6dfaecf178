{{/* A port item: `.port` the number, `.name` its name, `.ctx` the root context. */}}
{{- define "dictarg.port" -}}
- name: {{ .name }}
  containerPort: {{ .port }}
  hostPort: {{ .port }}
  protocol: {{ .ctx.Values.protocol | default "TCP" }}
{{- end }}
