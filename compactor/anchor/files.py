"""What a tool call did to files and to the environment, read from its arguments.

:func:`call_effects` looks at one typed tool call (:class:`~compactor.models.ToolCall`: its tool
name, its parsed arguments, its command, as the reader found them) and
returns the files it read / wrote / deleted and whether it changed state otherwise (package
installs, git commits, ...). It understands:

- file-editor tools with JSON arguments: ``str_replace_editor`` / ``file_editor`` style
  (``command`` = view / create / str_replace / insert / undo_edit, ``path``), Claude Code
  ``Read`` / ``Write`` / ``Edit`` / ``MultiEdit`` / ``NotebookEdit``, Gemini ``read_file`` /
  ``write_file`` / ``replace``, SWE-agent 1.x ``open`` / ``create`` / ``edit`` / ``insert``
  (which edit the open file), Codex ``apply_patch`` patches;
- SWE-agent text commands: ``open <path>``, ``create <path>``, ``edit N:M`` (the open file);
- shell commands (``bash``, ``execute_bash``, ``shell``, ...): ``cat``/``head``/``tail``/
  ``sed -n``/``nl``/``less`` read; ``> f``/``>> f`` redirects, ``tee``, ``sed -i``, ``touch``,
  ``cp``/``mv`` destinations write; ``rm``, ``git rm``, ``mv`` sources delete. Here-document
  bodies are skipped (they are data, not commands).

Only what the arguments say is reported; a script that writes files from inside is not seen.
"""

from __future__ import annotations

import re
import shlex

import regex
from ..lazyre import lazy_re, lazy_regex
from ..record import Field, Record

from ..formats.calls import command_value, vocabulary
from ..models import CallKind, ToolCall

__all__ = ["CallEffects", "call_effects", "looks_like_file", "norm_path", "shell_effects"]

READ, WRITE, DELETE = "read", "write", "deleted"


class CallEffects(Record, plain=True, frozen=False):
    ops: list[tuple[str, str]] = Field(default_factory=list)  # (path, read | write | modify | deleted)
    kind: str = "other"  # edit | shell | read | other
    commands: int = 0  # simple commands in a shell line
    state_change: str = ""  # a state-changing command without file effects (pip install, git commit)
    open_file: str | None = None  # new open file (SWE-agent open/create)
    detail: str = ""  # short description of an edit (old → new excerpt, line range)
    action: str = ""  # short text of the call

    def add(self, path: str, op: str) -> None:
        p = norm_path(path)
        if p and (p, op) not in self.ops:
            self.ops.append((p, op))


# ------------------------------------------------------------------ paths

_KNOWN_FILES = {"makefile", "dockerfile", "license", "readme", "gemfile", "rakefile", "procfile", "jenkinsfile",
                "vagrantfile", "codeowners", "changelog", "authors", "notice", "containerfile", "justfile",
                "cmakelists.txt", "go.mod", "go.sum"}
_EXT_RE = lazy_regex(r"^[A-Za-z0-9_+-]{1,12}$")
_BAD_CHARS = lazy_regex(r"[*?\[\]{}$`<>|;&\s'\"\\(),=]")


def norm_path(path: str) -> str:
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    while "//" in p:
        p = p.replace("//", "/")
    while "/./" in p:
        p = p.replace("/./", "/")
    if len(p) > 1:
        p = p.rstrip("/")
    return p


def looks_like_file(path: str) -> bool:
    """A path that names a file (has an extension or is a well-known file name), not a directory,
    a glob, a URL, a number or a device."""
    p = norm_path(path)
    if not p or p.startswith("-") or p.startswith("/dev/") or p.startswith("/proc/") or "://" in p:
        return False
    if _BAD_CHARS.search(p) or path.rstrip().endswith("/"):
        return False
    base = p.rsplit("/", 1)[-1]
    if base in (".", "..") or not base:
        return False
    if base.lower() in _KNOWN_FILES:
        return True
    if base.startswith("."):
        return len(base) > 1 and base[1:2] != "."
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem or not _EXT_RE.match(ext):
        return False
    if not any(c.isalpha() for c in ext) and not any(c.isalpha() for c in stem):
        return False  # a number or version: 1.5, 3.10.2
    return True


# ------------------------------------------------------------------ tool names

_NON_ALNUM = lazy_regex(r"[^a-z0-9]")
_RANGE = lazy_regex(r"\d+:\d+")
_ASSIGN = lazy_regex(r"^[A-Za-z_]\w*=")


def _norm_name(name: str | None) -> str:
    return _NON_ALNUM.sub("", (name or "").lower())


# file editors and shells: the harnesses' tool vocabulary (compactor/formats/tools.toml); the
# finer tables below say what a file tool does to its file (reads, writes, changes, deletes)
_EDITOR = vocabulary().keys(editors=True)
_SHELL = vocabulary().keys(CallKind.shell)
_READ_TOOLS = {"read", "readfile", "view", "viewfile", "open", "openfile", "cat", "notebookread", "readmanyfiles"}
_WRITE_TOOLS = {"write", "writefile", "create", "createfile", "writetofile", "newfile"}
_EDIT_TOOLS = {"edit", "multiedit", "replace", "editfile", "notebookedit", "insert", "append", "strreplace",
               "applydiff", "searchreplace", "replaceinfile", "editnotebook", "rewrite"}
_DELETE_TOOLS = {"delete", "deletefile", "remove", "removefile", "rm"}
_PATH_KEYS = ("path", "file_path", "filename", "absolute_path", "notebook_path", "file", "target_file", "filepath")
_EDITOR_CMDS = {"view": READ, "create": WRITE, "write": WRITE, "str_replace": "modify", "insert": "modify",
                "undo_edit": "modify", "edit": "modify", "append": "modify", "delete": DELETE, "remove": DELETE}
_SWE_TEXT = {"open", "create", "edit", "insert", "append", "goto", "scroll_up", "scroll_down", "search_file",
             "search_dir", "find_file", "submit"}


def _path_of(args: dict) -> str | None:
    for k in _PATH_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return None


def _excerpt(text: object, n: int = 48) -> str:
    if not isinstance(text, str):
        return ""
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


_NEW_LINES_CHARS = 200


def _new_lines(old: object, new: object, n: int = _NEW_LINES_CHARS) -> str:
    """The lines an edit brings in (those of ``new`` that ``old`` does not have), verbatim apart
    from indentation, joined with `` ⏎ ``; bounded to ``n`` characters (cut at a line)."""
    if not isinstance(new, str) or not new.strip():
        return ""
    before = {ln.strip() for ln in old.split("\n")} if isinstance(old, str) else set()
    added = [ln.strip() for ln in new.split("\n") if ln.strip() and ln.strip() not in before]
    if not added:
        return _excerpt(new, n)
    out: list[str] = []
    size = 0
    for ln in added:
        if size + len(ln) > n and out:
            out.append("…")
            break
        out.append(ln if len(ln) <= n else ln[: n - 1] + "…")
        size += len(ln) + 3
    return " ⏎ ".join(out)


def call_effects(call: ToolCall, open_file: str = "") -> CallEffects:
    """Effects of one tool call. ``open_file`` is the file an editor-style agent has open."""
    name = _norm_name(call.name)
    args = call.arguments
    eff = CallEffects()
    if args is not None:
        _json_call(eff, name, args, open_file)
        return eff
    cmd = call.command if call.command else call.raw
    if not cmd:
        return eff
    first = cmd.strip().split(None, 1)[0] if cmd.strip() else ""
    if first in _SWE_TEXT and (name == _norm_name(first) or not name):
        _swe_text(eff, cmd.strip(), open_file)
        return eff
    cli = _editor_cli(cmd.strip(), first)
    if cli is not None:  # "str_replace_editor str_replace /f.py --old_str ... --new_str ...": the tool's own CLI
        _json_call(eff, _norm_name(first), cli, open_file)
        return eff
    if "*** Begin Patch" in cmd:
        _apply_patch(eff, cmd)
        return eff
    eff.action = _first_line(cmd)
    if _FUNC_CALL.match(cmd):  # a pseudo function call (search('...')), not a shell command
        return eff
    eff.kind = "shell"
    shell_effects(cmd, eff)
    return eff


_FUNC_CALL = lazy_regex(r"^\s*[A-Za-z_][\w.]*\(.*\)\s*$", regex.S)


def _editor_cli(cmd: str, first: str) -> dict | None:
    """The arguments of a file-editor tool called as a command (``<editor> <sub-command> <path>
    [--option value]...``, as SWE-agent's tool bundles run it), or None when ``cmd`` is not one."""
    if _norm_name(first) not in _EDITOR:
        return None
    try:
        words = shlex.split(cmd, posix=True)
    except ValueError:  # an unbalanced quote in an edit's text: the sub-command and path still count
        words = cmd.split()[:3]
    if len(words) < 3 or words[1] not in _EDITOR_CMDS:
        return None
    args: dict = {"command": words[1], "path": words[2]}
    i = 3
    while i + 1 < len(words):
        if words[i].startswith("--"):
            args[words[i][2:]] = words[i + 1]
            i += 2
        else:
            i += 1
    return args


def _first_line(cmd: str, n: int = 160) -> str:
    lines = [ln for ln in cmd.strip().splitlines() if ln.strip()]
    first = lines[0].strip() if lines else ""
    if len(first) > n:
        first = first[: n - 1] + "…"
    elif len(lines) > 1:
        first += " …"
    return first


def _json_call(eff: CallEffects, name: str, args: dict, open_file: str) -> None:
    path = _path_of(args)
    sub = args.get("command") if isinstance(args.get("command"), str) else None
    is_editor = name in _EDITOR or (sub in _EDITOR_CMDS and path is not None and name not in _SHELL)
    if name == "applypatch" or any(isinstance(args.get(k), str) and "*** Begin Patch" in args[k]
                                   for k in ("input", "patch", "content")):
        src = next((args[k] for k in ("input", "patch", "content") if isinstance(args.get(k), str)), "")
        _apply_patch(eff, src)
        return
    if is_editor:
        eff.kind = "edit"
        if path is None:
            return
        if sub is None and isinstance(args.get("translated_ipython_code"), str):
            m = _IPY_CMD.search(args["translated_ipython_code"][:500])
            sub = m.group(1) if m else None
        if sub is None:  # OpenHands V0 read/edit actions keep no sub-command
            has_new = any(isinstance(args.get(k), str) and args[k] for k in ("content", "file_text", "new_str"))
            op = "modify" if has_new else READ
        else:
            op = _EDITOR_CMDS.get(sub, "")
        if op == READ:
            eff.kind = "read"
            if looks_like_file(path):
                eff.add(path, READ)
            eff.action = f"view {norm_path(path)}"
        elif op == WRITE:
            eff.add(path, WRITE)
            eff.action = f"create {norm_path(path)}"
            eff.detail = _lines_detail(args.get("file_text") or args.get("content"))
        elif op == "modify":
            eff.add(path, "modify")
            eff.action = f"{sub or 'edit'} {norm_path(path)}"
            eff.detail = _replace_detail(args)
        elif op == DELETE:
            eff.add(path, DELETE)
            eff.action = f"delete {norm_path(path)}"
        return
    if name in _READ_TOOLS:
        eff.kind = "read"
        if path:
            if looks_like_file(path) or name != "view":
                eff.add(path, READ)
            eff.action = f"{name} {norm_path(path)}"
            if name in ("open", "openfile"):
                eff.open_file = norm_path(path)
        return
    if name in _WRITE_TOOLS:
        eff.kind = "edit"
        if path:
            eff.add(path, WRITE)
            eff.action = f"{name} {norm_path(path)}"
            eff.detail = _lines_detail(args.get("content") or args.get("file_text") or args.get("text"))
            if name in ("create",):
                eff.open_file = norm_path(path)
        return
    if name in _EDIT_TOOLS:
        eff.kind = "edit"
        target = path or open_file
        if target:
            eff.add(target, "modify")
            eff.action = f"{name} {norm_path(target)}"
            eff.detail = _replace_detail(args)
        return
    if name in _DELETE_TOOLS:
        eff.kind = "edit"
        if path:
            eff.add(path, DELETE)
            eff.action = f"delete {norm_path(path)}"
        return
    cmd = command_value(args.get("command")) or command_value(args.get("cmd"))
    if cmd is not None and (name in _SHELL or not path):
        eff.kind = "shell"
        eff.action = _first_line(cmd)
        shell_effects(cmd, eff)
        return
    code = args.get("code")
    if isinstance(code, str) and name in ("executeipythoncell", "ipython", "runipython", "python"):
        eff.kind = "shell"
        eff.action = _first_line(code)


_IPY_CMD = lazy_regex(r"""['"]command['"]\s*:\s*['"](\w+)['"]""")


def _lines_detail(content: object) -> str:
    if isinstance(content, str):
        n = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"{n} lines"
    return ""


def _replace_detail(args: dict) -> str:
    old = args.get("old_str", args.get("old_string", args.get("search")))
    new = args.get("new_str", args.get("new_string", args.get("replace")))
    if isinstance(args.get("edits"), list):
        return f"{len(args['edits'])} edits"
    if isinstance(args.get("insert_line"), int):
        return f"insert at line {args['insert_line']}: `{_new_lines(None, new or args.get('text'))}`"
    if isinstance(old, str) and old.strip() and isinstance(new, str) and _only_adds(old, new):
        # the edit keeps every line it replaces: what it brings in is the whole change
        return f"added `{_new_lines(old, new)}`"
    if isinstance(old, str) and old or isinstance(new, str) and new:
        return f"`{_removed_lines(old, new)}` → `{_new_lines(old, new)}`"
    if isinstance(args.get("text"), str):
        return f"insert `{_excerpt(args['text'])}`"
    if isinstance(args.get("new_code"), str):  # debug-gym's rewrite: lines start..end become new_code
        start, end = args.get("start"), args.get("end")
        where = f"lines {start}-{end} → " if isinstance(start, int) and isinstance(end, int) else ""
        return f"{where}`{_new_lines(None, args['new_code'])}`"
    return ""


def _removed_lines(old: object, new: object, n: int = 80) -> str:
    """The lines an edit takes out (those of ``old`` that ``new`` does not keep), bounded; the
    start of ``old`` when every line stays (only their order or spacing changed)."""
    if not isinstance(old, str):
        return ""
    after = {ln.strip() for ln in new.split("\n")} if isinstance(new, str) else set()
    gone = [ln.strip() for ln in old.split("\n") if ln.strip() and ln.strip() not in after]
    return _excerpt(" ⏎ ".join(gone) if gone else old, n)


def _only_adds(old: str, new: str) -> bool:
    """Every line of ``old`` is still in ``new`` (in order) and ``new`` has more: a pure addition."""
    kept = [ln.strip() for ln in new.split("\n") if ln.strip()]
    want = [ln.strip() for ln in old.split("\n") if ln.strip()]
    if len(kept) <= len(want):
        return False
    i = 0
    for ln in kept:
        if i < len(want) and ln == want[i]:
            i += 1
    return i == len(want)


def _swe_text(eff: CallEffects, cmd: str, open_file: str) -> None:
    head, _, rest = cmd.partition("\n")
    words = head.split()
    verb = words[0]
    eff.action = _first_line(cmd)
    if verb == "open" and len(words) >= 2:
        eff.kind = "read"
        p = words[1].strip("'\"")
        eff.add(p, READ)
        eff.open_file = norm_path(p)
    elif verb == "create" and len(words) >= 2:
        eff.kind = "edit"
        p = words[1].strip("'\"")
        eff.add(p, WRITE)
        eff.open_file = norm_path(p)
    elif verb in ("edit", "insert", "append"):
        eff.kind = "edit"
        if open_file:
            eff.add(open_file, "modify")
            rng = words[1] if len(words) > 1 else ""
            if _RANGE.fullmatch(rng):
                body = rest.rsplit("end_of_edit", 1)[0] if "end_of_edit" in rest else rest
                lines = _new_lines(None, body)
                eff.detail = f"lines {rng}: `{lines}`" if lines else f"lines {rng}"
            else:
                args = _quoted_args(head[len(verb):] + ("\n" + rest if rest else ""))
                if verb == "edit" and len(args) == 2:
                    eff.detail = f"`{_excerpt(args[0], 80)}` → `{_new_lines(args[0], args[1])}`"
                else:
                    eff.detail = f"`{_new_lines(None, args[-1] if args else ' '.join(words[1:]))}`"
            eff.action = f"{verb} {open_file} {rng}".strip()
    elif verb in ("goto", "scroll_up", "scroll_down", "search_file"):
        eff.kind = "read"  # the output is (a window of) the open file
    else:
        eff.kind = "other"


def _quoted_args(text: str) -> list[str]:
    """Shell-style arguments of a text command (quotes honoured); [] when they do not parse."""
    try:
        return shlex.split(text)
    except ValueError:
        return []


_PATCH_LINE = lazy_regex(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", regex.M)


def _apply_patch(eff: CallEffects, patch: str) -> None:
    eff.kind = "edit"
    names = []
    for m in _PATCH_LINE.finditer(patch):
        if m.group(3):
            eff.add(m.group(3), WRITE)
            names.append(norm_path(m.group(3)))
            continue
        op = {"Add": WRITE, "Update": "modify", "Delete": DELETE}[m.group(1)]
        eff.add(m.group(2), op)
        names.append(norm_path(m.group(2)))
    eff.action = "apply_patch " + " ".join(names) if names else "apply_patch"


# ------------------------------------------------------------------ shell

_HEREDOC = lazy_regex(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_STATE_CMD = lazy_regex(
    r"""(?x)^(?:
      (?:pip3?|uv\ pip|python3?\ -m\ pip|conda|mamba|micromamba|poetry|pipenv|npm|yarn|pnpm|bun|gem|bundle|cargo|go|apt|apt-get|apk|brew|dnf|yum|composer)
        \s+(?:install|add|remove|uninstall|update|upgrade|get|i|ci|rm)\b
    | git\s+(?:commit|checkout|switch|reset|revert|merge|rebase|cherry-pick|stash|apply|am|pull|clone|init|restore|tag|rm|mv|branch\s+-[dDmM])\b
    | python3?\s+setup\.py\s+(?:install|develop|build_ext)\b
    | make\s+install\b
    | (?:mkdir|chmod|chown|ln)\s
    | patch\s
    )""")
_OPS = {";", "&&", "||", "|", "&", "\n", "(", ")", "|&", ";;", "{", "}"}
_REDIR_OUT = {">", ">>", ">|", "&>", "&>>", "1>", "2>", "1>>", "2>>"}
_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "tac", "view"}
_PREFIX = {"sudo", "env", "time", "nohup", "command", "exec", "nice", "stdbuf"}
_MAX_CMD = 20_000


def _strip_heredocs(cmd: str) -> str:
    """Remove here-document bodies (their lines are data, not commands)."""
    if "<<" not in cmd:
        return cmd
    lines = cmd.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        delims = [m.group(2) for m in _HEREDOC.finditer(line) if not line[m.start():].startswith("<<<")]
        i += 1
        for d in delims:
            while i < len(lines) and lines[i].strip() != d:
                i += 1
            i += 1  # the delimiter line
    return "\n".join(out)


# The tokenizer runs on every shell command an agent sends: compiled by the standard ``re``
# module (several times faster on these patterns than ``regex``). ``re``'s ``\s`` also takes the
# information separators 0x1c-0x1f, ``regex``'s does not: the whitespace the patterns mean is
# spelled out (``regex``'s ``\s``), so both modules read them alike (a test compares the two).
_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_TOKEN = lazy_re(
    r"""(?P<op>&&|\|\||;;|\|&|&>>|&>|>>|>&|>\||<<<|<<-|<<|[;&|<>()\n])"""
    r"""|(?P<comment>(?<![^""" + _WS + r""";&|()])\#[^\n]*)"""
    r"""|(?P<word>(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^""" + _WS + r"""'"\\;&|<>()]+|['"])+)"""
    r"""|[ \t\r]+"""
)
_QUOTED = lazy_re(r"""'([^']*)'|"((?:\\.|[^"\\])*)"|\\(.)|(['"])""", re.S)
_DQ_ESCAPE = lazy_re(r'\\([\\"$`])')


def _unquoted(m) -> str:
    """What a quoted part, an escaped character or a stray quote of a shell word stands for."""
    g = m.group(1)
    if g is not None:
        return g
    g = m.group(2)
    if g is not None:
        return _DQ_ESCAPE.sub(r"\1", g) if "\\" in g else g
    g = m.group(3)
    if g is not None:
        return g
    return ""  # a stray quote


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    return _QUOTED.sub(_unquoted, word)


def _tokens(cmd: str) -> list[str]:
    """Shell words and operators (POSIX quoting; a stray quote is dropped, never an error)."""
    toks: list[str] = []
    for m in _TOKEN.finditer(cmd):
        kind = m.lastgroup
        if kind == "op":
            toks.append(m.group("op"))
        elif kind == "word":
            toks.append(_unquote(m.group("word")))
    return toks


def _simple_commands(toks: list[str]) -> list[list[str]]:
    cmds: list[list[str]] = []
    cur: list[str] = []
    for t in toks:
        if t in _OPS or (t and all(c in "\n;&|()" for c in t)):
            if cur:
                cmds.append(cur)
            cur = []
            continue
        cur.append(t)
    if cur:
        cmds.append(cur)
    return cmds


def shell_effects(cmd: str, eff: CallEffects | None = None) -> CallEffects:
    """File effects and state changes of a shell command line (may hold several commands)."""
    eff = eff if eff is not None else CallEffects(kind="shell")
    if len(cmd) > _MAX_CMD:
        cmd = cmd[:_MAX_CMD]
    body = _strip_heredocs(cmd)
    body = body.replace("\\\n", " ")
    for words in _simple_commands(_tokens(body)):
        eff.commands += 1
        _simple(words, eff)
    if "<<" in cmd and "open(" in cmd:
        _script_writes(cmd, body, eff)
    if eff.kind == "shell" and eff.ops and not eff.state_change and all(op == READ for _, op in eff.ops):
        eff.kind = "read"
    return eff


_HEREDOC_SCRIPT = lazy_regex(r"cat\s*>\s*(\S+\.py)\s*<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)\n\2\s*(?:\n|$)", regex.S)
_OPEN_WRITE = lazy_regex(r"""open\(\s*['"]([^'"\n]{1,200})['"]\s*,\s*['"][wax]b?\+?['"]""")


def _script_writes(cmd: str, rest: str, eff: CallEffects) -> None:
    """A Python script written by a here-document and run in the same command line writes the
    files it opens for writing (``replace_line.py`` editing ``pvlib/temperature.py``)."""
    for m in _HEREDOC_SCRIPT.finditer(cmd[:_MAX_CMD]):
        script, code = m.group(1), m.group(3)
        name = script.rsplit("/", 1)[-1]
        if regex.search(r"\bpython[\d.]*\s+(?:\S*/)?" + regex.escape(name) + r"\b", rest):
            for w in _OPEN_WRITE.finditer(code):
                if looks_like_file(w.group(1)):
                    eff.add(w.group(1), "modify")


def _simple(words: list[str], eff: CallEffects) -> None:
    args: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in _REDIR_OUT or w in (">&",):
            if i + 1 < len(words):
                target = words[i + 1]
                if w != ">&" and looks_like_file(target):
                    eff.add(target, WRITE)
            i += 2
            continue
        if w == "<":
            if i + 1 < len(words) and looks_like_file(words[i + 1]):
                eff.add(words[i + 1], READ)
            i += 2
            continue
        if w in ("<<", "<<-", "<<<"):
            i += 2
            continue
        if w.isdigit() and i + 1 < len(words) and words[i + 1] in _REDIR_OUT | {">&", "<"}:
            i += 1
            continue
        args.append(w)
        i += 1
    # drop VAR=value assignments and wrappers
    while args and (_ASSIGN.match(args[0]) or args[0] in _PREFIX):
        args = args[1:]
    if args and args[0] == "timeout" and len(args) > 2:
        args = args[2:]
    if not args:
        return
    prog = args[0].rsplit("/", 1)[-1]
    rest = args[1:]
    line = " ".join(args)
    if _STATE_CMD.match(line) and not eff.state_change:
        eff.state_change = line if len(line) <= 160 else line[:159] + "…"
    if prog in _READERS:
        for a in _plain(rest, value_opts={"-n", "-c", "--lines", "--bytes"}):
            if looks_like_file(a):
                eff.add(a, READ)
    elif prog == "sed":
        inplace = any(a == "-i" or a.startswith("-i") or a.startswith("--in-place") for a in rest)
        has_script_opt = any(a in ("-e", "-f", "--expression", "--file") for a in rest)
        plain = _plain(rest, value_opts={"-e", "-f", "--expression", "--file", "-l"})
        files = plain if has_script_opt else plain[1:]
        for a in files:
            if looks_like_file(a):
                eff.add(a, "modify" if inplace else READ)
    elif prog == "tee":
        for a in _plain(rest):
            if looks_like_file(a):
                eff.add(a, WRITE)
    elif prog == "touch":
        for a in _plain(rest, value_opts={"-d", "-t", "-r"}):
            if looks_like_file(a):
                eff.add(a, WRITE)
    elif prog in ("cp", "mv"):
        plain = _plain(rest, value_opts={"-t", "--target-directory", "-S", "--suffix"})
        if len(plain) >= 2:
            dest = plain[-1]
            for src in plain[:-1]:
                if looks_like_file(src):
                    eff.add(src, READ if prog == "cp" else DELETE)
            if looks_like_file(dest):
                eff.add(dest, WRITE)
            elif len(plain) == 2 and looks_like_file(plain[0]):
                eff.add(dest.rstrip("/") + "/" + norm_path(plain[0]).rsplit("/", 1)[-1], WRITE)
    elif prog in ("rm", "unlink"):
        for a in _plain(rest):
            if looks_like_file(a):
                eff.add(a, DELETE)
    elif prog == "git" and rest:
        sub = rest[0]
        tail = _plain(rest[1:], value_opts={"-m", "--message", "-C"})
        if sub == "rm":
            for a in tail:
                if looks_like_file(a):
                    eff.add(a, DELETE)
        elif sub == "mv" and len(tail) == 2:
            if looks_like_file(tail[0]):
                eff.add(tail[0], DELETE)
            if looks_like_file(tail[1]):
                eff.add(tail[1], WRITE)
        elif sub in ("checkout", "restore") and "--" in rest:
            for a in rest[rest.index("--") + 1:]:
                if looks_like_file(a):
                    eff.add(a, "modify")


def _plain(args: list[str], value_opts: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Positional arguments: options (and the values of options that take one) removed."""
    out: list[str] = []
    skip = False
    after_dd = False
    for a in args:
        if skip:
            skip = False
            continue
        if after_dd:
            out.append(a)
            continue
        if a == "--":
            after_dd = True
            continue
        if a.startswith("-") and len(a) > 1:
            if a in value_opts:
                skip = True
            continue
        if a.lstrip("+-").isdigit():
            continue
        out.append(a)
    return out
