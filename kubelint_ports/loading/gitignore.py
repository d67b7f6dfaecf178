"""Which paths of a walk git ignores, decided from the files git reads and never by running git.

Running git in a linted tree runs that tree's configuration: `core.fsmonitor` in its
`.git/config` is a command git starts for `git ls-files`, and hooks, `core.sshCommand` or a
promisor remote are the same class. So the rules are read here: every `.gitignore` from the work
tree's top down to the path (a deeper file overrides a higher one, and within a file the last
matching pattern wins), then the repository's `info/exclude`, then the user's own excludes at
git's default place (`$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`). Nothing named by
the repository's configuration (`core.excludesFile`) is read, and no configuration is parsed.
Patterns are translated by `pathspec`, which implements git's wildmatch; the rest of git's
semantics is kept here: a directory that is ignored hides everything below it (no `!` brings a
file back), a nested repository (a directory holding `.git`) starts its own rules, and a
`.gitignore` that is a symlink is never read (git 2.32 and later do the same).

Reading is bounded: each file by its size, each file and the whole walk by their count of
patterns, each pattern by its length and its wildcards (Python's regular expressions backtrack:
`*a*a*a*b` costs seconds on one 250-character name). What is passed over is said in `notes`.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable

from kubelint_ports.loading.paths import display_path
from kubelint_ports.sourceroot import git_directories, git_work_tree, read_bounded

MAX_IGNORE_FILE_BYTES = 4 * 2**20  # larger than any real .gitignore; one over it is not read
MAX_PATTERNS_PER_FILE = 20_000  # GitHub's largest templates hold a few hundred
MAX_PATTERNS = 100_000  # over all the files one walk reads (memory)
MAX_WILDCARD_PATTERNS = 5_000  # of those, the ones pathspec compiles (~80 µs each) and tries one by one
MAX_PATTERN_CHARS = 4096  # PATH_MAX: a longer pattern names no path a walk can meet
MATCH_SECONDS = 3.0  # trying wildcard patterns in one walk; real trees spend milliseconds
# Wildcards per pattern: each multiplies the backtracking of Python's regular expressions on a
# hostile name (`*a*a*a*b` on 250 `a`s: 0.7 s). Within these, one try costs under 30 ms on a
# 4 KiB path of such names, and real patterns fit (`*.min.*`, `**/bin/**/*.dll`).
MAX_NAME_STARS = 3  # in a pattern without `/`, matched against a name: `*` runs not ending it
MAX_PATH_WILDCARDS = 3  # in a pattern with `/`: `*` runs (at most 2 between two slashes) and `**`

_DIR_MARK = "ps_d"  # pathspec's group for "matched as a directory, the path continuing below it"
_BOM = b"\xef\xbb\xbf"
_GLOB = frozenset("*?[\\")


class _Pattern:
    """A wildcard pattern: pathspec's regular expression, and whether it is tried against the
    name alone (no `/` in it: git matches it at any level) or the path below its file."""

    __slots__ = ("index", "negated", "regex", "marked", "name_only")

    def __init__(self, index: int, negated: bool, regex, name_only: bool):
        self.index, self.negated, self.regex, self.name_only = index, negated, regex, name_only
        self.marked = _DIR_MARK in regex.groupindex

    def matches(self, path: str, is_dir: bool) -> bool:
        """Whether the pattern matches `path` itself. pathspec's expressions also match what lies
        below a matching directory (the `ps_d` group then stops before the end); that is the
        cascade's business here, decided per directory, so such matches do not count."""
        for found in self.regex.finditer(path):
            if not self.marked or found.start(_DIR_MARK) == -1:
                return True
        if is_dir:  # a directory is also tried as `path/`, which `dir/` patterns want
            end = len(path) + 1
            for found in self.regex.finditer(path + "/"):
                if self.marked and found.end(_DIR_MARK) == end:
                    return True
        return False


SCREEN_PATTERNS = 32  # wildcard patterns joined in one expression; bounds one uninterruptible match
FEW_AFFIXES = 64  # suffixes (prefixes) one `str.endswith` screens at once; past it, a lookup per length


class _Rules:
    """The patterns of one file, for paths below `base` (relative to the work tree). Patterns
    without wildcards (most of them: `node_modules/`, `*.log`, `/dist`, `npm-debug.log*`) are
    looked up by name, path, suffix or prefix, each key keeping only what can decide: its last
    pattern, and its last one that is not for directories only, as (index, negated). Wildcard
    patterns are screened a few dozen at a time by one joined expression, then tried one by one.
    The last matching pattern decides."""

    __slots__ = ("base", "names", "paths", "suffixes", "prefixes", "wildcards", "_suffix_ends", "_prefix_starts",
                 "_suffix_lengths", "_prefix_lengths", "_screens")

    def __init__(self, base: str):
        self.base = base
        self.names: dict[str, list] = {}
        self.paths: dict[str, list] = {}
        self.suffixes: dict[str, list] = {}
        self.prefixes: dict[str, list] = {}
        self.wildcards: list[_Pattern] = []

    @staticmethod
    def add(table: dict[str, list], key: str, index: int, negated: bool, directory_only: bool) -> None:
        slot = table.get(key)
        if slot is None:
            slot = table[key] = [None, None]
        slot[0] = (index, negated)
        if not directory_only:
            slot[1] = (index, negated)

    def finish(self) -> _Rules:
        """Build the screens once every pattern is in."""
        self._suffix_ends, self._prefix_starts = tuple(self.suffixes), tuple(self.prefixes)
        self._suffix_lengths = sorted({len(key) for key in self.suffixes}) if len(self.suffixes) > FEW_AFFIXES else None
        self._prefix_lengths = sorted({len(key) for key in self.prefixes}) if len(self.prefixes) > FEW_AFFIXES else None
        self._screens = [_screen(self.wildcards[start:start + SCREEN_PATTERNS])
                         for start in range(0, len(self.wildcards), SCREEN_PATTERNS)]
        return self

    def rebased(self, base: str) -> _Rules:
        rules = _Rules(base)
        for slot in _Rules.__slots__[1:]:
            setattr(rules, slot, getattr(self, slot))
        return rules

    def verdict(self, path: str, name: str, is_dir: bool, walk: GitIgnored) -> bool | None:
        """True (ignored) or False (re-included) by the last pattern matching `path` (relative to
        `base`, its last part `name`); None when none matches."""
        side = 0 if is_dir else 1
        best, negated = -1, False
        found = []
        if slot := self.names.get(name):
            found.append(slot[side])
        if self.paths and (slot := self.paths.get(path)):
            found.append(slot[side])
        if self._suffix_lengths is not None:
            found += [slot[side] for length in self._suffix_lengths if length <= len(name)
                      and (slot := self.suffixes.get(name[len(name) - length:]))]
        elif self._suffix_ends and name.endswith(self._suffix_ends):
            found += [self.suffixes[suffix][side] for suffix in self._suffix_ends if name.endswith(suffix)]
        if self._prefix_lengths is not None:
            found += [slot[side] for length in self._prefix_lengths if length <= len(name)
                      and (slot := self.prefixes.get(name[:length]))]
        elif self._prefix_starts and name.startswith(self._prefix_starts):
            found += [self.prefixes[prefix][side] for prefix in self._prefix_starts if name.startswith(prefix)]
        for entry in found:
            if entry is not None and entry[0] > best:
                best, negated = entry
        if self._screens and walk.match_seconds > 0:
            started = time.perf_counter()
            deadline = started + walk.match_seconds
            for for_names, for_paths, patterns in reversed(self._screens):
                if patterns[-1].index < best or time.perf_counter() > deadline:
                    break
                if for_names.search(name) or for_paths.search(path) or is_dir and (
                        for_names.search(name + "/") or for_paths.search(path + "/")):
                    matched = next((p for p in reversed(patterns) if p.index > best and
                                    p.matches(name if p.name_only else path, is_dir)), None)
                    if matched is not None:
                        best, negated = matched.index, matched.negated
                        break
            walk.match_seconds -= time.perf_counter() - started
        return None if best < 0 else not negated


def _screen(patterns: list[_Pattern]) -> tuple:
    """(for names, for paths, patterns): an expression for the patterns matched against a name
    and one for those matched against a path, each the patterns' own joined (pathspec's directory
    group made plain): where neither matches, no pattern does."""
    import re
    import warnings

    def joined(regexes: list[str]):
        if not regexes:
            return re.compile("(?!)")  # matches nothing
        try:
            with warnings.catch_warnings():  # `[[:alpha:]]`: `re` warns of a nested set
                warnings.simplefilter("ignore")
                return re.compile("|".join(f"(?:{regex.replace(f'(?P<{_DIR_MARK}>', '(?:')})" for regex in regexes))
        except (re.error, RecursionError, OverflowError):
            return re.compile("")  # matches everywhere: every pattern is tried

    return (joined([p.regex.pattern for p in patterns if p.name_only]),
            joined([p.regex.pattern for p in patterns if not p.name_only]), patterns)


def _trim_trailing_spaces(line: str) -> str:
    """git's `trim_trailing_spaces`: unescaped trailing spaces go, tabs and escaped ones stay."""
    last_space = None
    index = 0
    while index < len(line):
        character = line[index]
        if character == " ":
            if last_space is None:
                last_space = index
        elif character == "\\":
            index += 1
            if index == len(line):
                return line
            last_space = None
        else:
            last_space = None
        index += 1
    return line if last_space is None else line[:last_space]


def _collapse_stars(pattern: str) -> str:
    """Runs of `*` as git's wildmatch reads them: a run that is a whole segment is `**`, any other
    is one `*` (pathspec reads `**x` as two stars, which only costs backtracking)."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        character = pattern[index]
        if character == "\\":
            out.append(pattern[index:index + 2])
            index += 2
            continue
        if character != "*":
            out.append(character)
            index += 1
            continue
        end = index
        while end < len(pattern) and pattern[end] == "*":
            end += 1
        whole_segment = (index == 0 or pattern[index - 1] == "/") and (end == len(pattern) or pattern[end] == "/")
        out.append("**" if whole_segment and end - index > 1 else "*")
        index = end
    return "".join(out)


def _unescaped(text: str, character: str) -> int:
    """How many times `character` stands unescaped in a pattern (a `\\` escapes the next one)."""
    count = 0
    index = 0
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        count += text[index] == character
        index += 1
    return count


def _too_costly(core: str, name_only: bool) -> str | None:
    """Why a wildcard pattern (its stars collapsed, no `!`, no trailing `/`) is not tried here,
    else None."""
    if "[:" in core:
        return "a POSIX character class (`[[:alpha:]]`), which pathspec does not read as git does"
    if name_only:
        name = core[3:] if core.startswith("**/") else core
        stars = _unescaped(name[:-1] if name.endswith("*") and not name.endswith("\\*") else name, "*")
        return f"more than {MAX_NAME_STARS} `*` in a name" if stars > MAX_NAME_STARS else None
    segments = core.split("/")
    stars = [_unescaped(segment, "*") for segment in segments if segment != "**"]
    wildcards = sum(stars) + sum(segment == "**" for segment in segments)
    if wildcards > MAX_PATH_WILDCARDS or any(count > 2 for count in stars):
        return f"more than {MAX_PATH_WILDCARDS} wildcards, or 2 between two slashes"
    return None


def _no_glob(text: str) -> bool:
    return bool(text) and _GLOB.isdisjoint(text)


def read_rules(data: bytes, base: str, path: str, walk: GitIgnored) -> _Rules | None:
    """The rules of an ignore file's bytes, for paths below `base`, read as git reads them (a
    UTF-8 BOM skipped, lines ended by LF with a CR before it dropped, a line ending at a NUL, `#`
    comments, trailing spaces unless escaped), within the walk's budgets; a line git would match
    but this does not try is said in the walk's notes and skipped."""
    import re
    import warnings

    if data.startswith(_BOM):
        data = data[len(_BOM):]
    rules = _Rules(base)
    index = 0
    passed_over: list[str] = []
    for line_number, raw in enumerate(data.split(b"\n"), 1):
        line = (raw[:-1] if raw.endswith(b"\r") else raw).split(b"\0", 1)[0]  # git ends the line at a NUL
        if not line or line.startswith(b"#"):
            continue
        if index >= MAX_PATTERNS_PER_FILE or walk.patterns_left <= 0:
            walk.notes.append(f"{_shown(path)}: only the first {index:,} patterns are used (limit of patterns per "
                              "file and per walk; what the rest ignore is linted)")
            break
        text = _trim_trailing_spaces(line.decode("utf-8", "surrogateescape"))
        negated = text.startswith("!")
        body = _collapse_stars(text[negated:])
        if not body:
            continue
        if len(body) > MAX_PATTERN_CHARS:
            passed_over.append(f"{line_number} (longer than {MAX_PATTERN_CHARS} characters)")
            continue
        directory_only = body.endswith("/")
        core = body[:-1] if directory_only else body
        if not core:
            continue
        index += 1
        walk.patterns_left -= 1
        entry = (index, negated, directory_only)
        if "/" not in core and _no_glob(core):
            rules.add(rules.names, core, *entry)
        elif core.startswith("**/") and "/" not in core[3:] and _no_glob(core[3:]):
            rules.add(rules.names, core[3:], *entry)
        elif "/" not in core and core.startswith("*") and _no_glob(core[1:]):
            rules.add(rules.suffixes, core[1:], *entry)
        elif "/" not in core and core.endswith("*") and _no_glob(core[:-1]):
            rules.add(rules.prefixes, core[:-1], *entry)
        elif "/" in core and _no_glob(core) and "//" not in core and not core.endswith("/") and core != "/":
            rules.add(rules.paths, core[1:] if core.startswith("/") else core, *entry)
        else:
            name_only = "/" not in core or (core.startswith("**/") and "/" not in core[3:])
            problem = _too_costly(core, name_only)
            if problem is None and body[-1].isspace() and not body.endswith("\\ "):
                problem = "ends in a blank other than a space, which pathspec drops and git keeps"
            if problem is None and walk.wildcards_left <= 0:
                problem = f"over {MAX_WILDCARD_PATTERNS:,} wildcard patterns in the walk"
            if problem is not None:
                passed_over.append(f"{line_number} ({problem})")
                continue
            from pathspec import GitIgnoreSpec

            if body.endswith("/**/"):  # pathspec reads `dir/**/` as `dir/`; git, as the directories below it
                body += "*/"
            if body.startswith(("!", "#")):  # `!!x`, `!#x`: git reads one `!`, the rest is the pattern
                body = "\\" + body
            try:
                with warnings.catch_warnings():  # `[[:alpha:]]` makes `re` warn of a nested set
                    warnings.simplefilter("ignore")
                    compiled = GitIgnoreSpec.from_lines([body]).patterns
            except (ValueError, re.error, RecursionError):  # pathspec's error is a ValueError
                continue  # git matches nothing with it either (a trailing `\`)
            walk.wildcards_left -= 1
            rules.wildcards.extend(_Pattern(index, negated, p.regex, name_only) for p in compiled
                                   if p.include is not None and p.regex is not None)
    if passed_over:
        walk.notes.append(f"{_shown(path)}: patterns passed over, what they ignore is linted: line "
                          f"{', '.join(passed_over[:5])}{' and more' if len(passed_over) > 5 else ''}")
    return rules.finish() if index else None


class GitIgnored:
    """`ignored(path, is_dir)`: whether git ignores a path of a walk of `top`.

    `top` and the directories above it are never taken as ignored (a directory named on the
    command line is linted, as a file named is), but their rules apply below. Each directory's
    `.gitignore` is read once, when a path below it is first asked about."""

    def __init__(self, top: str, work_tree: str, real_top: str):
        self.notes: list[str] = []
        self.patterns_left = MAX_PATTERNS
        self.wildcards_left = MAX_WILDCARD_PATTERNS
        self.match_seconds = MATCH_SECONDS
        self._work_tree = work_tree
        self._top_prefix = top if top.endswith(os.sep) else top + os.sep
        relative = os.path.relpath(real_top, work_tree)
        self._top = "" if relative == os.curdir else relative.replace(os.sep, "/")
        self._below_top = self._top + "/" if self._top else ""
        self._chains: dict[str, tuple[_Rules, ...]] = {}  # directory -> its rules, deepest first
        self._directories: dict[str, bool] = {self._top: False}  # directory at or below top -> ignored
        self._user: _Rules | None | bool = False  # the user's excludes, once read

    def __call__(self, path: str, is_dir: bool) -> bool:
        if path.startswith(self._top_prefix):  # a path of the walk: the common case, kept cheap
            below = path[len(self._top_prefix):]
            relative = self._below_top + (below if os.sep == "/" else below.replace(os.sep, "/"))
        else:
            relative = self._relative(path)
            if relative is None or not relative.startswith(self._below_top):
                return False
        parent = relative.rpartition("/")[0]
        parent_ignored = self._directories.get(parent)
        if parent_ignored is None:
            parent_ignored = self._directory_ignored(parent)
        if parent_ignored or is_dir:
            return parent_ignored or self._directory_ignored(relative)
        return self._matched(relative, parent, False)

    def _relative(self, path: str) -> str | None:
        """A path named otherwise than below `top`, relative to the work tree by its real path."""
        relative = os.path.relpath(os.path.realpath(path), self._work_tree)
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            return None
        return "" if relative == os.curdir else relative.replace(os.sep, "/")

    def _directory_ignored(self, directory: str) -> bool:
        """Whether a directory below `top` is ignored, itself or through one above it below `top`
        (git never looks inside an ignored directory); iterative, each directory decided once.
        `top` and what is above it: False (`_directories` holds `top`)."""
        unknown = []
        while directory not in self._directories:
            if not directory.startswith(self._below_top):
                return False
            unknown.append(directory)
            directory = directory.rpartition("/")[0]
        ignored = self._directories[directory]
        for directory in reversed(unknown):
            ignored = ignored or self._matched(directory, directory.rpartition("/")[0], True)
            self._directories[directory] = ignored
        return ignored

    def _matched(self, path: str, parent: str, is_dir: bool) -> bool:
        name = path[len(parent) + 1:] if parent else path
        chain = self._chains.get(parent)
        for rules in self._chain(parent) if chain is None else chain:
            verdict = rules.verdict(path[len(rules.base) + 1:] if rules.base else path, name, is_dir, self)
            if verdict is not None:
                return verdict
        if self.match_seconds <= 0 and not self._slow_noted:
            self._slow_noted = True
            self.notes.append(f"the ignore files' wildcard patterns took over {MATCH_SECONDS:g} s; for the rest "
                              "of the walk only their plain names, paths, suffixes and prefixes are applied")
        return False

    _slow_noted = False

    def _chain(self, directory: str) -> tuple[_Rules, ...]:
        """The rules for the paths in `directory`: its `.gitignore`, its parents' up to the top of
        its repository, then that repository's `info/exclude` and the user's excludes."""
        chain = self._chains.get(directory)
        if chain is not None:
            return chain
        unknown = [directory]
        while unknown[-1] and unknown[-1].rpartition("/")[0] not in self._chains:
            unknown.append(unknown[-1].rpartition("/")[0])
        for directory in reversed(unknown):
            here = self._work_tree + os.sep + directory.replace("/", os.sep) if directory else self._work_tree
            own = self._read(here + os.sep + ".gitignore", directory)
            if not directory or os.path.lexists(here + os.sep + ".git"):  # a repository's top
                below = self._repository_rules(here, directory)
            else:
                below = self._chains[directory.rpartition("/")[0]]
            self._chains[directory] = (own, *below) if own is not None else below
        return self._chains[unknown[0]]

    def _repository_rules(self, here: str, base: str) -> tuple[_Rules, ...]:
        """The repository's `info/exclude`, then the user's excludes (a person's own file, which
        may be a symlink into their dotfiles), for the repository whose top is `base`."""
        found = []
        directories = git_directories(here)
        if directories is not None:
            found.append(self._read(os.path.join(directories[1], "info", "exclude"), base))
        if self._user is False:
            configured = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
            self._user = self._read(os.path.join(configured, "git", "ignore"), "", follow=True) \
                if os.path.isabs(configured) else None
        if self._user:
            found.append(self._user.rebased(base))
        return tuple(rules for rules in found if rules is not None)

    def _read(self, path: str, base: str, *, follow: bool = False) -> _Rules | None:
        """The rules of one ignore file, or None: none there, not readable (said in `notes`), or
        the walk's patterns spent."""
        try:
            data = read_bounded(path, MAX_IGNORE_FILE_BYTES, follow=follow)
        except OSError as error:
            if error.errno == errno.ELOOP:
                self.notes.append(f"{_shown(path)}: a symlink, not read" +
                                  (" (git does not follow one either)" if path.endswith(".gitignore") else ""))
            elif error.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.notes.append(f"{_shown(path)}: not read ({error.strerror or error}); what it ignores is linted")
            return None
        if data is None:
            self.notes.append(f"{_shown(path)}: over {MAX_IGNORE_FILE_BYTES // 2**20} MiB, not read; "
                              "what it ignores is linted")
            return None
        return read_rules(data, base, path, self)


def _shown(path: str) -> str:
    return display_path(path)


def ignore_rules(top: str) -> GitIgnored | None:
    """`ignored(path, is_dir)` for a walk of `top`, with its `notes`; None where `top` is in no
    git work tree."""
    real_top = os.path.realpath(top)
    work_tree = git_work_tree(real_top)
    if work_tree is None:
        return None
    return GitIgnored(top, work_tree, real_top)
