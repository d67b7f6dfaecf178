"""One workspace linted as `lint` lints it, with the editor's unsaved texts laid over the files.

The run's settings are resolved as the command line resolves them with no option given, from the
workspace's root (its `.kubelint-ports.yaml`: paths, units, suppressions, limits, ...): the server
runs in the root, as `lint` run there. Each open document inside the root is read from its text
(`loading.files.PLANNED`, the hook `lint --fix` plans its passes with: manifests, charts' templates
and values, kustomizations and node inventories all read through it); a document outside the root
is never read, nor is its file. What each file's bytes gave is kept in memory (`MemoryCache`), so
a run after an edit reads again only what changed; the model and the checks run whole.

The file tree is walked again only when it may have changed (`tree_changed`): on a save, on a
watched-files notification (a file created, changed or deleted on disk), on opening a document
and when the configuration names other paths; a didChange, an unsaved edit, never adds or removes
a file, so its run takes the files the last walk found (`loading.inputs.kept_walks`). A file
created on disk by another program is therefore linted at the latest on the next save, open or
watched-files notification; a file that vanished meanwhile is reported unreadable until then."""

from __future__ import annotations

import dataclasses
import os
import time

from kubelint_ports.findings import Report
from kubelint_ports.loading import budgets, file_cache, files
from kubelint_ports.loading.inputs import kept_walks
from kubelint_ports.loading.memory_cache import MemoryCache


class SettingsError(Exception):
    """The workspace's configuration (or a baseline, a policy) is wrong: the message says where."""


class Workspace:
    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.texts: dict[str, str] = {}  # real path inside the root -> the editor's text
        self.cache = MemoryCache()
        self.walks: dict = {}  # the inputs' walks, kept until the tree may have changed (`tree_changed`)
        self.settings = None
        self.report: Report | None = None
        self.seconds = 0.0  # the last run's
        self.described = False  # the last report's fixes worked out, with their edits

    # --- the editor's documents ------------------------------------------------------------------

    def inside(self, path: str) -> str | None:
        """The real path of `path` when it lies in the workspace, else None (never read)."""
        real = os.path.realpath(path)
        return real if real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep) else None

    def set_text(self, path: str, text: str | None) -> bool:
        """The editor's text of `path` (None: closed, the file on disk counts again); False when the
        path is outside the workspace and so ignored."""
        real = self.inside(path)
        if real is None:
            return False
        if text is None:
            self.texts.pop(real, None)
        else:
            self.texts[real] = text
        return True

    def tree_changed(self) -> None:
        """Files may have been created or deleted: the next run walks the tree again."""
        self.walks.clear()

    def shown(self):
        """Whether a document's file is open in the editor (the only findings published): the
        rules that read one object at a time look at those files' objects only (`LintOptions.shown`).
        A name first, then the real path, for the few files whose name is an open one's."""
        open_files = set(self.texts)
        names = {os.path.basename(path) for path in open_files}
        return lambda path: os.path.basename(path) in names and os.path.realpath(path) in open_files

    def text_of(self, path: str) -> str | None:
        """The text a run read for `path`: the editor's, else the file's (None when unreadable)."""
        real = self.inside(path)
        if real is None:
            return None
        if real in self.texts:
            return self.texts[real]
        try:
            data = files.read_file(real, budgets.current().max_file_bytes)
        except OSError:
            return None
        return data.decode("utf-8-sig", errors="replace")

    # --- a run -----------------------------------------------------------------------------------

    def resolve(self):
        """The settings `lint` would use in the root with no option: SettingsError says what is wrong."""
        from kubelint_ports.config import ConfigError
        from kubelint_ports.policies import PolicyError
        from kubelint_ports.settings import CommandLine, resolve
        from kubelint_ports.suppressions import BaselineError

        try:
            return resolve(CommandLine())
        except (ConfigError, PolicyError, BaselineError, ValueError) as error:
            raise SettingsError(str(error)) from None

    def lint(self) -> Report:
        """Lint the workspace now (in the root: `os.chdir` once, by the caller). SettingsError when
        the configuration is wrong."""
        from kubelint_ports.engine import lint_paths

        started = time.perf_counter()
        files.PLANNED.clear()  # the configuration too is read from its editor's text when open
        files.PLANNED.update((path, text.encode("utf-8", errors="surrogateescape"))
                             for path, text in self.texts.items())
        self.settings = settings = self.resolve()
        limit = settings.options.limits.max_file_bytes
        for path, data in files.PLANNED.items():
            if len(data) > limit:  # one byte past the limit: the reader refuses it as it refuses a file
                files.PLANNED[path] = data[:limit + 1]
        # Worker processes read what the memory does not hold yet (the first run, a large new
        # directory) and hand it back file by file (`MemoryCache.adopt`); an edit reads in-process.
        options = dataclasses.replace(settings.options, cache_dir=None, shown=self.shown())
        self.cache.start_run()
        with file_cache.kept(self.cache), kept_walks(self.walks):
            report = lint_paths(settings.paths, options, policies=settings.policies)
        self.cache.prune()
        self.report, self.described = report, False
        self.seconds = time.perf_counter() - started
        return report

    def describe(self) -> Report | None:
        """The last report with every fixable finding's fix and its edits (worked out once, when a
        code action first asks: the edits read the texts the run read)."""
        report = self.report
        if report is None or self.described:
            return report
        from kubelint_ports.fixes import describe, fixable, reserved_ports_of

        if fixable(report):
            describe(report, edits=True, reserved=reserved_ports_of(report),
                     choices=self.settings.config.fix_choices)
        self.described = True
        return report

    def absolute(self, shown: str) -> str:
        """A path as a report shows it (relative to the root, where the server runs) made absolute."""
        return os.path.normpath(os.path.join(self.root, shown))
