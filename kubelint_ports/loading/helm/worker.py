"""The Helm render worker: a separate process that renders charts with helm-python-sdk.

Helm's engine is Go code in a native library: a template that loops forever or builds a 1 GiB
string cannot be interrupted from Python, so it runs here, where the parent (`loading.helm.charts`)
can kill it at the deadline, and where the address space is capped (RLIMIT_DATA: Go dies with
"out of memory" instead of taking the machine).

Run by path (`python .../helm/worker.py MEMORY_BYTES`), it imports nothing of kubelint_ports:
start-up is Python's and the SDK's alone. Protocol: one JSON request per line on stdin, one JSON
answer per line on stdout: {"manifests": {...}} or {"error": KIND, "message": TEXT}. A request with
`local_schemas` renders the chart with its values schemas made local (`local_schema`): the parent
found a reference outside one, which Helm's validator would fetch.
"""

import sys

if __name__ == "__main__":
    del sys.path[0]  # this file's directory: its module names must not shadow anything

import json  # noqa: E402

# SDK versions whose private render entry point (the only way to pass --kube-version while
# `Chart.render` has no such keyword) was read and tested here: 0.2.2's `_native.call_string(
# "helm_render", handle, values, options)`, the call `Chart.render` itself makes.
TESTED_PRIVATE_API = frozenset({"0.2.2"})


def limit_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # Windows: the deadline still holds
        return
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def read_values(helm, paths, set_values, set_strings, max_bytes):
    values = {}
    for path in paths:
        try:
            with open(path, "rb") as handle:  # the parent checked it is a regular file
                text = handle.read(max_bytes + 1).decode("utf-8", "replace")
        except OSError as error:
            return None, ("values", f"cannot read values file {path}: {error.strerror or error}")
        if len(text) > max_bytes:
            return None, ("values", f"values file {path} is over the file size limit")
        try:
            parsed = helm.values_from_yaml(text) if text.strip() else {}
        except helm.HelmError as error:
            return None, ("values-file", f"{path}\0{error}")
        merge_values(values, parsed or {})
    for parse, expressions in ((helm.parse_set_string, set_values), (helm.parse_set_string_values, set_strings)):
        for expression in expressions:
            try:
                values = merge_set(values, parse(expression))
            except helm.HelmError as error:
                return None, ("set", f"--set {expression!r}: {error}")
    return values, None


def merge_values(base, override):
    """Helm's merge of values files: maps merge key by key, anything else replaces."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_values(base[key], value)
        else:
            base[key] = value
    return base


def merge_set(base, parsed):
    """`--set` parsed alone, applied like Helm's strvals.ParseInto: maps merge, and a list written
    with indexes (`a[1]=x`, parsed as [None, "x"]) keeps the other items."""
    if isinstance(parsed, dict) and isinstance(base, dict):
        for key, value in parsed.items():
            base[key] = merge_set(base.get(key), value)
        return base
    if isinstance(parsed, list) and isinstance(base, list):
        merged = list(base) + [None] * max(0, len(parsed) - len(base))
        for index, value in enumerate(parsed):
            if value is not None:
                merged[index] = merge_set(merged[index], value)
        return merged
    return parsed


# JSON Schema keywords whose value names another schema: one not starting with `#` lies outside
# the schema document (a URL, a file, a name resolved against an `$id`) and a validator fetches it.
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
SCHEMA_FILE = "values.schema.json"


def outside_reference(key, value):
    return key in REFERENCES and isinstance(value, str) and not value.startswith("#")


def local_schema(schema, known_meta_schemas):
    """A copy of a values schema that refers to nothing outside itself: a subschema holding an
    outside reference becomes `{}` (anything is valid there, as with Helm's
    --skip-schema-validation, but for that subschema only), and a `$schema` that is not a built-in
    meta-schema is dropped (the validator's default draft applies). Everything else still
    validates. Iterative: the parent checked the depth, but not against Python's recursion limit."""
    top = [None]
    stack = [(schema, top, 0)]
    while stack:
        node, container, key = stack.pop()
        if isinstance(node, dict):
            if any(outside_reference(k, v) for k, v in node.items()):
                container[key] = {}
                continue
            kept = [(k, v) for k, v in node.items()
                    if not (k == "$schema" and isinstance(v, str) and v not in known_meta_schemas)]
            copy = dict.fromkeys(k for k, _ in kept)  # the order of the keys is kept
            container[key] = copy
            stack.extend((v, copy, k) for k, v in kept)
        elif isinstance(node, list):
            copy = [None] * len(node)
            container[key] = copy
            stack.extend((v, copy, i) for i, v in enumerate(node))
        else:
            container[key] = node
    return top[0]


def local_schema_archive(data, known_meta_schemas, max_bytes):
    """A chart archive (`helm package`, `Chart.save`) with every values schema in it, the
    subcharts' too, made local (`local_schema`). A schema that is not JSON is left for Helm to
    report. ValueError past `max_bytes` unpacked (the chart was checked, but not its archive)."""
    import io
    import tarfile

    out = io.BytesIO()
    try:
        copy_archive(tarfile.open(fileobj=io.BytesIO(data), mode="r:*"), tarfile.open(fileobj=out, mode="w:gz"),
                     known_meta_schemas, max_bytes)
    except (tarfile.TarError, EOFError) as error:
        raise ValueError(f"not a readable chart archive ({error})") from None
    return out.getvalue()


def copy_archive(source, copy, known_meta_schemas, max_bytes):
    """Members of `source` into `copy`, values schemas made local; both closed after."""
    import io

    total = 0
    with source, copy:
        for member in source:
            if not member.isfile():
                if member.isdir():
                    copy.addfile(member)
                continue  # Helm's own archive holds no links; nothing else is read either
            total += member.size
            if total > max_bytes:
                raise ValueError(f"the chart archive is over {max_bytes} bytes unpacked")
            content = source.extractfile(member).read()
            if member.name.rsplit("/", 1)[-1] == SCHEMA_FILE:
                try:
                    schema = json.loads(content)
                except (ValueError, RecursionError):
                    pass
                else:
                    content = json.dumps(local_schema(schema, known_meta_schemas), indent=1).encode("utf-8")
                    member.size = len(content)
            copy.addfile(member, io.BytesIO(content))


def local_schema_chart(helm, chart, request):
    """The loaded chart again, its values schemas made local (`local_schema`): Helm validates the
    values against what is local in them and fetches nothing. The SDK cannot replace a loaded
    chart's schema, so the chart goes through Helm's own archive: saved (after .helmignore and
    symlinks, as Helm loaded it), rewritten, loaded back."""
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="kubelint-ports-chart-")
    try:
        with open(chart.save(directory), "rb") as handle:
            data = handle.read(request["max_file_bytes"] + 1)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if len(data) > request["max_file_bytes"]:
        raise ValueError("the chart archive is over the file size limit")
    return helm.Chart.load_archive(local_schema_archive(data, frozenset(request["known_meta_schemas"]),
                                                        request["max_file_bytes"]))


def missing_dependencies(chart):
    """Dependencies Chart.yaml declares that charts/ does not hold (Helm's CheckDependencies)."""
    present = {str(dependency.get("name")) for dependency in chart.dependencies}
    missing = []
    for dependency in chart.metadata.get("dependencies") or []:
        name = str(dependency.get("name"))
        if name not in present:
            details = " ".join(str(dependency[key]) for key in ("version", "repository") if dependency.get(key))
            missing.append(f"{name} ({details})" if details else name)
    return missing


def render_call(helm, chart, values, name, namespace, kube_version):
    if not kube_version:
        return chart.render(values, name=name, namespace=namespace)
    import inspect

    if "kube_version" in inspect.signature(chart.render).parameters:
        return chart.render(values, name=name, namespace=namespace, kube_version=kube_version)
    if helm.__version__ not in TESTED_PRIVATE_API:
        raise Unsupported(
            f"--kube-version with the embedded engine needs helm-python-sdk {', '.join(sorted(TESTED_PRIVATE_API))} "
            f"(this is {helm.__version__}); use --helm-binary PATH, or leave --kube-version out")
    from helm_python import _native

    options = {"name": name, "kube_version": kube_version if not kube_version[:1].isdigit() else f"v{kube_version}"}
    if namespace:
        options["namespace"] = namespace
    return json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options)))


class Unsupported(Exception):
    pass


def render(helm, request):
    try:
        chart = helm.Chart.load(request["chart"])
    except helm.HelmError as error:
        return {"error": "load", "message": str(error)}
    try:
        missing = missing_dependencies(chart)
        if missing:
            return {"error": "missing", "message": ", ".join(missing)}
        if request.get("local_schemas"):
            try:
                local = local_schema_chart(helm, chart, request)
            except (helm.HelmError, OSError, ValueError) as error:
                return {"error": "local-schema", "message": str(error)}
            chart.close()
            chart = local
        values, problem = read_values(helm, request["values"], request["set"], request["set_string"],
                                      request["max_file_bytes"])
        if problem:
            return {"error": problem[0], "message": problem[1]}
        name = request["release_name"] or chart.name
        if request["release_name"]:
            try:
                helm.validate_release_name(request["release_name"])
            except helm.HelmError as error:
                return {"error": "release", "message": str(error)}
        try:
            manifests = render_call(helm, chart, values, name, request["namespace"], request["kube_version"])
        except helm.HelmError as error:
            return {"error": "render", "message": str(error)}
        except Unsupported as error:
            return {"error": "unsupported", "message": str(error)}
        size = sum(len(text.encode("utf-8", "surrogatepass")) for text in manifests.values())
        if size > request["max_output_bytes"]:
            return {"error": "output", "message": str(size)}
        return {"manifests": manifests}
    finally:
        chart.close()


def main() -> None:
    limit_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    try:
        import helm_python as helm
    except Exception as error:  # not installed, or a library for another platform
        answer = {"error": "no-engine", "message": f"{type(error).__name__}: {error}"}
        helm = None
    else:
        answer = {"ready": helm.__version__}
    out = sys.stdout
    out.write(json.dumps(answer) + "\n")
    out.flush()
    if helm is None:
        return
    for line in sys.stdin:
        try:
            answer = render(helm, json.loads(line))
        except MemoryError:
            answer = {"error": "memory", "message": ""}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
