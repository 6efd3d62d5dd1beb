"""The run model: where the work stands, from the typed tool calls and outputs (not from prose).

:class:`RunFold` is a left fold over segments. Every tool call becomes a
:class:`~compactor.models.RunStep` with its action (edit, run, test, read, search, install,
submit), target and command family; its result gives the outcome the tool reported (exit code,
error flag, test counts, the decisive error line and its signature). On top of the steps the fold
keeps the life of each entity:

- each file's net change (created, modified, reverted, deleted; repeated edits collapse into one);
- each error signature: first and last seen, and its state. An error is *resolved* when the
  command family that produced it later succeeds, or when a test run passes after a change; it is
  *stale* when the run changed a file it points at (or an existing file) afterwards and never
  re-ran it, or when the work was handed in; otherwise it is *live*;
- each test's last status, each command family's attempts and failures;
- the task status: working, finished (with or without evidence), submitted, stopped by a step or
  cost limit, stopped by an API or harness error, waiting for the user.

Prose enters only through :func:`compactor.anchor.cues.label_sentence` (the agent's last plan, a
question put to the user, a claim of completion). The fold's whole state is the frozen
:class:`~compactor.models.RunModel` (kept in the anchor's cursor), so folding step by step from a
frozen model gives the same model as folding every segment at once.
"""

from __future__ import annotations

from ..codeview import split_commands
from ..formats.calls import call_of
from functools import lru_cache

import regex

from ..lazyre import lazy_regex
from ..models import (ErrorLife, FamilyLife, FileLife, Role, RunModel, RunStep, Segment, SegmentKind, TestLife,
                      ToolCall)
from ..normalize import normalize
from .cues import label_sentence
from ._tables import missing_modules
from .files import call_effects, looks_like_file

__all__ = ["RunFold", "build_run", "chrome_line", "command_family", "harness_note", "is_check", "step_action"]

_MAX_STEPS = 64
_TAIL_CHARS = 2000
_TAIL_SENTENCES = 3
_MAX_TESTS = 400
_MAX_ERRORS = 200
_SCAN = 200_000  # characters of one output scanned (its head and tail)

_FINISH_TOOLS = frozenset({"submit", "finish", "attempt_completion", "task_complete", "complete_task", "done",
                           "submit_patch", "submit_solution"})
_SUBMIT_CMD = lazy_regex(r"\bCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\b|\bMINI_SWE_AGENT_FINAL_OUTPUT\b|^\s*submit\s*$", regex.M)
_NOISE_PROGS = frozenset({"cd", "export", "set", "source", ".", "pushd", "popd", "true", "sleep", "timeout", "env",
                          "time", "nohup", "unset", "ulimit", "clear"})
_WRAPPERS = frozenset({"timeout", "env", "time", "nohup", "sudo", "command", "exec", "stdbuf"})
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "which", "whereis",
                        "pgrep", "type"})
_READERS = frozenset({"cat", "head", "tail", "less", "more", "ls", "tree", "nl", "wc", "stat", "file", "pwd", "du",
                      "df", "bat", "view", "open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir",
                      "find_file", "diff", "cmp", "echo", "printf", "env", "printenv", "whoami", "uname", "date"})
_GIT_READ = frozenset({"status", "diff", "log", "show", "blame", "branch", "remote", "rev-parse", "ls-files", "grep"})
_GIT_REVERT = frozenset({"checkout", "restore", "stash"})
_INSTALLERS = {"pip": "install", "pip3": "install", "apt": "install", "apt-get": "install", "conda": "install",
               "mamba": "install", "brew": "install", "npm": ("install", "i", "ci", "add"),
               "yarn": ("add", "install"), "pnpm": ("add", "install", "i"), "cargo": "install", "gem": "install",
               "poetry": ("add", "install"), "go": ("get", "install"), "uv": ("add", "pip"), "apk": "add",
               "yum": "install", "dnf": "install"}
_TEST_PROGS = frozenset({"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ctest", "phpunit", "rspec",
                         "runtests.py", "nosetests", "trial"})
_TEST_SUBCMD = {"go": "test", "cargo": "test", "npm": ("test", "t"), "yarn": "test", "pnpm": "test", "bun": "test",
                "make": ("test", "check", "tests"), "mvn": "test", "gradle": "test", "./gradlew": "test",
                "dotnet": "test", "mix": "test", "deno": "test"}
_TEST_SCRIPT = lazy_regex(r"(?:^|/)(?:test_\w+|\w+_test|tests?|runtests)\.(?:py|sh|js|ts)$")

# the exit code a harness printed beside the output
_EXIT = lazy_regex(
    r"<returncode>\s*(-?\d+)\s*</returncode>|^\s*(?:Exit code|exit code|Exit status|exit status|Process exited with code|"
    r"\[Command finished with exit code|Command exited with code|\[exit code:?|Return code:?|returncode:?)\s*:?\s*(-?\d+)",
    regex.M)
_TRACEBACK = "Traceback (most recent call last)"
_FRAME = lazy_regex(r'^\s*File "([^"]+)", line (\d+)')
_EXC_LINE = lazy_regex(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault|Warning)\b(?::.*)?$|"
                       r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)$")
_STRONG = lazy_regex(
    r"^(?:E\s{2,}\S.*|error(?:\[\w+\])?: .+|fatal: .+|FAILED .+|ERROR: .+|E: .+|npm ERR! .+|panic: .+|"
    r"Segmentation fault.*|.*: command not found|(?:\S*/)?(?:ba|da|z|k)?sh: (?:line )?\d+: \S+: not found|"
    r".*: No such file or directory|.*No module named .+|"
    r"[A-Z]\w*(?:Error|Exception): .+|.*\bcannot find symbol\b.*|.*\bundefined reference to\b.*|"
    r"Your proposed edit has introduced new syntax error.*|No replacement was performed.*|.*did not appear verbatim.*|"
    r"Error: .+|.*\bTimeoutExpired\b.*|.*[Tt]imed out after .+|.*Killed$)")
_PYTEST_SUMMARY = lazy_regex(r"^=*\s*(?:(\d+) failed)?(?:,?\s*(\d+) passed)?[^=\n]*\bin [\d.]+s", regex.M)
_PASSED_N = lazy_regex(r"\b(\d+) passed\b")
_FAILED_N = lazy_regex(r"\b(\d+) (?:failed|errors?)\b")
_UNITTEST_RAN = lazy_regex(r"^Ran (\d+) tests? in", regex.M)
_UNITTEST_END = lazy_regex(r"^(OK\b.*|FAILED \((?:failures|errors)=(\d+)(?:, (?:failures|errors)=(\d+))?.*\))$",
                           regex.M)
_CARGO = lazy_regex(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed")
_TEST_ID = lazy_regex(r"^(?:(FAILED|ERROR|PASSED) )?((?:[\w./-]+\.py)::[\w\[\]\-.:/]+)(?: (PASSED|FAILED|ERROR))?",
                      regex.M)
_MASK = lazy_regex(r"0x[0-9a-fA-F]+|\b\d+(?:\.\d+)?\b")

# chrome: harmless lines of package managers, frontends, tools and harnesses; never an error,
# a fact or a goal
_CHROME = lazy_regex(
    r"^(?:debconf: |dpkg-preconfigure: |debconf \(|\(Reading database|Selecting previously unselected|Preparing to unpack|"
    r"Unpacking |Setting up |Processing triggers|update-alternatives: |invoke-rc\.d: |"
    r"WARNING: Running pip as the 'root' user|WARNING: pip is being invoked|\[notice\] |"
    r"npm (?:WARN|notice) |hint: |warning: LF will be replaced|warning: CRLF will be replaced|"
    r"Successfully (?:installed|built|uninstalled|tagged)|Requirement already satisfied|"
    r"A new release of \S+ is available|You are using \S+ version|Consider upgrading|"
    r".*\bversion \d+(?:\.\d+)+ is available\b|.*\bupdate available\b|"
    r"Reading package lists|Building dependency tree|Reading state information|"
    r"(?:Get|Hit|Ign):\d+ |Fetched [\d.,]+ [kMG]?B|"
    r"/exit\s*$|.*\[Omitted long (?:matching )?line\]\s*$)", regex.I)
_OUTCOME = lazy_regex(r"^(?:Successfully (?:installed|built|uninstalled|tagged)|Requirement already satisfied)")
_CWD_LINE = lazy_regex(r"^(?:<cwd>|Current working directory:|Working directory:|\(Current directory:|cwd: )", regex.I)
# a limit or an API / harness failure that ended the run (outside the tools' own output)
_LIMIT = lazy_regex(
    r"\b(?:LimitsExceeded|exit_cost|exit_context|exit_format|(?:step|turn|iteration|cost|budget|call) limit (?:reached|exceeded|hit)|"
    r"(?:reached|exceeded|hit) (?:the |its |your )?(?:maximum|max|step|turn|iteration|cost|budget|call)[ _](?:number of )?"
    r"(?:steps|turns|iterations|limit|budget)|max(?:imum)?[ _]iterations? (?:reached|exceeded)|"
    r"context (?:window|length) (?:exceeded|limit))", regex.I)
_API_ERROR = lazy_regex(
    r"^(?:(?:[a-z_]+\.)*(?:API Error\b|APIError\b|APIConnectionError\b|RateLimitError\b|InternalServerError\b|ServiceUnavailableError\b)|"
    # a harness's report that the run or its subtask failed or was killed
    r"Subtask failed\b|(?:The )?(?:process|command|agent|task|run) (?:was |has been )?(?:killed|terminated) "
    r"(?:by|because|after|due to)\b|"
    r"AgentStuckInLoopError\b|ContentPolicyViolationError\b|exit_api\b|exit_error\b|Request failed with status code 5\d\d|"
    r".*\boverloaded_error\b|.*\b5\d\d (?:Internal Server Error|Service Unavailable|Bad Gateway)\b)", regex.M)
# harness instructions that bind: kept as constraints (the rest of a template is boilerplate)
_BINDING = lazy_regex(
    # what must not be modified: the tests, the configuration ("you DON'T have to modify the tests")
    r"\b(?:do not|don't|must not|never|should not|shouldn't|cannot|can't|not allowed to|are not permitted to)\s+"
    r"(?:have to\s+|need to\s+)?(?:modify|change|edit|touch|alter|delete|remove)\b[^.\n]{0,40}\b(?:tests?|testing)\b|"
    r"\bDO NOT MODIFY\b|"
    # where the changes go: "make (the minimal) changes to non-test files in ..."
    r"\bchanges? to non-tests? files\b|"
    r"\b(?:do not|don't|must not|cannot|can't|not allowed to|are not permitted to|never)\s+(?:need to\s+|have to\s+)?"
    r"(?:install|pip install|use pip|download|access the internet|use the internet)|"
    # one command / tool call / function per response
    r"\b(?:one|a single|only one|exactly one|ONE)\s+(?:\w+\s+)?(?:command|bash block|action|function|tool call)s?\b"
    r"[^.\n]{0,40}\bat a time\b|"
    r"\b(?:exactly|only)\s+_?one_?\b(?=[^.\n]{0,40}\b(?:command|block|call|action|function|tool))|"
    r"^(?:when|once|if|after|to|finally|please|you)\b[^\n]{0,100}\b(?:submit|finish)\b[^\n]{0,80}`[^`\n]{3,120}`|"
    r"`[^`\n]*COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT[^`\n]*`|"
    # nothing after the submission
    r"\b(?:cannot|can't|will not be able to|won't be able to)\s+continue\b[^\n]{0,80}\bafter (?:submitting|you submit|submission)\b|"
    r"\b(?:do not|don't|never)\s+(?:run|use|invoke)\s+(?:interactive|git push|sudo)\b|"
    r"\b(?:does|do) NOT support interactive\b|"
    r"\bsubmit\b[^.\n]{0,80}\b(?:running|run|using|calling) the `?submit`? command\b|"
    # an emphasised order: a binding word in capitals ("PLEASE DO NOT DO THAT!", "REQUIRES PROPER INDENTATION")
    r"(?-i:\b(?:DO NOT|DON'T|MUST(?: NOT)?|NEVER|REQUIRES?|BEFORE)\b)(?=(?:\s+\S+){2})|"
    r"\bnot (?:be )?(?:able to|allowed to) (?:install|modify the tests?)|"
    # a numeric limit on the output ("max 50 chars", "0-2 emojis maximum", "at most 3 files")
    r"\b(?:max|maximum|at most|no more than)\s+\d+\b|\b\d+(?:-\d+)?\s+\w+(?:\s+\w+)?\s+(?:maximum|max)\b", regex.I)
# a list item of a harness's instructions that forbids: "- Never mention X", "- No extra tools, no ..."
# (not a statement such as "- No pending work items")
_BINDING_ITEM = lazy_regex(r"^[-*•]\s+(?:never|do not|don't)\s+\w+|"
                           r"^[-*•]\s+no\s+\w+(?:\s+\w+)?\s*[,;—-]\s*(?:no|just|only)\b", regex.I)
_GAVE_UP = lazy_regex(r"\b(?:unable to|could not|couldn't|cannot|can't|failed to|was not able to|wasn't able to)\b", regex.I)
_REVERT_CP = lazy_regex(r"^(?:cp|mv)$")
_FILE_LINE = lazy_regex(r"([\w./-]+\.\w{1,5}):(\d+)")


# a harness's reminder after a malformed response: neither the user's request nor a rejection
_FORMAT_NUDGE = lazy_regex(
    r"^\s*(?:No tool calls? (?:were )?found in (?:the|your) response|"
    r"Your (?:last )?(?:output|response) (?:was not formatted correctly|did not (?:use|include|contain) any tool calls?)|"
    r"Please always provide EXACTLY ONE action|(?:Format|Formatting) error\b|"
    r"Your response (?:must|should) (?:contain|include) (?:exactly )?one (?:bash code block|tool call|action)\b[^\n]{0,80}\bfound \d+)",
    regex.I)


# what a harness writes in the user's place: a label over tool results, its auto-continue nudge
_PLACEHOLDER = lazy_regex(
    r"^\s*(?:Tool (?:execution )?results?|Tool output|Observations?|\[Request interrupted by user[^\]\n]*\]|"
    r"Please continue working on the task on whatever approach you think is suitable\b[^\n]*)\s*[.:]?\s*$|"
    # a chat client's echo of what the user ran locally (a shell command, its output)
    r"^\s*<(?:bash-input|bash-stdout|bash-stderr|local-command-stdout|local-command-stderr)>", regex.I)


# a tool call the user refused before it ran
# a hook or a policy of the harness refused the call ("PreToolUse:Bash hook error: [...]: BLOCKED:
# Dangerous rm command detected and prevented"): group 1 is what it forbids
HOOK_BLOCK = lazy_regex(r"(?:^|\]: |hook error: )(BLOCKED: [^\n]{4,200}|Blocked by (?:a |the )?(?:hook|policy)\b[^\n]{0,200})")
_INTERRUPTED = lazy_regex(r"^\s*\[Request interrupted by user(?: for tool use)?\]\s*$")
_DECLINED = lazy_regex(
    r"^\s*(?:The user doesn't want to proceed with this tool use|\[Request interrupted by user for tool use\]|"
    r"(?:The )?(?:tool (?:call|use)|command|exec(?: command)?) (?:was )?(?:rejected|declined|denied) by (?:the )?user\b)", regex.I)


def harness_note(text: str) -> bool:
    """A message a harness writes in the user's place: a reminder that the last response broke
    its format ("No tool calls found in the response. Every response MUST include ..."; its
    binding line is a harness rule), a label over tool results ("Tool execution results"), an
    auto-continue nudge. None of them is the user's request, a rejection or a constraint."""
    return len(text) <= 2000 and bool(_FORMAT_NUDGE.match(text) or _PLACEHOLDER.match(text))


def chrome_line(line: str, *, cwd: bool = False, outcome: bool = True) -> bool:
    """A harmless line of a package manager, frontend, tool or harness: never an error, never
    verification. ``outcome=False``: a package manager's report of what it installed is not
    counted (it is a fact, just not evidence that the work is verified); ``cwd``: a harness line
    naming the working directory counts too (never a goal)."""
    s = line.strip()
    if not outcome and _OUTCOME.match(s):
        return False
    return bool(_CHROME.match(s) or cwd and _CWD_LINE.match(s))


def _argvs(command: str) -> tuple[list[str], ...]:
    return _argvs_cached(command)


@lru_cache(maxsize=1024)
def _argvs_cached(command: str) -> tuple[list[str], ...]:
    """The simple commands of a shell line, wrappers and shell built-ins taken off (shared: never
    changed by a caller)."""
    out = []
    for a in split_commands(command):
        while a and (a[0] in _WRAPPERS or "=" in a[0] and not a[0].startswith("-")):
            if a[0] == "timeout" and len(a) > 1:
                a = a[2:]
            else:
                a = a[1:]
        if a and a[0].rsplit("/", 1)[-1] not in _NOISE_PROGS:
            out.append(a)
    return tuple(out)


def _main_argv(command: str) -> list[str]:
    """The simple command that says what a shell line does (the first one that is not a filter)."""
    argvs = _argvs(command)
    for a in argvs:
        if a[0] not in ("echo", "printf", "cat", "head", "tail", "grep", "tee", "sort", "wc") or len(argvs) == 1:
            return a
    return argvs[0] if argvs else []


@lru_cache(maxsize=4096)
def command_family(command: str) -> str:
    """What counts as the same command again: the program with its subcommand or script
    (``python reproduce.py``, ``python -m pytest tests/test_x.py``, ``pip install``)."""
    argvs = _argvs(command)
    # the simple command that says what the line does: an install, a test run, a program run
    # after the files it writes, else the first that is not a filter
    argv = next((a for a in argvs if _is_install(a)), None) or next((a for a in argvs if _is_test(a)), None) \
        or (next((a for a in argvs if _runs(a)), None) if any(_writes_file(a) for a in argvs) else None) \
        or _main_argv(command)
    if not argv:
        return ""
    prog = argv[0].rsplit("/", 1)[-1] if not argv[0].startswith("./") else argv[0]
    ops = [a for a in argv[1:] if not a.startswith("-")]
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        rest = [a for a in argv[3:] if not a.startswith("-")]
        return " ".join(["python -m", argv[2], *rest[:1]])
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-c":
        return "python -c " + argv[2][:60]
    if prog.startswith("python"):
        return " ".join(["python", *ops[:1]])
    if prog in _INSTALLERS or prog in _TEST_SUBCMD or prog == "git":
        return " ".join([prog, *ops[:1]])
    return " ".join([prog, *ops[:1]])


def _writes_file(argv: list[str]) -> bool:
    prog = argv[0].rsplit("/", 1)[-1]
    return prog in ("cat", "tee", "echo", "printf") and (">" in argv or ">>" in argv) or prog == "sed" and "-i" in argv \
        or prog in ("cp", "mv", "patch", "touch")


def _is_install(argv: list[str]) -> bool:
    prog = argv[0].rsplit("/", 1)[-1]
    if prog.startswith("python") and len(argv) > 3 and argv[1] == "-m" and argv[2] in ("pip", "pip3"):
        return argv[3] == "install"
    sub = _INSTALLERS.get(prog)
    if sub is None or len(argv) < 2:
        return False
    verbs = sub if isinstance(sub, tuple) else (sub,)
    ops = [a for a in argv[1:] if not a.startswith("-")]
    return bool(ops) and ops[0] in verbs and (prog not in ("uv",) or "install" in ops[:2] or ops[0] == "add")


def _is_test(argv: list[str]) -> bool:
    prog = argv[0].rsplit("/", 1)[-1]
    if prog in _TEST_PROGS:
        return True
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return argv[2] in ("pytest", "unittest", "tox", "nose", "django") and (argv[2] != "django" or "test" in argv)
    if prog.startswith("python"):
        script = next((a for a in argv[1:] if not a.startswith("-")), "")
        return bool(_TEST_SCRIPT.search(script)) or script.endswith("manage.py") and "test" in argv
    sub = _TEST_SUBCMD.get(argv[0]) or _TEST_SUBCMD.get(prog)
    if sub is not None:
        ops = [a for a in argv[1:] if not a.startswith("-")]
        verbs = sub if isinstance(sub, tuple) else (sub,)
        return bool(ops) and (ops[0] in verbs or prog in ("npm", "yarn", "pnpm") and ops[:2] == ["run", "test"])
    return bool(_TEST_SCRIPT.search(prog))


_RUNNERS = lazy_regex(r"^(?:python[\d.]*|node|bash|sh|zsh|go|cargo|make|npm|npx|yarn|pnpm|ruby|perl|php|java|javac|"
                      r"gcc|g\+\+|clang|rustc|dotnet|deno|bun|ts-node|\./.+)$")


def is_check(st: RunStep) -> bool:
    """A step that checks the work: a test run, or a program run (not git, not a file operation)."""
    if st.action == "test":
        return True
    if st.action != "run":
        return False
    argv = _main_argv(st.target)
    return bool(argv) and _runs(argv) and argv[0].rsplit("/", 1)[-1] not in ("make",) or \
        bool(argv) and argv[0] == "make" and len(argv) > 1 and argv[1] in ("test", "check")


def _runs(argv: list[str]) -> bool:
    return bool(_RUNNERS.match(argv[0].rsplit("/", 1)[-1] if not argv[0].startswith("./") else argv[0]))


def _benign_exit(st: RunStep, code: int | None, text: str) -> bool:
    """A non-zero exit that is not a failure: no match found, files differ, nothing to commit."""
    if code not in (1, None):
        return False
    if code == 1:
        if st.action in ("search", "read"):
            return True
        argv = _main_argv(st.target)
        prog = argv[0].rsplit("/", 1)[-1] if argv else ""
        if prog in ("diff", "cmp", "test", "[", "[[", "grep", "rg", "find") or prog == "git" and argv[1:2] == ["diff"]:
            return True
    return "nothing to commit" in text or "nothing added to commit" in text


def step_action(call: ToolCall | None, tool_name: str | None, command: str, writes: list[str]) -> str:
    """The action of one tool call: edit, run, test, read, search, install or submit."""
    name = (tool_name or (call.name if call is not None else "") or "").lower()
    # (each of the submit patterns holds one of these words: a long command is searched only then)
    cmd = command or ""
    if name in _FINISH_TOOLS or ("submit" in cmd or "_FINAL_OUTPUT" in cmd) and _SUBMIT_CMD.search(cmd):
        return "submit"
    kind = call.kind.value if call is not None else "other"
    if kind == "shell" or (kind == "other" and command and not writes):
        argvs = _argvs(command)
        if any(_is_install(a) for a in argvs):
            return "install"
        if any(_is_test(a) for a in argvs):
            return "test"
        main = _main_argv(command)
        if writes:
            return "run" if any(_runs(a) for a in argvs) else "edit"
        if not main:
            return "read"
        prog = main[0].rsplit("/", 1)[-1]
        if prog == "git" and len(main) > 1:
            return "read" if main[1] in _GIT_READ else "run"
        if prog in _SEARCHERS:
            return "search"
        if prog in _READERS or prog == "sed" and "-i" not in main:
            return "read"
        return "run" if kind == "shell" or command else "message"
    if writes or kind == "edit":
        return "edit"
    if kind == "search":
        return "search"
    if kind == "read":
        return "read"
    return "run"


def _exit_code(seg: Segment, text: str) -> int | None:
    if seg.exit_code is not None:
        return seg.exit_code
    m = _EXIT.search(text[-4000:]) or _EXIT.search(text[:2000])
    if m:
        return int(m.group(1) or m.group(2))
    return None


def _lines(text: str) -> list[str]:
    if len(text) > _SCAN:
        text = text[: _SCAN // 2] + "\n" + text[-_SCAN // 2:]
    return [ln.rstrip() for ln in text.split("\n")]


def error_of(text: str) -> tuple[str, str]:
    """(the decisive error line, its file:line location) of a tool output, or ('', '')."""
    lines = _lines(text)
    if _TRACEBACK in text:
        # the last traceback: its exception line and the innermost frame
        start = max(i for i, ln in enumerate(lines) if _TRACEBACK in ln)
        loc = ""
        for ln in lines[start + 1:]:
            m = _FRAME.match(ln)
            if m:
                loc = f"{m.group(1)}:{m.group(2)}"
                continue
            s = ln.strip()
            if s and not ln.startswith((" ", "\t")) and _EXC_LINE.match(s):
                return s[:300], loc
        return "", ""
    if "\u25cf " in text:
        jest = _jest_failure(lines)
        if jest[0]:
            return jest
    for ln in lines:
        s = ln.strip()
        if not s or chrome_line(s):
            continue
        if _STRONG.match(s):
            loc = ""
            m = _FILE_LINE.search(s)
            if m:
                loc = f"{m.group(1)}:{m.group(2)}"
            return s[:300], loc
    return "", ""


def _jest_failure(lines: list[str]) -> tuple[str, str]:
    """Jest's first failing test (``● suite › test``): the exception it raised, else the test's
    own line; located at its first ``at ... (file:line:col)`` frame. Its summary lines (``Tests:``,
    ``Time:``) are not the error."""
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("\u25cf ")), None)
    if start is None:
        return "", ""
    head = lines[start].strip()
    error = loc = ""
    for ln in lines[start + 1:start + 40]:
        s = ln.strip()
        if s.startswith("\u25cf "):
            break
        if not error and _EXC_LINE.match(s):
            error = s
        if not loc and s.startswith("at "):
            m = _FILE_LINE.search(s)
            if m:
                loc = f"{m.group(1)}:{m.group(2)}"
    return (error or head)[:300], loc


def signature(error: str) -> str:
    return _MASK.sub("N", " ".join(error.split()))[:200]


def _test_counts(text: str) -> tuple[int | None, int | None]:
    tail = text[-6000:]
    m = _CARGO.search(tail)
    if m:
        return int(m.group(2)), int(m.group(3))
    passed = failed = None
    for m in _summaries(tail):
        line = m.group(0)
        p = _PASSED_N.search(line)
        f = _FAILED_N.findall(line)
        if p or f:
            passed = int(p.group(1)) if p else 0
            failed = sum(int(x) for x in f)
    if passed is not None or failed is not None:
        return passed, failed
    m = _UNITTEST_RAN.search(tail)
    if m:
        end = _UNITTEST_END.search(tail)
        if end:
            if end.group(1).startswith("OK"):
                return int(m.group(1)), 0
            bad = int(end.group(2) or 0) + int(end.group(3) or 0)
            return int(m.group(1)) - bad, bad
    return None, None


# a line that can only lie before the last line of a pytest summary match: '=', whitespace,
# digits, commas and the letters of "failed" and "passed" (what the pattern takes before its last line)
_NOT_FILLER = lazy_regex(r"[^\s=,\dfailedps]")


def _summaries(tail: str):
    """``_PYTEST_SUMMARY.finditer(tail)``, tried only at the line starts where it can match.

    The pattern starts at a line start and ends on a line holding "in "; the lines it crosses
    before that hold nothing but what ``=*\\s*(?:(\\d+) failed)?(?:,?\\s*(\\d+) passed)?`` takes. Tried
    at every line (finditer), its ambiguous runs of whitespace cost milliseconds on a long test
    output; these are the same matches (each from the first line start at or after the previous
    match's end where it matches)."""
    match = _PYTEST_SUMMARY.match
    end = 0  # where the last match ended
    i = tail.find("in ")
    while i >= 0:
        line = tail.rfind("\n", 0, i) + 1
        # the line holding "in ", and the lines above it that the pattern can cross to reach it
        starts = [line]
        while starts[-1] > end:
            above = tail.rfind("\n", 0, starts[-1] - 1) + 1
            if _NOT_FILLER.search(tail, above, starts[-1] - 1):
                break
            starts.append(above)
        for start in reversed(starts):
            if start >= end:
                m = match(tail, start)
                if m is not None:
                    yield m
                    end = m.end()
        nl = tail.find("\n", i)
        if nl < 0:
            break
        i = tail.find("in ", nl + 1)


def _rejected_edit(text: str) -> bool:
    return bool(_REJECTED.search(text[:3000]))


_REJECTED = (lazy_regex(
        r"Your proposed edit has introduced new syntax error|Your changes have NOT been applied|No replacement was performed|"
        r"did not appear verbatim|^(?:ERROR|Error): |Invalid `path` parameter|old_str .* is not unique|"
        r"(?:file|path) .* does not exist", regex.M))


_SHELL_SAYS = lazy_regex(r"^\s*(?:/bin/)?(?:ba|z|da)?sh: (?:-c: )?(?:line \d+: )?")


def _step_no(step: str) -> int:
    """The number of a step id ("s12" -> 12; 0 when it has none)."""
    digits = "".join(ch for ch in step if ch.isdigit())
    return int(digits) if digits else 0


class RunFold:
    """Mutable state of the run model's fold; :meth:`model` freezes it."""

    def __init__(self, m: RunModel | None = None) -> None:
        m = m if m is not None else RunModel()
        self.steps: list[RunStep] = list(m.steps)
        self.calls = m.calls
        self.files: dict[str, FileLife] = {f.path: f for f in m.files}
        self.errors: dict[str, ErrorLife] = {e.signature: e for e in m.errors}
        self.tests: dict[str, TestLife] = {t.test: t for t in m.tests}
        self.families: dict[str, FamilyLife] = {f.family: f for f in m.families}
        self.status = m.status
        self.status_step = m.status_step
        self.status_note = m.status_note
        self.last_change_step = m.last_change_step
        self.last_step = m.last_step
        self.plan = m.plan
        self.plan_step = m.plan_step
        self.plan_acted = m.plan_acted
        self.harness_rules = list(m.harness_rules)
        self.seq = m.seq
        self.open_file = m.open_file
        self.effects: tuple | None = None  # (segment id, open file, CallEffects) of the last call
        self.rev = 0  # bumped by every call and result: what the derived sections read changed
        self._pending_msg: tuple[str, str] | None = None  # (step, tail) of an assistant message not read yet
        # the rev at which each step, file and (any) family last changed: what a derived item read
        # is unchanged while these are not newer than when it was derived (sections.changes)
        self.stamp_step: dict[str, int] = {}
        self.stamp_file: dict[str, int] = {}
        self.fam_rev = 0
        self._frozen: RunModel | None = m
        # the recent steps by step id, in the order of ``steps`` (kept as the steps change: see index)
        self._by_step: dict[str, list[RunStep]] = {}
        for st in self.steps:
            self._by_step.setdefault(st.step, []).append(st)

    def model(self) -> RunModel:
        if self._pending_msg is not None:
            self._settle()
        if self._frozen is None:
            # (a record copies the lists it is given: the fold's own containers are not shared)
            self._frozen = RunModel(
                steps=self.steps, calls=self.calls, files=self.files.values(), errors=self.errors.values(),
                tests=self.tests.values(), families=self.families.values(), status=self.status,
                status_step=self.status_step, status_note=self.status_note, last_change_step=self.last_change_step,
                last_step=self.last_step, plan=self.plan, plan_step=self.plan_step, plan_acted=self.plan_acted,
                harness_rules=self.harness_rules, seq=self.seq, open_file=self.open_file)
        return self._frozen

    def index(self) -> tuple[dict, dict, dict]:
        """:func:`compactor.anchor.sections.index` of :meth:`model`: the fold's own dicts, which
        hold the same lives and steps. Valid until the next call or result (read, never changed)."""
        return self.files, self.families, self._by_step

    # ------------------------------------------------------------------ feeding
    def feed(self, seg: Segment, text: str | None = None) -> None:
        """Fold one segment in; ``text``: its normalised text when the caller has it."""
        self._text = text
        self._frozen = None
        if self._pending_msg is not None:
            if seg.kind == SegmentKind.tool_call:
                self._pending_msg = None  # a call followed: the message's plan is being carried out
            else:
                self._settle()
        self.seq += 1
        self.last_step = seg.step_id
        if seg.kind == SegmentKind.tool_call:
            self._call(seg)
        elif seg.kind == SegmentKind.tool_result:
            self._result(seg)
        elif seg.role == Role.assistant:
            self._assistant(seg)
        else:
            self._other(seg)

    def _set_status(self, status: str, step: str, note: str = "") -> None:
        self.status, self.status_step, self.status_note = status, step, note[:300]

    def _other(self, seg: Segment) -> None:
        text = seg.text
        if seg.role in (Role.system, Role.user) and (seg.role == Role.system or seg.meta or self.calls == 0
                                                     or harness_note(text)):
            self._harness(text)
        if seg.role == Role.user and not seg.meta and self.calls == 0 and not self.steps \
                and (self.status not in ("finished", "waiting") or harness_note(text)):
            return  # the task itself (a reply after the agent's last word puts the turn back to the agent)
        head = text[:4000]
        m = _LIMIT.search(head)
        if m and seg.role != Role.user or m and self.calls and (seg.meta or seg.role == Role.system):
            self._set_status("stopped-limit", seg.step_id, _line_at(head, m.start()))
            return
        m = _API_ERROR.search(head)
        if m and (seg.role == Role.system or seg.meta or seg.role == Role.tool):
            self._set_status("stopped-error", seg.step_id, _line_at(head, m.start()))
            return
        if seg.role == Role.user and _INTERRUPTED.match(head):
            # the user stopped the agent mid-turn: control is back with the user
            self._set_status("waiting", seg.step_id, _line_at(head, 0))
            return
        if seg.role == Role.user and not seg.meta:
            # a new message of the user: the work goes on (a harness's nudge included)
            self._set_status("working", seg.step_id)

    def _harness(self, text: str) -> None:
        if len(self.harness_rules) >= 12:
            return
        lines = text[:60_000].split("\n")
        for i, ln in enumerate(lines):
            s = ln.strip().lstrip("-*•#> ").strip()
            m = _BINDING.search(s) if 8 <= len(s) <= 300 else None
            if m is None and 8 <= len(s) <= 300 and _BINDING_ITEM.match(ln.strip()):
                m = regex.match(r".", s)
            if m is not None:
                s = _sentence_around(s, m.start(), m.end())
            elif s.startswith("```") and _submit_block(lines, i):
                s = lines[i + 1].strip()  # the exact submit command, as a fenced block gives it
                m = s
            if m is not None and s not in self.harness_rules:
                self.harness_rules.append(s)
                if len(self.harness_rules) >= 12:
                    return

    def _assistant(self, seg: Segment) -> None:
        text = self._text if self._text is not None else normalize(seg.text)
        m = _API_ERROR.search(text[:2000])
        if m and m.start() == 0:
            self._set_status("stopped-error", seg.step_id, _line_at(text, 0))
            return
        # what the message plans, asks or claims matters only when no call follows it: read when
        # the next segment is not a call, or when the model is frozen (see _settle)
        self._pending_msg = (seg.step_id, text[-_TAIL_CHARS:])

    def _settle(self) -> None:
        """Read the last assistant message that no call followed: its plan, question or claim."""
        step, text = self._pending_msg
        self._pending_msg = None
        from ._text import prose_of, sentences

        # the end of the message says what the agent will do, asks or claims: its last sentences
        prose = prose_of(text)
        sents = sentences(prose)[-_TAIL_SENTENCES:] if prose else []
        plan = ""
        asked = ""
        claimed = ""
        for i, s in enumerate(sents):
            label = label_sentence(s, {"role": "assistant", "last": i == len(sents) - 1})
            if label == "plan":
                plan = s
            elif label == "question":
                asked = s
            elif label == "status":
                claimed = s
        if plan:
            self.plan, self.plan_step, self.plan_acted = plan[:300], step, False
        if self.status not in ("stopped-limit", "stopped-error"):
            if asked and sents and sents[-1] == asked:
                self._set_status("waiting", step, asked)
            elif self.status != "submitted":
                self._set_status("finished", step, claimed or (sents[-1] if sents else ""))

    def _call(self, seg: Segment) -> None:
        self.rev += 1
        call = call_of(seg)
        command = (call.command if call is not None and call.command else seg.command) or seg.text
        writes: list[str] = []
        if call is not None:
            eff = call_effects(call, self.open_file)
            self.effects = (seg.id, self.open_file, eff)  # the anchor's fold takes them over (build.py)
            if eff.open_file is not None:
                self.open_file = eff.open_file
            writes = [p for p, op in eff.ops if op in ("write", "modify", "deleted") and looks_like_file(p)]
            self._pending_ops = [(p, op) for p, op in eff.ops if op in ("write", "modify", "deleted")]
        action = step_action(call, seg.tool_name, command or "", writes)
        if action == "edit" and not writes and call is not None and eff.kind == "read":
            action = "read"  # an editor's view: the tool edits, this call did not
        first = (command or "").strip().split("\n", 1)[0][:200]
        if action == "edit" and writes:
            target = writes[0]
            family = f"edit {target}"
        elif action in ("read", "search"):
            target = first
            family = f"{action} {call.paths[0]}" if call is not None and call.paths else command_family(command or "")
        else:
            target = first
            family = command_family(command or "") or first[:60]
        if action == "submit":
            family = "submit"
        st = RunStep(step=seg.step_id, action=action, target=target, family=family, call_id=seg.call_id or "",
                     files=tuple(writes))
        self.steps.append(st)
        self._by_step.setdefault(st.step, []).append(st)
        self.stamp_step[st.step] = self.rev
        if len(self.steps) > _MAX_STEPS:
            old = self.steps[0].step
            self.stamp_step[old] = self.rev  # what read it reads its absence now
            del self.steps[0]
            same = self._by_step[old]
            del same[0]  # (the oldest step of that id is the one dropped)
            if not same:
                del self._by_step[old]
        self.calls += 1
        # a call carries the work on: an earlier plan is not "the last plan not carried out"
        self.plan, self.plan_step, self.plan_acted = "", "", True
        if action == "submit":
            self._submitted(seg.step_id, first)
        else:
            self._set_status("working", seg.step_id)
        # file effects are known from the call; a failed result takes them back (see _result)
        if call is not None:
            for p, op in getattr(self, "_pending_ops", []):
                if looks_like_file(p):
                    self._file(p, op, seg.step_id)
            self._revert_ops(command or "", seg.step_id)
        self._pending_ops = []

    def _submitted(self, step: str, note: str) -> None:
        self._set_status("submitted", step, note)
        if _GAVE_UP.search(note):
            return  # handed in with a failure stated: the errors keep their state
        for sig, e in list(self.errors.items()):
            if e.state == "live":
                if (self.last_change_step and _step_no(e.last_step) > _step_no(self.last_change_step)
                        and not _SHELL_SAYS.match(e.text)
                        and (e.action == "test" or e.action == "run" and e.location and not e.location.startswith("<"))):
                    # a check, or a script failing in a file of the project, that failed on the changed
                    # code (no change came after it) is still failing when the work is handed in: it
                    # stays live (a command the shell could not parse, a slip typed into an
                    # interpreter's stdin, say nothing of the code)
                    continue
                self.errors[sig] = e.model_copy(update={"state": "stale", "why": "handed in after it", "at": step})

    def _revert_ops(self, command: str, step: str) -> None:
        for a in _argvs(command):
            prog = a[0].rsplit("/", 1)[-1]
            if prog == "git" and len(a) > 1 and a[1] in _GIT_REVERT:
                for p in a[2:]:
                    if p not in ("--", ".") and not p.startswith("-") and p in self.files:
                        self._file(p, "revert", step)
            elif _REVERT_CP.match(prog) and len(a) == 3 and a[1].rsplit(".", 1)[-1] in ("bak", "orig", "backup") \
                    and a[1].rsplit(".", 1)[0] == a[2] and a[2] in self.files:
                self._file(a[2], "revert", step)

    def _file(self, path: str, op: str, step: str) -> None:
        self.stamp_file[path] = self.rev
        f = self.files.get(path)
        if op == "revert":
            if f is not None:
                self.files[path] = f.model_copy(update={"change": "reverted", "last_step": step})
            return
        if f is None:
            change = {"write": "created", "modify": "modified", "deleted": "deleted"}[op]
            self.files[path] = FileLife(path=path, change=change, first_step=step, last_step=step, edits=1)
            return
        if op == "deleted":
            change = "created-deleted" if f.change in ("created", "created-deleted") else "deleted"
        elif f.change in ("created", "created-deleted"):
            change = "created"
        else:
            change = "modified"
        self.files[path] = f.model_copy(update={"change": change, "last_step": step, "edits": f.edits + 1})

    def _match(self, seg: Segment) -> int | None:
        for i in range(len(self.steps) - 1, -1, -1):
            s = self.steps[i]
            if s.done:
                continue
            if seg.call_id and s.call_id:
                if s.call_id == seg.call_id:
                    return i
                continue
            return i
        return None

    def _result(self, seg: Segment) -> None:
        self.rev += 1
        i = self._match(seg)
        if i is None:
            return
        st = self.steps[i]
        text = self._text if self._text is not None else normalize(seg.text)
        code = _exit_code(seg, text)
        passed = failed = None
        error, loc = "", ""
        if st.action == "test":
            passed, failed = _test_counts(text)
        if (code == 1 or code is None and seg.is_error) and _benign_exit(st, code, text):
            ok = True
        elif seg.is_error:
            ok = False
        elif code is not None:
            ok = code == 0 or _benign_exit(st, code, text)
        elif st.action in ("read", "search"):
            # a view or search the tool refused says so on its first line
            ok = not _rejected_edit(text.lstrip().split("\n", 1)[0])
        elif st.action == "edit":
            ok = not _rejected_edit(text)
        elif failed:
            ok = False
        elif st.action == "test" and passed:
            ok = True
        elif st.action in ("test", "run", "install"):
            # no exit code reported: a run that ends on an error line failed
            err = error_of(text)[0]
            last = _last_meaningful(text)
            ok = not err or st.action != "test" and err != last
        else:
            ok = True
        if not ok:
            error, loc = error_of(text)
            if not error:
                error = _last_meaningful(text) if st.action in ("run", "test", "install") else _first_meaningful(text)
            if failed and st.action == "test" and not error.startswith("FAILED"):
                error = error or f"{failed} failed"
        elif st.action in ("run", "test") and code is None and _TRACEBACK in text:
            # no exit code reported: an uncaught exception at the end is the outcome
            error, loc = error_of(text)
            ok = not error
        elif st.action == "test" and failed:
            ok = False
            error, loc = error_of(text)
        if _DECLINED.match(text):
            # the user refused the call: it never ran, nothing failed (the refusal is the user's choice)
            ok, error, loc = False, "", ""
        elif not ok:
            m = HOOK_BLOCK.search(text[:2000])
            if m and m.group(1) not in self.harness_rules and len(self.harness_rules) < 12:
                # a hook or policy refused the call: what it forbids binds the rest of the run
                self.harness_rules.append(m.group(1))
        st = st.model_copy(update={"done": True, "ok": ok, "exit_code": code, "error": error,
                                   "signature": signature(error) if error else "", "location": loc,
                                   "passed": passed, "failed": failed})
        prev, self.steps[i] = self.steps[i], st
        same = self._by_step[st.step]
        same[next(j for j, x in enumerate(same) if x is prev)] = st
        self.stamp_step[st.step] = self.rev
        self._family(st)
        if st.action == "test":
            self._tests(text, st.step)
        if not ok and st.action == "edit":
            for p in st.files:
                f = self.files.get(p)
                if f is not None:
                    edits = f.edits - 1
                    if edits <= 0 and f.first_step == st.step:
                        del self.files[p]
                    else:
                        self.files[p] = f.model_copy(update={"edits": max(edits, 1), "failed_edits": f.failed_edits + 1})
        if ok and (st.action == "install" or any(
                (f := self.files.get(p)) is not None and f.change != "created-deleted" for p in st.files)):
            self.last_change_step = st.step
        if ok and (st.action == "edit" or st.action == "install" or st.files):
            self._changed(st)
        if error:
            self._error(st)
        elif ok:
            self._resolve(st)

    def _family(self, st: RunStep) -> None:
        self.fam_rev = self.rev
        f = self.families.get(st.family) or FamilyLife(family=st.family, action=st.action)
        self.families[st.family] = f.model_copy(update={"attempts": f.attempts + 1,
                                                        "failures": f.failures + (0 if st.ok else 1),
                                                        "last_step": st.step, "last_ok": st.ok})

    def _tests(self, text: str, step: str) -> None:
        for m in _TEST_ID.finditer(text[-_SCAN:]):
            status = m.group(1) or m.group(3)
            if not status:
                continue
            tid = m.group(2)
            self.tests.pop(tid, None)
            self.tests[tid] = TestLife(test=tid, status="passed" if status == "PASSED" else "failed", step=step)
        while len(self.tests) > _MAX_TESTS:
            del self.tests[next(iter(self.tests))]

    def _changed(self, st: RunStep) -> None:
        """A change makes an error stale when it touches the file the error points at, or a file
        that was there before the run (the code under work); the error is live again only when
        its command runs again and fails again."""
        touched = set(st.files)
        existing = {p for p in touched if (f := self.files.get(p)) is not None and f.change != "created"}
        for sig, e in list(self.errors.items()):
            if e.state != "live" or e.family == st.family:
                continue
            at = e.location.rsplit(":", 1)[0] if e.location else ""
            hits = existing or (at and any(at.endswith(p) or p.endswith(at) for p in touched))
            if st.action == "install" and e.action != "install":
                missing = {_dist_key(m.split(".", 1)[0]) for m in missing_modules(e.text)}
                named, unnamed = _install_targets(st.target)
                if missing & named:  # the module the error missed is what was installed
                    self.errors[sig] = e.model_copy(update={"state": "resolved", "why": f"installed ({st.target})",
                                                            "at": st.step})
                    continue
                # an install that names no package (a requirements file, the project itself) may have
                # brought it: the error is stale until its command runs again; one naming other
                # packages leaves it live
                hits = ("command not found" in e.text or bool(missing)) and unnamed
            if hits:
                self.errors[sig] = e.model_copy(update={"state": "stale", "why": f"changed since ({st.target})",
                                                        "at": st.step})

    def _error(self, st: RunStep) -> None:
        e = self.errors.get(st.signature)
        if e is None:
            self.errors[st.signature] = ErrorLife(
                signature=st.signature, text=st.error, family=st.family, action=st.action, location=st.location,
                first_step=st.step, last_step=st.step)
            while len(self.errors) > _MAX_ERRORS:
                del self.errors[next(iter(self.errors))]
        else:
            self.errors.pop(st.signature)
            self.errors[st.signature] = e.model_copy(update={
                "last_step": st.step, "count": e.count + 1, "state": "live", "why": "", "at": "",
                "family": st.family, "action": st.action, "location": st.location or e.location, "text": st.error})
        # the same command failing differently now: its older error is superseded
        for sig, old in list(self.errors.items()):
            if sig != st.signature and old.state == "live" and old.family == st.family:
                self.errors[sig] = old.model_copy(update={"state": "stale", "why": "superseded by a newer error",
                                                          "at": st.step})

    def _resolve(self, st: RunStep) -> None:
        passing_check = st.action == "test" and (st.failed in (None, 0))
        for sig, e in list(self.errors.items()):
            if e.state == "resolved":
                continue
            if e.family == st.family or (passing_check and e.action == "test"):
                why = f"`{st.target[:80]}` succeeded" if e.family == st.family else f"tests passed (`{st.target[:80]}`)"
                self.errors[sig] = e.model_copy(update={"state": "resolved", "why": why, "at": st.step})


_SENT_END = lazy_regex(r"(?<=[.!。！])(?<!\b(?:e\.g|i\.e|cf|vs)\.)\s+")  # "(e.g. python, vim)" goes on


def _submit_block(lines: list[str], i: int) -> bool:
    """Line ``i`` opens a fenced block of one command that the prose just before it names as the
    way to submit ("When you're done, issue exactly the following command:")."""
    if i + 2 >= len(lines) or not lines[i + 2].strip().startswith("```") or not lines[i + 1].strip():
        return False
    before = " ".join(ln.strip() for ln in lines[max(0, i - 4): i])
    after = " ".join(ln.strip() for ln in lines[i + 3: i + 5])
    return bool(_SUBMIT_WORD.search(before + " " + after) and _COMMAND_LEAD.search(before))


_SUBMIT_WORD = lazy_regex(r"\bsubmi(?:t|ts|tting|ssion)\b", regex.I)
_COMMAND_LEAD = lazy_regex(r"\b(?:following|this|the submit) command\b|\bto submit\b[^\n]{0,80}:\s*$", regex.I)


def _sentence_around(line: str, start: int, end: int) -> str:
    """The sentences of ``line`` that hold [start, end)."""
    a = 0
    b = len(line)
    for m in _SENT_END.finditer(line):
        if m.end() <= start:
            a = m.end()
        elif m.start() >= end:
            b = m.start()
            break
    return line[a:b].strip()


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start: end if end >= 0 else len(text)].strip()[:300]


def _meaningful(lines: list[str]) -> str:
    for ln in lines:
        s = ln.strip()
        if len(s) > 3 and not chrome_line(s) and not s.startswith(("<", "OBSERVATION")) and not s.isdigit():
            return s[:300]
    return ""


def _last_meaningful(text: str) -> str:
    return _meaningful(_lines(text)[::-1])


def _first_meaningful(text: str) -> str:
    return _meaningful(_lines(text))


def build_run(segments, model: RunModel | None = None) -> RunModel:
    """The run model of ``segments`` (continuing ``model``)."""
    fold = RunFold(model)
    for seg in segments:
        fold.feed(seg)
    return fold.model()


_INSTALL_WORDS = frozenset(("install", "add", "sync", "-m", "pip", "pip3", "uv", "poetry", "conda", "mamba", "npm",
                            "yarn", "pnpm", "python", "python3", "sudo", "apt", "apt-get", "brew", "cargo", "gem"))


def _dist_key(name: str) -> str:
    """A package or module name compared the way installers do (case, '-' and '_' alike)."""
    return name.strip().lower().replace("-", "_")


@lru_cache(maxsize=256)
def _install_targets(command: str) -> tuple[frozenset[str], bool]:
    """The packages an install command names (version specifiers and extras cut off), and whether
    it also installs something it does not name (a requirements file, a path, the project itself,
    or no argument at all). (Asked once per live error the install may have fixed: kept.)"""
    words = command.split("\n", 1)[0].split()
    named: set[str] = set()
    unnamed = False
    skip = False
    for w in words:
        if skip:
            skip, unnamed = False, True
            continue
        if w in ("-r", "--requirement", "-e", "--editable", "-c", "--constraint"):
            skip = True
            continue
        if w.startswith("-") or w in _INSTALL_WORDS or w in ("&&", "||", ";", "|"):
            continue
        if w.startswith((".", "/", "~")) or w.endswith((".txt", ".toml", ".cfg", ".whl", ".tar.gz")):
            unnamed = True
            continue
        name = regex.split(r"[<>=!~\[;@ ]", w, maxsplit=1)[0]
        if name and regex.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            named.add(_dist_key(name))
    return frozenset(named), unnamed or not named
