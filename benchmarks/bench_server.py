"""The language server (`kubelint-ports server`) on the 10k corpus: figures, never assertions.

    python benchmarks/bench_server.py                    # /tmp/corpus10k, 20 edits
    python benchmarks/bench_server.py --corpus DIR --edits 50

Copies the corpus (gen_corpus.py's: `python3 ../shared/bench/gen_corpus.py --workloads 10000
--nodes 500 --out /tmp/corpus10k --seed 42`) to a workspace under --work with a
`.kubelint-ports.yaml` of `paths: [manifests]` and `nodes: [cluster/nodes.yaml]`, starts the server
as an editor does (a pygls client over stdio), then times:
  first   from opening one manifest to its first diagnostics (a cold run: every file read)
  edit    from a didChange of that file (unsaved) to the diagnostics of that version, N times: the
          median, the fastest and the slowest. The edit changes a value the rules read (the file's
          first hostPort, else containerPort or nodePort, alternating between its own number and
          that number + 1), so the model and the findings really change, as when a user types a
          port; then N edits that only add a comment line (the model unchanged) as a second figure
and prints the machine's load average and processors beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


def workspace(corpus: Path, work: Path) -> Path:
    if not (corpus / "cluster" / "nodes.yaml").is_file() or not (corpus / "manifests").is_dir():
        sys.exit(f"{corpus} is not a whole corpus: python3 ../shared/bench/gen_corpus.py --workloads 10000 "
                 f"--nodes 500 --out {corpus} --seed 42")
    root = work / "workspace"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(corpus, root)
    (root / ".kubelint-ports.yaml").write_text("paths: [manifests]\nnodes: [cluster/nodes.yaml]\n")
    return root


PORT_LINE = re.compile(r"^(\s*-?\s*(?:hostPort|containerPort|nodePort):\s*)(\d+)\s*$", re.MULTILINE)


def value_edit(text: str, version: int) -> str:
    """`text` with its first port number (a hostPort first) as written, or + 1 on odd versions."""
    found = None
    for key in ("hostPort", "containerPort", "nodePort"):
        found = next((match for match in PORT_LINE.finditer(text) if key in match.group(1)), None)
        if found:
            break
    if found is None:
        sys.exit("the edited manifest has no hostPort, containerPort or nodePort to change")
    number = int(found.group(2)) + (version % 2)
    return text[:found.start(2)] + str(number) + text[found.end(2):]


async def measure(root: Path, edits: int) -> dict:
    client = LanguageClient("bench", "1")
    arrived: dict[tuple[str, int | None], float] = {}
    counts: list[int] = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        arrived[(params.uri, params.version)] = time.perf_counter()
        counts.append(len(params.diagnostics))

    await client.start_io(sys.executable, "-m", "kubelint_ports", "server")
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="bench")]))
    client.initialized(types.InitializedParams())
    target = sorted((root / "manifests").rglob("*.yaml"))[0]
    uri, text = target.as_uri(), target.read_text()

    async def until(version: int) -> float:
        while (uri, version) not in arrived:
            await asyncio.sleep(0.001)
        return arrived[(uri, version)]

    started = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)))
    first = await asyncio.wait_for(until(1), 600) - started

    async def edit(version: int, changed: str) -> float:
        started = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=changed)]))
        return await asyncio.wait_for(until(version), 600) - started

    times, shown = [], set()
    for version in range(2, edits + 2):
        times.append(await edit(version, value_edit(text, version)))
        shown.add(counts[-1])
    comments = [await edit(version, value_edit(text, 0) + f"# edit {version}\n")
                for version in range(edits + 2, 2 * edits + 2)]
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"first": first, "edits": times, "comments": comments, "diagnostics": sorted(shown), "file": target}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/corpus10k"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/kubelint-bench-server"))
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    root = workspace(args.corpus, args.work)
    load_before = os.getloadavg()
    result = asyncio.run(measure(root, args.edits))
    load_after = os.getloadavg()
    edits, comments = result["edits"], result["comments"]
    print(f"workspace {root} ({sum(1 for f in (root / 'manifests').rglob('*') if f.is_file())} manifest files); "
          f"edited {result['file'].relative_to(root)} (diagnostics per value edit: "
          f"{' or '.join(map(str, result['diagnostics']))})")
    print(f"first diagnostics after open: {result['first']:.2f} s")
    print(f"value edit -> diagnostics of that version, {len(edits)} edits: median {statistics.median(edits):.3f} s, "
          f"fastest {min(edits):.3f} s, slowest {max(edits):.3f} s")
    print(f"comment edit -> diagnostics of that version, {len(comments)} edits: median "
          f"{statistics.median(comments):.3f} s, fastest {min(comments):.3f} s, slowest {max(comments):.3f} s")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); "
          f"{os.cpu_count()} processors")


if __name__ == "__main__":
    main()
