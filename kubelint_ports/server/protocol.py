"""The language server on pygls: documents opened, changed, saved and closed trigger a run of
the whole workspace (throttled: edits that arrive during a run are linted together after it),
then every open file's diagnostics are published; code actions offer each finding's fix and a
suppression comment.

A run happens in the event loop's thread, the main one, so that the budgets' deadline (a timer
signal, `loading.files.time_limit`) bounds every input as in `lint`; the messages that arrive
meanwhile wait for it."""

from __future__ import annotations

import asyncio
import logging
import os

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kubelint_ports import __version__
from kubelint_ports.server.actions import code_actions
from kubelint_ports.server.diagnostics import by_file, path_of
from kubelint_ports.server.workspace import SettingsError, Workspace

log = logging.getLogger(__name__)


class KubelintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kubelint-ports", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.project: Workspace | None = None
        self.open_paths: dict[str, str] = {}  # absolute path -> uri, every open `file:` document
        self.pending: asyncio.Task | None = None
        self.dirty = False
        self.published: dict[str, list[types.Diagnostic]] = {}
        self.runs = 0

    def start_workspace(self, root: str | None) -> None:
        root = root or os.getcwd()
        os.chdir(root)  # paths as `lint` run in the root shows them; its configuration found there
        self.project = Workspace(root)

    def document_changed(self, uri: str) -> None:
        path = path_of(uri)
        if path is None or self.project is None:
            return
        document = self.workspace.get_text_document(uri)
        path = os.path.abspath(path)
        self.open_paths[path] = uri
        self.project.set_text(path, document.source)
        self.schedule()

    def schedule(self) -> None:
        self.dirty = True
        if self.pending is None or self.pending.done():
            self.pending = asyncio.ensure_future(self.lint_soon())

    async def lint_soon(self) -> None:
        # No fixed wait before the first run (a 0.05 s debounce was a sixth of an edit's latency on
        # 6,800 files): the keystrokes that follow an edit arrive while its run goes on and are
        # linted together after it, so a burst of typing costs two runs, not one per keystroke.
        while self.dirty:
            for _ in range(3):  # let the messages already sent (several didOpen, a burst) be handled
                await asyncio.sleep(0)
            self.dirty = False
            self.lint_and_publish()

    def lint_and_publish(self) -> None:
        project = self.project
        problem = problem_path = None
        try:
            report = project.lint()
        except SettingsError as error:
            report, problem = None, str(error)
            from kubelint_ports.config import find_config
            from pathlib import Path

            found = find_config(Path(project.root))
            problem_path = str(found.resolve()) if found else None
        except Exception as error:  # noqa: BLE001 (a bug: said in the editor, the server keeps serving)
            log.exception("kubelint-ports: internal error")
            report, problem = None, f"internal error (a bug in kubelint-ports; please report it): " \
                                    f"{type(error).__name__}: {str(error)[:300]}"
        self.runs += 1
        wanted = {os.path.realpath(path) for path in self.open_paths if project.inside(path)}
        found = by_file(report, wanted, project.absolute, project.text_of, problem, problem_path)
        for path, uri in self.open_paths.items():
            real = os.path.realpath(path)
            diagnostics = found.get(real, [])
            self.published[uri] = diagnostics
            version = self.workspace.get_text_document(uri).version if uri in self.workspace.text_documents else None
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics, version=version))


server = KubelintServer()


@server.feature(types.INITIALIZE)
def initialize(ls: KubelintServer, params: types.InitializeParams) -> None:
    root = None
    if params.workspace_folders:
        root = path_of(params.workspace_folders[0].uri)
    elif params.root_uri:
        root = path_of(params.root_uri)
    elif params.root_path:
        root = params.root_path
    ls.start_workspace(root)


# What the server asks an editor that can watch files for it to report: the inputs a run reads
# (manifests, charts' templates and archives, .helmignore, the configuration). Without such
# notifications a file another program creates is seen at the next open or save.
WATCHED = ("**/*.{yaml,yml,json}", "**/*.tpl", "**/*.tgz", "**/.helmignore")


@server.feature(types.INITIALIZED)
def initialized(ls: KubelintServer, params: types.InitializedParams) -> None:
    capabilities = ls.client_capabilities.workspace
    watching = capabilities.did_change_watched_files if capabilities is not None else None
    if watching is None or not watching.dynamic_registration:
        return  # the editor cannot watch for us: open and save still walk the workspace again
    future = ls.client_register_capability(types.RegistrationParams([types.Registration(
        id="kubelint-ports-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED]))]))
    # An editor that refuses costs only the notifications: the answer, or its error, is read and dropped.
    future.add_done_callback(lambda done: done.exception())


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: KubelintServer, params: types.DidOpenTextDocumentParams) -> None:
    if ls.project is not None:
        ls.project.tree_changed()  # the file may be new on disk (rare: worth a walk)
    ls.document_changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: KubelintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.document_changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: KubelintServer, params: types.DidSaveTextDocumentParams) -> None:
    if ls.project is not None:
        ls.project.tree_changed()  # a new file saved for the first time is in the tree now
    ls.document_changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: KubelintServer, params: types.DidCloseTextDocumentParams) -> None:
    path = path_of(params.text_document.uri)
    if path is None or ls.project is None:
        return
    path = os.path.abspath(path)
    ls.open_paths.pop(path, None)
    ls.project.set_text(path, None)  # the file on disk counts again
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))
    ls.schedule()


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: KubelintServer, params: types.DidChangeWatchedFilesParams) -> None:
    if ls.project is not None:
        ls.project.tree_changed()  # files created or deleted on disk: walk again
    ls.schedule()  # a file changed on disk (a checkout, a tool): every run reads what changed


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
def code_action(ls: KubelintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    path = path_of(params.text_document.uri)
    project = ls.project
    if path is None or project is None or project.inside(path) is None:
        return []
    report = project.describe()
    return code_actions(report, os.path.realpath(path), params.range, project.absolute, project.text_of,
                        list(params.context.diagnostics))


def run() -> None:
    """Serve one client over standard input and output until it exits."""
    server.start_io()
