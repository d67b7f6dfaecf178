"""`kubelint-ports server` end to end: a real LSP client (pytest-lsp) starts the server as a child
process and speaks to it over stdio, as an editor does (docs/integrations.md, "Editors")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, client_capabilities  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "kubelint_ports", "server"]
WAIT_SECONDS = 60  # a loaded CI machine; a run of these files takes well under a second

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
          ports:
            - containerPort: 80
              hostPort: 31123
"""

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: web
spec:
  type: NodePort
  selector:
    app: api
  ports:
    - port: 80
      targetPort: 8080
      nodePort: 30080
"""

def uri(path: Path) -> str:
    return path.resolve().as_uri()


async def start(root: Path | None, env: dict[str, str] | None = None):
    """The server started and initialised with `root` as its workspace folder."""
    config = ClientServerConfig(server_command=SERVER, server_env={**os.environ, **(env or {})})
    client = await config.start()
    client.registrations = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def registered(params: types.RegistrationParams) -> None:  # as an editor does: noted, answered
        client.registrations.extend(params.registrations)

    folders = [types.WorkspaceFolder(uri=uri(root), name=root.name)] if root is not None else None
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), workspace_folders=folders,
        root_uri=uri(root) if root is not None else None))
    return client


async def stop(client) -> None:
    await client.shutdown_session()
    await client.stop()


def codes(client, path: Path) -> list[tuple[str, int]]:
    return sorted((str(d.code), d.range.start.line + 1) for d in client.diagnostics.get(uri(path), []))


async def diagnostics_until(client, path: Path, wanted) -> list[types.Diagnostic]:
    """Wait for published diagnostics of `path` for which `wanted(codes)` holds."""

    async def wait():
        while not wanted(codes(client, path)):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    await asyncio.wait_for(wait(), WAIT_SECONDS)
    return client.diagnostics[uri(path)]


def open_file(client, path: Path, text: str | None = None, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri(path), language_id="yaml", version=version, text=path.read_text() if text is None else text)))


def change(client, path: Path, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri(path), version=version),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text)]))


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """`edits` (LSP ranges, ASCII text here) applied to `text`, the last first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(position: types.Position) -> int:
        return offsets[position.line] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "deploy.yaml").write_text(DEPLOYMENT)
    (root / "service.yaml").write_text(SERVICE)
    return root


@pytest.mark.asyncio
async def test_an_edit_that_makes_a_collision_shows_it_and_its_fix_removes_it(workspace: Path):
    deploy, service = workspace / "deploy.yaml", workspace / "service.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        open_file(client, service)
        found = await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
        assert "KP201" not in {d.code for d in found}
        # The Service's nodePort typed into the hostPort's number, unsaved: the disk still says 30080.
        change(client, service, 2, (12, 16), (12, 21), "31123")
        found = await diagnostics_until(client, deploy, lambda c: ("KP201", 21) in c)
        collision = next(d for d in found if d.code == "KP201")
        assert collision.severity == types.DiagnosticSeverity.Error
        assert collision.message.startswith("hostPort 31123/TCP collides with nodePort 31123 of web/Service/api")
        assert collision.code_description.href.endswith("/docs/rules/KP201-host-port-node-port-collision.md")
        assert [(r.location.uri, r.location.range.start.line + 1) for r in collision.related_information] == [
            (uri(service), 13)]
        assert "analysis" in collision.data
        # Its related place, in the Service's file, where the edit was made.
        at_service = await diagnostics_until(client, service, lambda c: ("KP201", 13) in c)
        assert next(d for d in at_service if d.code == "KP201").severity == types.DiagnosticSeverity.Information
        warnings = {d.code: d.severity for d in found}
        assert warnings["KP101"] == types.DiagnosticSeverity.Warning

        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri(deploy)), range=collision.range,
            context=types.CodeActionContext(diagnostics=[collision])))
        titles = [action.title for action in actions]
        fix = next(action for action in actions if action.title.startswith("KP201:"))
        assert not fix.is_preferred  # moving a port changes behaviour: an unsafe fix
        assert "Suppress KP201 on this line with a comment" in titles
        edits = fix.edit.changes[uri(deploy)]
        fixed = apply(DEPLOYMENT, edits)
        assert "hostPort: 29999" in fixed
        change(client, deploy, 2, (0, 0), (len(DEPLOYMENT.splitlines()), 0), fixed)
        await diagnostics_until(client, deploy, lambda c: not any(code == "KP201" for code, _ in c))
        await diagnostics_until(client, service, lambda c: c == [])
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_file_created_on_disk_is_linted_after_a_watched_files_notification_or_a_save(workspace: Path):
    """An unsaved edit never adds a file, so its run takes the files the last walk found; a
    watched-files notification, or a save, makes the next run walk again (server/workspace.py)."""
    deploy = workspace / "deploy.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        found = await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
        assert "KP201" not in {d.code for d in found}
        # A tool writes a Service whose nodePort is the Deployment's hostPort.
        # The server asked the editor to report changes to the files a run reads.
        watchers = [w["globPattern"] for r in client.registrations if r.method == "workspace/didChangeWatchedFiles"
                    for w in r.register_options["watchers"]]  # options arrive as JSON: no type to make
        assert "**/*.{yaml,yml,json}" in watchers and "**/*.tpl" in watchers
        created = workspace / "created.yaml"
        created.write_text(SERVICE.replace("name: api", "name: created").replace("30080", "31123"))
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri(created), types.FileChangeType.Created)]))
        await diagnostics_until(client, deploy, lambda c: ("KP201", 21) in c)
        # Gone again, then another one written and the open file saved.
        created.unlink()
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri(created), types.FileChangeType.Deleted)]))
        await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c and "KP201" not in {k for k, _ in c})
        (workspace / "saved.yaml").write_text(SERVICE.replace("name: api", "name: saved").replace("30080", "31123"))
        client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri(deploy))))
        await diagnostics_until(client, deploy, lambda c: ("KP201", 21) in c)
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_the_suppression_comment_action_silences_the_finding(workspace: Path):
    deploy = workspace / "deploy.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        found = await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
        host_port = next(d for d in found if d.code == "KP101")
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri(deploy)), range=host_port.range,
            context=types.CodeActionContext(diagnostics=[host_port])))
        suppress = next(a for a in actions if a.title == "Suppress KP101 on this line with a comment")
        commented = apply(DEPLOYMENT, suppress.edit.changes[uri(deploy)])
        assert "hostPort: 31123  # kubelint-ports: ignore KP101 -- reason\n" in commented
        change(client, deploy, 2, (0, 0), (len(DEPLOYMENT.splitlines()), 0), commented)
        await diagnostics_until(client, deploy, lambda c: ("KP102", 21) in c and ("KP101", 21) not in c)
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_the_workspace_configuration_is_honoured(workspace: Path):
    """`.kubelint-ports.yaml` at the root is read as `lint` reads it: here `ignore:` a rule."""
    (workspace / ".kubelint-ports.yaml").write_text("ignore: [KP102]\n")
    deploy = workspace / "deploy.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        found = await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
        assert "KP102" not in {d.code for d in found}
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_configuration_error_is_said_not_crashed_on(workspace: Path):
    (workspace / ".kubelint-ports.yaml").write_text("fail-on: sometimes\n")
    deploy = workspace / "deploy.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        found = await diagnostics_until(client, deploy, lambda c: any(code == "configuration" for code, _ in c))
        assert found[0].message.startswith("not linted: ")
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_without_a_workspace_folder_the_server_serves_its_working_directory(tmp_path: Path, workspace: Path):
    """No workspace config, no workspace folder: the server lints where it was started, as `lint`."""
    deploy = workspace / "deploy.yaml"
    config = ClientServerConfig(server_command=[sys.executable, "-c", (
        f"import os, sys; os.chdir({str(workspace)!r}); sys.argv = ['kubelint-ports', 'server']; "
        "from kubelint_ports.cli import main; main()")])
    client = await config.start()
    try:
        await client.initialize_session(types.InitializeParams(capabilities=client_capabilities("neovim")))
        open_file(client, deploy)
        await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_file_outside_the_workspace_is_not_read(tmp_path: Path, workspace: Path):
    """A Service outside the root whose nodePort would collide with the workspace's hostPort: were
    it read, the Deployment would get a KP201."""
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(SERVICE.replace("30080", "31123"))
    deploy = workspace / "deploy.yaml"
    client = await start(workspace)
    try:
        open_file(client, outside)
        open_file(client, deploy)
        found = await diagnostics_until(client, deploy, lambda c: ("KP101", 21) in c)
        assert "KP201" not in {d.code for d in found}
        assert list(client.diagnostics.get(uri(outside), [])) == []
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_hostile_buffer_is_refused_within_the_budgets_and_the_server_goes_on(workspace: Path):
    """A buffer over the workspace's `max-file-mib` is refused as a file would be, a nesting bomb
    under it is cut at `max-depth`; the server keeps serving the next edit."""
    (workspace / ".kubelint-ports.yaml").write_text("limits:\n  max-file-mib: 1\n")
    deploy, service = workspace / "deploy.yaml", workspace / "service.yaml"
    client = await start(workspace)
    try:
        open_file(client, deploy)
        huge = SERVICE + "# padding\n" * 200_000  # 2 MB
        open_file(client, service, huge)
        found = await diagnostics_until(client, service, lambda c: ("input-error", 1) in c)
        assert "over the 1 MiB limit" in found[0].message
        bomb = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
        change(client, service, 2, (0, 0), (len(huge.splitlines()), 0), bomb)
        found = await diagnostics_until(client, service, lambda c: c and all(code == "input-error" for code, _ in c)
                                        and "over the 1 MiB" not in client.diagnostics[uri(service)][0].message)
        assert "nest" in found[0].message or "depth" in found[0].message
        change(client, service, 3, (0, 0), (1, 0), SERVICE.replace("30080", "31123"))
        await diagnostics_until(client, deploy, lambda c: ("KP201", 21) in c)
    finally:
        await stop(client)


def test_without_pygls_the_command_says_how_to_install_it(tmp_path: Path):
    """Exit 2 and one sentence naming the install, when the `server` extra is missing."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['pygls'] = None\n")
    result = subprocess.run(SERVER, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "pip install '.[server]'" in result.stderr and "kubelint-ports[server]" in result.stderr
