"""Helm charts: found and checked (`chart`, `chart_files`, `archive`), rendered in a worker
(`render`, `worker`), and the template map that puts a rendered field on its template and values
lines (`templatemap`, `templatemap_values`); `charts` is the entry the inputs call.
"""
