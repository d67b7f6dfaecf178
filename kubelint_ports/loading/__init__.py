"""Files, directories, standard input, Helm charts and Kustomize directories -> Kubernetes object
documents with positions. This face re-exports the stage's parts: `inputs` (what the command line
names, walked and read, in worker processes when large), `manifests` (the YAML/JSON reader),
`documents` (a document's place and `LoadResult`), `paths` (how a path is shown); `helm`,
`kustomize` and `snapshot` read the other formats, `budgets` and `files` bound what any of them
reads. The stage's own modules import from the module that defines a name, never through this face.

libyaml's C composer (PyYAML `CSafeLoader`) builds the node tree: it keeps line/column marks,
constructs no Python objects (so no tag can run code) and is the fastest marked path measured
here (see docs/development.md, design notes). Aliases are shared nodes, never copied, and a document whose
aliases would expand past a budget is rejected before anything walks it.

A directory holding `Chart.yaml` is a Helm chart: it is rendered (`loading.helm.charts`, imported only
then) and its raw `templates/` are never read as YAML. A directory holding a kustomization is
rendered the same way (`loading.kustomize.load`): its patches are fragments, not objects.

Trees are read once and let go. A `Document` keeps where it is, not its tree: the file (or the
bytes, for standard input and rendered charts), the character span of its root and the line and
column where it starts. Loading hands each document, its tree held, to a `reader` (the model's
extraction: `model.build.ModelReader`), then drops the tree: whatever the rules need must be
read into the model then. `Document.root` still works afterwards: it composes the document's span
again (the span padded with as many line breaks and spaces as precede it, so every mark is the
file's own), and `Document.location(field_path)` keeps its meaning for ANY field path, exact
path else deepest ancestor present. So a new field path in the model needs no bookkeeping to be
positionable; but a check that reads `document.root` pays a compose per call. Where positions are
wanted in bulk (findings), `held(documents)` composes each file's text once and each document
once, one at a time. A file that changed since it was read is noticed (CRC32 of its bytes); its
documents then point at their first recorded line, and `changed_sources` names it.

Large inputs are read by a process pool (`loading.pool`): each worker composes whole files and
runs the reader, and only the documents and the reader's pieces travel back, never trees.
"""

from kubelint_ports.loading.paths import STDIN, display_path  # noqa: F401
from kubelint_ports.loading.yaml_files.loader import ManifestLoader  # noqa: F401
from kubelint_ports.loading.yaml_files.documents import (  # noqa: F401
    EMPTY_STDIN,
    KEPT_ANNOTATION_PREFIXES,
    Document,
    DocumentReader,
    LoadResult,
    SourceText,
    changed_sources,
    decoded_text,
    forget_input,
    held,
    internal_error,
    node_location,
    read_bytes,
    read_guarded,
)
from kubelint_ports.loading.kustomize import KUSTOMIZATION_FILES, KUSTOMIZATION_FILES_SET  # noqa: F401
from kubelint_ports.loading.inputs import (  # noqa: F401
    CHART_FILE,
    MANIFEST_SUFFIXES,
    SKIPPED_DIRECTORIES,
    Loading,
    discover,
    is_kustomization,
    load,
)
from kubelint_ports.loading.yaml_files.manifests import (  # noqa: F401
    SPLIT_CHUNK_CHARS,
    SPLIT_MIN_BYTES,
    add_document,
    add_found,
    kept_annotations,
    load_bytes,
    load_file,
    origin_for,
    source_comments,
    split_list,
)
from kubelint_ports.vocabulary import STDIN_NAME  # noqa: F401 (the name shown for standard input)
