"""What a tool output shows: a source view, a diff, a directory listing, search hits, or a log.

:func:`classify` looks at one tool call (its tool name, its command or arguments, the path it
names) and at the output it produced, and says what kind of text the output is and which of its
lines are source code. Consumers use it to keep source code out of error evidence: a
``raise ValueError("...")`` line printed by ``cat``/``sed -n``/an editor view is a line of a file,
not an error that happened; an ``ls`` line naming ``errors.py`` is a file name, not a failure.

Kinds:

- ``source`` — a file's content: ``cat``/``sed -n``/``head``/``nl``/``awk 'NR..'``/``git show
  REV:path``, editor-tool views and edit snippets (OpenHands ``str_replace_editor``, Claude Code
  ``Read``/``Edit``, SWE-agent ``open``/``edit``), with or without line-number prefixes
  (``   12\\t``, ``    12→``, ``12:``);
- ``diff`` — a unified diff or patch (``git diff``, ``diff -u``, an editor's diff result);
- ``listing`` — ``ls``/``find``/``tree``/``Glob``/``find_file``/an editor's directory view;
- ``search`` — ``grep``/``rg``/``git grep`` hits (the hit lines are code when the searched
  files are source files);
- ``log`` — anything else: program output, test runs, builds (the place where error evidence
  lives);
- ``empty`` — no output.

Each line gets a role: ``code`` (a line of a file), ``entry`` (a file name of a listing or
search), ``chrome`` (the tool's own framing: "Here's the result of running `cat -n`",
``[File: x (94 lines total)]``, ``<returncode>0</returncode>``) or ``text`` (anything else: the
only lines that can be evidence). A viewer's own error ("cat: x: No such file or directory") is
``text``.

:meth:`View.definitions` lists the functions and classes a source view shows (name, kind, line),
found with the pygments lexer of the file's language; it is computed on demand and bounded, so
:func:`classify` itself stays a few regex passes over the output.

Ground floor: no state, no I/O, imports nothing from the package but the standard library and
pygments. Deterministic: the same call and output give the same view.
"""

from __future__ import annotations

from functools import lru_cache
from .lazyre import lazy_re
from .record import Field, Record

__all__ = ["Definition", "View", "call_kind", "classify", "is_edit_tool", "language_of", "split_commands"]

SOURCE, DIFF, LISTING, SEARCH, LOG, EMPTY = "source", "diff", "listing", "search", "log", "empty"
CODE, ENTRY, CHROME, TEXT = "code", "entry", "chrome", "text"

_MAX_LINES = 20_000  # lines of one output given a role; the rest are "text" (fail toward evidence)
_MAX_DEF_CHARS = 200_000  # characters of a source view lexed for definitions


class Definition(Record, plain=True, frozen=True):
    """A function or class that a source view shows. ``line`` is the file's line number when the
    view has line-number prefixes, else the 1-based line of the output."""

    name: str
    kind: str  # "function" | "class"
    line: int


class View(Record, plain=True, frozen=True):
    kind: str
    roles: tuple[str, ...]  # one per line of the output (``output.split("\\n")``)
    language: str = ""  # pygments lexer name of the viewed file ("Python", "Pony"), "" if unknown
    path: str = ""  # the file or directory the call names, when there is one
    numbered: bool = False  # source lines carry line-number prefixes
    _code: tuple[tuple[int, str], ...] = Field(default=(), repr=False, compare=False)  # (file line, code text)

    def role(self, i: int) -> str:
        """Role of output line ``i`` (0-based)."""
        return self.roles[i] if 0 <= i < len(self.roles) else TEXT

    def is_code(self, i: int) -> bool:
        return self.role(i) == CODE

    def evidence_ok(self, i: int) -> bool:
        """Whether output line ``i`` may be taken as evidence of what happened (not a line of a
        file, a file name or the tool's framing)."""
        return self.role(i) == TEXT

    @property
    def code_lines(self) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.roles) if r == CODE)

    @property
    def shows_code(self) -> bool:
        return CODE in self.roles

    def definitions(self) -> tuple[Definition, ...]:
        """Functions and classes this view shows, in order of appearance (bounded, on demand)."""
        if self.kind not in (SOURCE, DIFF) or not self._code or not self.language:
            return ()
        return _definitions(self.language, self._code)


# ------------------------------------------------------------------ languages


_LOG_EXT = frozenset({"log", "out", "err", "txt"})
_NAMED = {"makefile": "Makefile", "dockerfile": "Docker", "cmakelists.txt": "CMake", "gemfile": "Ruby",
          "rakefile": "Ruby", "justfile": "Makefile", "containerfile": "Docker"}


@lru_cache(maxsize=1024)
def language_of(path: str) -> str:
    """The pygments lexer name for a file path ("" when unknown or when the file is a log/text)."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    low = base.lower()
    if low in _NAMED:
        return _NAMED[low]
    if "." not in base.strip("."):
        return ""
    ext = low.rsplit(".", 1)[-1]
    if ext in _LOG_EXT or not any(c.isalpha() for c in ext):
        return ""
    return _lexer_name("x." + ext)


@lru_cache(maxsize=1)
def _ext_map() -> dict[str, str]:
    """Extension -> pygments lexer name, from pygments' lexer registry (plain data: no lexer is
    imported). Simple ``*.ext`` patterns only; when several lexers claim an extension the first
    in the registry's sorted order wins (deterministic)."""
    from pygments.lexers._mapping import LEXERS

    claims: dict[str, list[str]] = {}
    for key in sorted(LEXERS):
        _module, name, _aliases, filenames, _mimes = LEXERS[key]
        for pat in filenames:
            if pat.startswith("*.") and all(c not in pat[2:] for c in "*?[]"):
                claims.setdefault(pat[2:].lower(), []).append(name)
    # several lexers for one extension: a plain language over a template combination ("SQL"
    # over "SQL+Jinja"), then the shortest name ("C" over "C++" for .h), then by name
    return {ext: min(names, key=lambda n: ("+" in n, len(n), n)) for ext, names in claims.items()}


@lru_cache(maxsize=512)
def _lexer_name(fname: str) -> str:
    ext = fname.rsplit(".", 1)[-1].lower()
    name = _ext_map().get(ext)
    if name is not None:
        return name
    from pygments.lexers import find_lexer_class_for_filename

    try:
        cls = find_lexer_class_for_filename(fname)
    except Exception:  # pygments raises ClassNotFound and, for odd names, re/fnmatch errors
        return ""
    return cls.name if cls is not None else ""


def _has_ext(path: str) -> bool:
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if "." not in base.strip("."):
        return base.lower() in _NAMED
    ext = base.rsplit(".", 1)[-1]
    return any(c.isalpha() for c in ext)


def _is_log_path(path: str) -> bool:
    low = path.lower().rsplit("/", 1)[-1]
    ext = low.rsplit(".", 1)[-1] if "." in low else ""
    return ext in _LOG_EXT or "log" in low.split(".")[0]


# ------------------------------------------------------------------ commands


_HEREDOC_OPEN = lazy_re(r"<<-?[ \t]*(['\"]?)([A-Za-z_]\w{0,40})\1[^\n]*\n")


def _strip_heredocs(text: str) -> str:
    """Here-document bodies removed (they are data, not commands). Linear: an unclosed body
    runs to the end of the text."""
    out: list[str] = []
    pos = 0
    while True:
        m = _HEREDOC_OPEN.search(text, pos)
        if m is None:
            out.append(text[pos:])
            break
        out.append(text[pos:m.start()])
        out.append(" ")
        tag = m.group(2)
        j = m.end()
        while True:
            k = text.find("\n", j)
            line = text[j:] if k < 0 else text[j:k]
            if line.strip() == tag:
                pos = len(text) if k < 0 else k
                break
            if k < 0:
                return "".join(out)
            j = k + 1
    return "".join(out)
_SEP = lazy_re(r"\|\||&&|[;|\n]")


def split_commands(command: str) -> list[list[str]]:
    """A shell command line as its simple commands (argv lists), here-document bodies removed.

    Quotes are honoured; ``|``, ``||``, ``&&``, ``;`` and newlines separate commands. Never
    raises: an unbalanced quote ends the word at the end of the line."""
    return [list(a) for a in _split_cached(command)]


@lru_cache(maxsize=4096)
def _split_cached(command: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(a) for a in _split(command))


def _split(command: str) -> list[list[str]]:
    text = _strip_heredocs(command) if "<<" in command else command
    out: list[list[str]] = []
    cur: list[str] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            j = text.find(c, i + 1)
            if j < 0:
                j = n
            word.append(text[i + 1:j])
            in_word = True
            i = j + 1
            continue
        if c == "\\" and i + 1 < n:
            word.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if c in " \t":
            if in_word:
                cur.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        if c in ";|&\n":
            if in_word:
                cur.append("".join(word))
                word, in_word = [], False
            if cur:
                out.append(cur)
                cur = []
            i += 2 if text[i:i + 2] in ("&&", "||") else 1
            continue
        word.append(c)
        in_word = True
        i += 1
    if in_word:
        cur.append("".join(word))
    if cur:
        out.append(cur)
    return out


_VIEWERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "batcat", "sed", "awk", "view", "tac"})
_LISTERS = frozenset({"ls", "find", "tree", "fd", "find_file", "dir", "exa", "eza", "search_dir"})
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "search_file"})
_FILTERS = frozenset({"head", "tail", "grep", "egrep", "sort", "uniq", "wc", "cut", "tr", "awk", "sed", "cat", "nl",
                      "less", "more", "column", "true", "xargs"})
_QUIET = frozenset({"cd", "export", "set", "source", ".", "echo", "true", "pushd", "popd", "clear"})
_OPT_ARG = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "grep": {"-e", "-f", "-A", "-B", "-C", "-m", "--include",
            "--exclude", "--exclude-dir"}, "rg": {"-e", "-g", "-t", "-A", "-B", "-C", "-m", "--glob", "--type"},
            "sed": {"-e", "-f"}, "awk": {"-F", "-v", "-f"}, "nl": {"-b", "-s", "-w", "-v", "-i"}}
_NUMBERING_OPTS = {"cat": ("-n", "-b"), "nl": ("",)}


def _operands(argv: list[str]) -> list[str]:
    prog = argv[0].rsplit("/", 1)[-1]
    takes = _OPT_ARG.get(prog, set())
    out: list[str] = []
    skip = False
    script_done = prog not in ("sed", "awk")
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a in takes:
            skip = True
            if prog in ("sed", "awk") and a in ("-e", "-f"):
                script_done = True
            continue
        if a.startswith("-") and len(a) > 1:
            continue
        if a.startswith((">", "<", "2>", "1>", "&>")) or a.isdigit() and a in ("1", "2"):
            continue
        if not script_done:  # sed/awk: the first operand is the script
            script_done = True
            continue
        out.append(a)
    return out


class _Call(Record, plain=True, frozen=False):
    kind: str = LOG
    path: str = ""
    numbered: bool = False
    searched_code: bool | None = None  # search: whether the searched files are source files
    numbered_only: bool = False  # an editor tool: only line-numbered lines are the file's content


def _from_command(command: str) -> _Call:
    cmds = [c for c in split_commands(command) if c]
    # drop redirections into files: `cat > f` writes, it shows nothing
    producers: list[list[str]] = []
    for i, argv in enumerate(cmds):
        prog = argv[0].rsplit("/", 1)[-1]
        if prog in _QUIET or "=" in prog and not prog.startswith("="):
            continue
        if any(a.startswith(">") for a in argv[1:]) or any(a in (">", ">>") for a in argv):
            continue
        if producers and prog in _FILTERS and i > 0:
            continue  # a filter in a pipe or chain after a producer: the producer decides
        producers.append(argv)
    if not producers:
        return _Call(EMPTY)
    kinds: list[_Call] = [_classify_argv(a) for a in producers]
    first = kinds[0]
    if all(k.kind == first.kind for k in kinds):
        if first.kind == SEARCH:
            codes = [k.searched_code for k in kinds]
            first.searched_code = None if None in codes else all(codes)
        return first
    return _Call(LOG)


def _classify_argv(argv: list[str]) -> _Call:
    prog = argv[0].rsplit("/", 1)[-1]
    if prog == "git" and len(argv) > 1:
        sub = argv[1]
        if sub in ("diff", "format-patch"):
            return _Call(DIFF)
        if sub == "show":
            target = next((a for a in argv[2:] if not a.startswith("-")), "")
            if ":" in target and not target.endswith(":"):
                path = target.split(":", 1)[1]
                return _Call(SOURCE, path) if not _is_log_path(path) else _Call(LOG, path)
            return _Call(DIFF)
        if sub == "grep":
            return _Call(SEARCH, searched_code=None)
        if sub in ("ls-files", "ls-tree"):
            return _Call(LISTING)
        return _Call(LOG)
    if prog in ("diff", "colordiff"):
        return _Call(DIFF)
    if prog in _LISTERS:
        ops = _operands(argv)
        return _Call(LISTING, ops[0] if ops else "")
    if prog in _SEARCHERS:
        return _search_call(prog, argv)
    if prog in _VIEWERS:
        if prog == "sed" and any(a.startswith("-i") or a == "--in-place" for a in argv[1:]):
            return _Call(EMPTY)
        if prog == "sed" and "-n" not in argv[1:] and not any(a.startswith("-n") for a in argv[1:]):
            return _Call(LOG)  # a sed filter over something else
        ops = [o for o in _operands(argv) if o not in ("-",)]
        if len(ops) == 1:
            path = ops[0]
            if _is_log_path(path):
                return _Call(LOG, path)
            numbered = prog == "nl" or (prog == "cat" and any(a in ("-n", "-b") for a in argv[1:]))
            return _Call(SOURCE, path, numbered)
        return _Call(LOG)
    return _Call(LOG)


def _search_call(prog: str, argv: list[str]) -> _Call:
    includes = [a.split("=", 1)[1] for a in argv if a.startswith("--include=")]
    nxt = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--include", "-g", "--glob")]
    globs = includes + nxt
    if globs:
        return _Call(SEARCH, searched_code=all(bool(language_of("x" + g.lstrip("*"))) for g in globs))
    ops = _operands(argv)
    if prog == "search_file":
        targets = ops[1:]
    else:
        targets = ops[1:] if not any(a in ("-e", "-f") for a in argv) else ops
    files = [t for t in targets if _has_ext(t)]
    if files:
        return _Call(SEARCH, files[0], searched_code=all(bool(language_of(f)) and not _is_log_path(f) for f in files))
    return _Call(SEARCH, targets[0] if targets else "", searched_code=None)


# ------------------------------------------------------------------ editor tools


_EDITOR_TOOLS = frozenset({"str_replace_editor", "file_editor", "edit_file", "editor", "str_replace_based_edit_tool",
                           "text_editor"})
_READ_TOOLS = frozenset({"read", "read_file", "view_file", "open", "open_file", "goto", "scroll_up", "scroll_down",
                         "notebookread", "view"})
_EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "create", "insert", "replace", "write_file", "notebookedit",
                         "apply_patch", "undo_edit"})
_LIST_TOOLS = frozenset({"glob", "ls", "list_dir", "list_directory", "find_file", "search_dir"})
_SEARCH_TOOLS = frozenset({"grep", "search_file", "search_files", "ripgrep", "rg"})
_SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "terminal", "exec_command",
                          "local_shell", "run", "cmd", "container.exec", "execute_command", "run_command"})
_EDITOR_VERBS = frozenset({"view", "create", "str_replace", "insert", "undo_edit"})
_PATH_RE = lazy_re(r"(?:^|\s)((?:/|\./|~/)?[\w.@+-]+(?:/[\w.@+-]+)+/?|[\w@+-]+\.[A-Za-z0-9]{1,8})(?=\s|$)")


def _from_tool(tool: str, command: str, path: str) -> _Call | None:
    t = tool.lower()
    words = command.split(None, 2) if command else []
    verb = words[0] if words else ""
    if t in _SHELL_TOOLS:
        return None
    if t in _EDITOR_TOOLS:
        if verb in _EDITOR_VERBS:
            target = path or (words[1] if len(words) > 1 else "")
        else:
            target = path or verb
            verb = "view"
        if verb == "view" and not _has_ext(target):
            return _Call(LISTING, target)
        # a view, or an edit's result showing a snippet of the file (or a diff: sniffed)
        return _Call(SOURCE, target, numbered_only=True)
    if t in _READ_TOOLS:
        target = path or _first_path(command)
        if target and _is_log_path(target):
            return _Call(LOG, target)
        return _Call(SOURCE, target, numbered_only=True)
    if t in _EDIT_TOOLS:
        return _Call(SOURCE, path or _first_path(command), numbered_only=True)
    if t in _LIST_TOOLS:
        return _Call(LISTING, path)
    if t in _SEARCH_TOOLS:
        return _Call(SEARCH, path, searched_code=None)
    return None


def _first_path(command: str) -> str:
    head = command.split("\n", 1)[0].strip()
    if head.startswith(("'", '"')):
        return ""
    m = _PATH_RE.search(head)
    return m.group(1) if m else ""


# ------------------------------------------------------------------ line roles


# line-number prefixes: cat -n / OpenHands (`   12\t`), Claude Code (`    12→`), SWE-agent (`12:`)
_NUM_TAB = lazy_re(r"^ *(\d{1,7})(?:\t|→)")
_NUM_COLON = lazy_re(r"^(\d{1,7}):(?!\d)")
_CHROME = lazy_re(
    r"^(?:Here's the result of running `cat -n`|The file \S.* has been (?:edited|updated|created)|"
    r"Here's the files and directories|Review the changes and make sure|"
    r"\[File: .*\]$|\(\d+ more lines? (?:above|below)\)$|\(Open file: .*\)$|\(Current directory: .*\)$|"
    r"Text replaced\. Please review|\(correct indentation, no duplicate lines, etc\)|"
    r"File updated\. Please review|File created successfully|"
    r"</?(?:returncode|output|output_head|output_tail|elided_chars|warning|exception)>|"
    r"<returncode>-?\d+</returncode>$|<system-reminder>|</system-reminder>|"
    r"\[Command finished with exit code|\[The command completed with exit code|\[Python interpreter: |"
    r"Showing page \d|To save on context only part of this file|<response clipped>|<NOTE>|"
    r"The output of your last command was too long|Please try a different command|"
    r"Found \d+ match(?:es)? for |No matches found for |End of matches for |"
    r"\d+ characters elided$|bash-\$$|\$ ?$|"
    r"This is how your edit would have looked if applied|This is the original code before your edit|"
    r"-{20,}$|You either need to 1\) Specify the correct|DO NOT re-run the same failed edit command|"
    r"Your command ran successfully and did not produce any output\.?$|Please understand the fixes and retry|"
    r"\.\.\. \[\d+ lines truncated\] \.\.\.$|\[Showing results with pagination = limit: \d+, offset: \d+\]$)"
)
_VIEWER_ERROR = lazy_re(
    r"^(?:cat|sed|head|tail|nl|less|more|awk|ls|find|grep|rg|tree|bat|git|diff|bash|sh|zsh)(?: \S+)?: |"
    r"^(?:ERROR|Error|error)\b|^Invalid `path` parameter|^The path .* does not exist|"
    r"^File .* does not exist|^No such file|^Traceback \(most recent call last\)|^Usage: "
)
_DIFF_HUNK = lazy_re(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_DIFF_HEAD = lazy_re(r"^(?:diff --git |diff -\S+ |index [0-9a-f]{6,}\.\.|--- \S|\+\+\+ \S|new file mode|deleted file mode|"
                        r"similarity index|rename (?:from|to) |old mode|new mode|Binary files )")
_SEARCH_HIT = lazy_re(r"^((?:[\w.@+~-]*/)*[\w.@+-]+\.[A-Za-z0-9]{1,10})(?::(\d+))?[:-](?!\d+:\d)")
_SEARCH_NUM = lazy_re(r"^(\d{1,7})[:-]")
_BARE_CODE_HINT = lazy_re(r"^\s*(?:def |class |import |from \S+ import |return\b|if |for |while |@|#|//|/\*|\*|\}|\{|fun |fn |func |"
                             r"let |var |const |public |private |use |package |actor |primitive |struct |impl )")


def _roles_source(lines: list[str], numbered_hint: bool, numbered_only: bool) -> tuple[list[str], bool]:
    """Roles of a source view: numbered lines are code; without numbering every line that is not
    the tool's framing or its own error message is code. An editor tool's output without any
    numbered line is the tool's message (an error, a confirmation), not the file."""
    roles = [TEXT] * len(lines)
    numbered = [bool(_NUM_TAB.match(ln)) or bool(_NUM_COLON.match(ln)) for ln in lines]
    count = sum(numbered)
    first = next((ln for ln in lines if ln.strip() and not _CHROME.match(ln.strip())), "")
    if (numbered_only and not count) or (not count and _VIEWER_ERROR.match(first)):
        return _roles_log(lines), False
    is_numbered = numbered_hint or numbered_only or count >= max(1, (len([ln for ln in lines if ln.strip()]) // 3))
    if is_numbered and count:
        for i, ln in enumerate(lines):
            if numbered[i]:
                roles[i] = CODE
            elif _CHROME.match(ln.strip()):
                roles[i] = CHROME
            elif i > 0 and roles[i - 1] == CODE and not ln.strip():
                roles[i] = CODE
        _continuations(lines, roles)
        return roles, True
    inside = True
    for i, ln in enumerate(lines):
        s = ln.strip()
        if _CHROME.match(s):
            roles[i] = CHROME
            if s.endswith(("<output>", "<output_head>", "<output_tail>", "</elided_chars>")):
                inside = True
            elif s.startswith(("<warning>", "The output of your last command")):
                inside = False
            continue
        if not inside:
            continue
        if _VIEWER_ERROR.match(ln) and not (ln[:1].isspace()):
            roles[i] = TEXT
            continue
        roles[i] = CODE
    return roles, False


def _continuations(lines: list[str], roles: list[str]) -> None:
    """A long numbered line wrapped by the tool: an unnumbered line between two code lines whose
    text is not framing is code too."""
    for i in range(1, len(lines) - 1):
        if roles[i] == TEXT and roles[i - 1] == CODE and roles[i + 1] == CODE and lines[i].strip():
            roles[i] = CODE


def _roles_diff(lines: list[str]) -> list[str]:
    roles = [TEXT] * len(lines)
    in_hunk = False
    for i, ln in enumerate(lines):
        if _DIFF_HUNK.match(ln):
            roles[i] = CHROME
            in_hunk = True
            continue
        if _DIFF_HEAD.match(ln) and not (in_hunk and ln[:1] in "+-" and not ln.startswith(("--- a/", "+++ b/", "--- /", "+++ /"))):
            roles[i] = CHROME
            in_hunk = False
            continue
        if in_hunk and (ln[:1] in "+- " or ln == "" or ln.startswith("\\ No newline")):
            roles[i] = CODE if not ln.startswith("\\ No newline") else CHROME
            continue
        if _CHROME.match(ln.strip()):
            roles[i] = CHROME
            continue
        in_hunk = False
    return roles


def _roles_listing(lines: list[str]) -> list[str]:
    roles = [TEXT] * len(lines)
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if _CHROME.match(s):
            roles[i] = CHROME
        elif _VIEWER_ERROR.match(s) or s.startswith(("Permission denied", "total ")) and s.startswith("Permission"):
            roles[i] = TEXT
        else:
            roles[i] = ENTRY
    return roles


def _roles_search(lines: list[str], searched_code: bool | None) -> list[str]:
    roles = [TEXT] * len(lines)
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if _CHROME.match(s) or s == "--":
            roles[i] = CHROME
            continue
        if _VIEWER_ERROR.match(ln):
            continue
        m = _SEARCH_HIT.match(ln)
        if m:
            code = searched_code if searched_code is not None else bool(language_of(m.group(1))) and not _is_log_path(m.group(1))
            roles[i] = CODE if code else TEXT
            continue
        if _SEARCH_NUM.match(ln):
            roles[i] = CODE if searched_code else TEXT
            continue
        if searched_code:
            # a hit of a search in one file (no file prefix) or a context line (-A/-B)
            roles[i] = CODE
    return roles


def _roles_log(lines: list[str]) -> list[str]:
    """A run's output: only the harness framing is marked. Runs of numbered lines (an edit
    tool's preview embedded in an error message, a linter's context) are code."""
    roles = [TEXT] * len(lines)
    numbered = [bool(_NUM_TAB.match(ln)) or bool(_NUM_COLON.match(ln) and not ln[:1].isspace()) for ln in lines]
    for i, ln in enumerate(lines):
        s = ln.strip()
        if _CHROME.match(s):
            roles[i] = CHROME
        elif numbered[i] and _numbered_run(lines, numbered, i):
            roles[i] = CODE
    return roles


def _num(ln: str) -> int | None:
    m = _NUM_TAB.match(ln) or _NUM_COLON.match(ln)
    return int(m.group(1)) if m else None


def _numbered_run(lines: list[str], numbered: list[bool], i: int) -> bool:
    """Line i is in a run of at least 3 consecutive lines numbered n, n+1, n+2 (a file excerpt,
    not a list of "1: error" messages)."""
    here = _num(lines[i])
    if here is None:
        return False
    run = 1
    j = i - 1
    while j >= 0 and numbered[j] and _num(lines[j]) == here - (i - j):
        run += 1
        j -= 1
    j = i + 1
    while j < len(lines) and numbered[j] and _num(lines[j]) == here + (j - i):
        run += 1
        j += 1
    return run >= 3


# ------------------------------------------------------------------ sniffing


def _sniff(lines: list[str]) -> str:
    head = [ln for ln in lines[:40] if ln.strip() and not _CHROME.match(ln.strip())]
    if not head:
        return ""
    if any(_DIFF_HUNK.match(ln) for ln in lines[:80]) and any(ln.startswith(("--- ", "diff ", "+++ ")) for ln in lines[:80]):
        return DIFF
    return ""


@lru_cache(maxsize=4096)
def is_edit_tool(tool: str | None) -> bool:
    """Does the tool change a file (an edit, a write, a patch), its output being at most a
    snippet of the result?"""
    return bool(tool) and tool.lower() in _EDIT_TOOLS


def call_kind(command: str | None = None, tool: str | None = None, path: str | None = None) -> str:
    """What a call's output will be, from the call alone (no output needed): ``source``,
    ``diff``, ``listing``, ``search``, ``log`` or ``empty``. Cheap: no line is looked at."""
    call: _Call | None = None
    if tool:
        call = _from_tool(tool, command or "", path or "")
    if call is None and command:
        call = _from_command(command)
    return call.kind if call is not None else LOG


def classify(output: str, *, command: str | None = None, tool: str | None = None, path: str | None = None) -> View:
    """What ``output`` (a tool result) shows, given the call that produced it.

    Results are cached by content: a conversation compacted every turn classifies each output
    once.
    """
    return _classify_cached(output, command, tool, path)


@lru_cache(maxsize=1024)
def _classify_cached(output: str, command: str | None, tool: str | None, path: str | None) -> View:
    """See :func:`classify`.

    ``tool`` is the tool's name (``bash``, ``str_replace_editor``, ``Read``, ...), ``command``
    the command line or the call's argument text, ``path`` the path argument when the caller
    has it. Unknown calls fall back to sniffing the text; when in doubt the output is a log
    (every line may be evidence)."""
    lines = output.split("\n")
    if len(lines) > _MAX_LINES:
        lines = lines[:_MAX_LINES]
    rest = len(output.split("\n")) - len(lines) if len(lines) == _MAX_LINES else 0
    if not output.strip():
        return View(EMPTY, tuple([TEXT] * (len(lines) + rest)))
    call: _Call | None = None
    cmd = command or ""
    if tool:
        call = _from_tool(tool, cmd, path or "")
    if call is None and cmd:
        call = _from_command(cmd)
    if call is None:
        call = _Call(LOG, path or "")
    kind = call.kind
    sniffed = _sniff(lines)
    if sniffed == DIFF and kind in (SOURCE, LOG, EMPTY):
        kind = DIFF
    if kind == EMPTY:
        kind = LOG  # a command that should print nothing printed something: it is run output
    if kind == SOURCE:
        call.path = _header_path(lines) or call.path
    language = language_of(call.path) if call.path else ""
    numbered = False
    if kind == SOURCE:
        roles, numbered = _roles_source(lines, call.numbered, call.numbered_only)
        if not language and call.path and _is_log_path(call.path):
            kind = LOG
            roles = _roles_log(lines)
    elif kind == DIFF:
        roles = _roles_diff(lines)
        if not language:
            language = _diff_language(lines)
    elif kind == LISTING:
        roles = _roles_listing(lines)
    elif kind == SEARCH:
        roles = _roles_search(lines, call.searched_code)
    else:
        roles = _roles_log(lines)
    _harness_blocks(lines, roles)
    roles_t = tuple(roles) + (TEXT,) * rest
    code: tuple[tuple[int, str], ...] = ()
    if kind in (SOURCE, DIFF) and CODE in roles:
        code = tuple(_code_lines(lines, roles, numbered, kind))
    return View(kind, roles_t, language, call.path, numbered, code)


_BLOCK_OPEN = lazy_re(r"^\s*<(system-reminder|warning)>")
_BLOCK_CLOSE = {"system-reminder": "</system-reminder>", "warning": "</warning>"}


def _harness_blocks(lines: list[str], roles: list[str]) -> None:
    """The harness's own notes inside a tool output (``<system-reminder>``, mini-swe-agent's
    ``<warning>`` about long output) are chrome, whatever the kind. Bounded: an unclosed block
    ends after 20 lines."""
    i, n = 0, len(lines)
    while i < n:
        m = _BLOCK_OPEN.match(lines[i]) if "<" in lines[i] else None
        if not m:
            i += 1
            continue
        close = _BLOCK_CLOSE[m.group(1)]
        j = i
        while j < n and j - i < 20:
            roles[j] = CHROME
            if close in lines[j]:
                break
            j += 1
        i = j + 1


_HEADER_PATH = lazy_re(r"^\[File: (\S+) \(\d+ lines? total\)\]$|^Here's the result of running `cat -n` on (?:a snippet of )?(\S+?):?$|"
                          r"^The file (\S+) has been (?:edited|updated)")


def _header_path(lines: list[str]) -> str:
    for ln in lines[:40]:
        m = _HEADER_PATH.match(ln.strip()) if ln[:1] in "[HT" else None
        if m:
            return next(g for g in m.groups() if g)
    return ""


def _diff_language(lines: list[str]) -> str:
    for ln in lines[:200]:
        if ln.startswith("+++ ") or ln.startswith("--- "):
            p = ln[4:].split("\t", 1)[0].strip()
            if p != "/dev/null":
                lang = language_of(p[2:] if p.startswith(("a/", "b/")) else p)
                if lang:
                    return lang
    return ""


def _code_lines(lines: list[str], roles: list[str], numbered: bool, kind: str):
    for i, ln in enumerate(lines):
        if roles[i] != CODE:
            continue
        if kind == DIFF:
            if ln.startswith("-"):
                continue  # removed lines are not shown by the new file
            yield i + 1, ln[1:]
            continue
        if numbered:
            m = _NUM_TAB.match(ln) or _NUM_COLON.match(ln)
            if m:
                yield int(m.group(1)), ln[m.end():]
                continue
        yield i + 1, ln


@lru_cache(maxsize=256)
def _lexer_for(language: str):
    """A pygments lexer instance for a lexer name (as :func:`language_of` gives it), or None."""
    from pygments.lexers import find_lexer_class

    cls = find_lexer_class(language)
    return None if cls is None else cls(stripnl=False, ensurenl=False)


def _definitions(language: str, code: tuple[tuple[int, str], ...]) -> tuple[Definition, ...]:
    lexer = _lexer_for(language)
    if lexer is None:
        return ()
    from pygments.token import Name

    text_parts: list[str] = []
    numbers: list[int] = []
    size = 0
    for num, ln in code:
        if size + len(ln) > _MAX_DEF_CHARS:
            break
        text_parts.append(ln)
        numbers.append(num)
        size += len(ln) + 1
    text = "\n".join(text_parts) + "\n"
    out: list[Definition] = []
    seen: set[tuple[str, int]] = set()
    line = 0
    for ttype, value in lexer.get_tokens(text):
        is_class = ttype in Name.Class
        if is_class or (ttype in Name.Function and _is_definition_site(text_parts, line, value)):
            num = numbers[line] if line < len(numbers) else line + 1
            key = (value, num)
            if key not in seen and value.strip():
                seen.add(key)
                out.append(Definition(value, "class" if is_class else "function", num))
        line += value.count("\n")
    return tuple(out)


_DEF_KEYWORDS = lazy_re(r"\b(?:def|fun|fn|func|function|sub|proc|method|be|new|class|struct|interface|trait|"
                           r"actor|primitive|object|module|enum|impl|type)\b|^\s*(?:[\w:<>,*&\[\]]+\s+)+[*&]*\w+\s*\(")


def _is_definition_site(lines: list[str], line: int, name: str) -> bool:
    """Pygments marks some calls as Name.Function in a few lexers; a definition line has a
    definition keyword or a C-style return-type prefix before the name."""
    if line >= len(lines):
        return False
    text = lines[line]
    pos = text.find(name)
    head = text[:pos] if pos >= 0 else text
    return bool(_DEF_KEYWORDS.search(head + name + "("))
