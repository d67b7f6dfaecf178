"""Helm charts: found and checked (`chart`, `chart_files`, `archive`), rendered in a worker
(`render`, `worker`), and the template map that puts a rendered field on its template and values
lines (`templatemap`, on the template's outline, `template_outline`, and its values,
`templatemap_values`); `template_output` positions `helm template` output given as a file;
`charts` is the entry the inputs call.
"""
