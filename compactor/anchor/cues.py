"""The explicit cues the anchor extracts by (English and Chinese).

Each pattern names a way people *state* something: a decision ("I'll use X because Y",
"决定用 X"), a failed approach ("that didn't work", "无效"), a constraint ("don't use X",
"必须兼容 IE11"), ... A sentence without a cue yields nothing: the anchor does not guess.
"""

from __future__ import annotations

from typing import Any

import regex
from ..lazyre import lazy_regex

I = regex.IGNORECASE

DECISION = lazy_regex(
    r"\b(?:I|we)(?:'ve|'ll|'d| have| will| had| would)?\s+(?:decided|decide|chosen|chose|choose|opted|opt|settled on|gone with|go with|going with|stick with|sticking with|prefer)\b"
    r"|\blet'?s\s+(?:go with|stick with|switch to|stay with|settle on)\b"
    r"|\b(?:the|my|our) decision\b|\bdecided (?:to|on|that)\b"
    r"|\b(?:I'll|I will|we'll|we will|let's|let me|I'm going to|we're going to|I'd|we'd|I decided to|we should|I should)\b[^?!]{0,100}\b(?:instead of|rather than)\b"
    r"|\b(?:I'll|I will|we'll|we will|let's|let us|I'm going to|we're going to|we should|I should)\b[^?!]{0,160}\b(?:because|since|so that|to avoid|given that)\b"
    r"|\bthe (?:best|right|simplest|safest|cleanest|correct) (?:approach|option|fix|way|choice|solution) (?:is|would be|will be)\b"
    r"|决定|选择了|选定|选用|采用|改用|就用|定为|确定(?:用|采用|为)|(?:选|用)[^。；;.]{0,20}(?:因为|由于)|方案[A-Za-z一二三甲乙][^，。]{0,6}(?:更好|更合适|胜出)",
    I,
)

DEAD_END = lazy_regex(
    r"\b(?:didn't|did not|doesn't seem to|does not seem to|won't|will not|wouldn't|would not|can't|cannot)\s+(?:work|help|fix|solve|resolve|change anything|make a difference)\b"
    r"|\b(?:this|that|it|the (?:approach|fix|attempt|idea|workaround|change|patch|solution|option)|my (?:fix|change|patch|approach|attempt))\s+(?:still\s+)?(?:doesn't|does not)\s+work\b"
    r"|\b(?:had |has |with )?no (?:effect|difference|luck)\b"
    r"|\bstill (?:fails?|failing|failed|broken|crash(?:es|ing)?|errors?|erroring|get(?:s|ting)? the same|the same (?:error|failure|problem)|raises?|times? out|hangs?|not working)\b"
    r"|\bsame (?:error|failure|problem) (?:again|as before|persists)\b"
    r"|\bdead end\b|\bruled? out\b"
    r"|\b(?:this|that|the|my) (?:approach|fix|attempt|idea|workaround|change|patch|solution) (?:is|was) (?:wrong|not (?:enough|sufficient|the (?:right|correct) (?:one|approach|fix))|insufficient|incorrect|a mistake|a red herring)\b"
    r"|\b(?:won't|will not|doesn't|does not|can't|cannot) work because\b"
    r"|\b(?:is|was|isn't|wasn't|is not|was not) (?:not )?the (?:root )?cause\b"
    r"|\b(?:doesn't|does not|didn't|did not) (?:fix|solve|resolve) (?:it|the|this|that)\b"
    r"|\bgave up on\b|\babandon(?:ed|ing)? (?:this|that|the)\b|\bnot (?:a )?viable\b"
    r"|无效|没用|不起作用|没起作用|没有效果|没效果|行不通|走不通|不管用|没解决|没有解决|还是报错|仍然报错|依然报错|仍然失败|还是失败|依然失败|已排除|排除了|放弃(?:了)?(?:这个|该|此)?方案|不是(?:根本)?原因|并非原因",
    I,
)

CONSTRAINT = lazy_regex(
    r"^(?:please\s+)?(?:do not|don't|never|always|avoid|only|make sure|ensure|keep|no need to|must)\b"
    r"|\byou (?:must|must not|mustn't|should not|shouldn't|cannot|can't|may not|are not allowed to|should always|should never|do not|don't)\b"
    r"|\b(?:must|must not|mustn't|is not allowed|are not allowed|is required|are required|required to|forbidden|mandatory)\b"
    r"|\b(?:compatible with|backwards?[- ]compatible|without (?:using|changing|modifying|touching|breaking|adding|impacting))\b"
    r"|\b(?:only|never) (?:use|modify|change|touch|edit)\b"
    r"|\bto keep (?:the )?(?:old|previous|current|existing|original|same|legacy) (?:behaviou?rs?|output|format|api|semantics|results?)\b"
    r"|\bplease (?:do not|don't|avoid|keep|make sure|ensure|only|never|always)\b"
    # an order to stop a habit ("stop committing everything"), a short ban ("no deprecation alias!"),
    # what the user wants a thing to use or be ("I want the example to use provider X")
    r"|^(?:please\s+|so\s+|and\s+)*stop\s+\w+ing\b"
    r"|^no\s+(?!(?:problem|worries|idea|luck|way|rush|clue|thanks|doubt|need)\b)\w+(?:[- ]\w+){0,3}\s*[!.]?$"
    r"|\b(?:i|we) (?:want|need)\b[^.?!]{0,80}\bto (?:use|keep|stay)\b"
    r"|不要|不能|不得|不许|不允许|禁止|必须|务必|一定要|只能|只用|别(?:用|改|动|碰)|兼容|避免|保证|确保|不用|不需要",
    I,
)

# where a harness's instruction template begins after the task it wraps
HARNESS_PART = lazy_regex(
    r"^[ \t]*(?:INSTRUCTIONS:|<instructions>|#+ *Task Instructions|NOTE ABOUT THE EDIT COMMAND|IMPORTANT TIPS:|"
    r"#+ *Environment\b|\*\*CRITICAL|<IMPORTANT>|Remember, YOU|Follow these steps to resolve the issue|"
    r"Can you help me implement the necessary changes|Your task is to make the minimal changes|"
    r"I've already taken care of all changes to any of the test files|--- DEMONSTRATION ---)",
    regex.M,
)

# a recommendation that does not bind (no must / do not / only / ...): a harness's "you should ..."
ADVISORY = lazy_regex(
    r"^(?!.{401})(?!.*\b(?:must|mustn't|do not|don't|dont|never|only|at least|at most|no more than|avoid|ensure|make sure|without|"
    r"cannot|can't|may not|should not|shouldn't|not allowed|forbidden|prohibited|required|mandatory)\b)"
    r".*\b(?:should|need to|needs to|always|recommended)\b",
    I,
)

# broader than CONSTRAINT and DEAD_END: a word that may bind, in a sentence of the user's own
# message; a report that something failed or a change of course, in the agent's (what a budget's
# fill puts back verbatim from folded turns: rules cue.binding, cue.changed-approach)
BINDING = lazy_regex(
    r"\b(?:do not|don't|dont|does not|doesn't|never|must|mustn't|should not|shouldn't|cannot|can't|may not|avoid|"
    r"without|only|make sure|ensure|keep|keeps|keeping|preserve|no more than|at most|at least|not allowed|forbidden|"
    r"required|requires?)\b|不要|别|必须|禁止|只能|不能|务必|不得|保持|不允许", I)
CHANGED_APPROACH = lazy_regex(
    r"\b(?:didn't|did not|doesn't|does not|won't|will not|isn't|is not) work(?:ing)?\b|\bnot working\b|\bstill fail\w*"
    r"|\b(?:failed|fails|failing)\b|\b(?:broke|breaks|broken)\b|\brevert\w*|\bundo\b|\broll(?:ed)? back\b|\binstead\b"
    r"|\b(?:a different|another|wrong|that|this) approach\b|\bsame (?:error|failure|problem)\b|\bno luck\b|\bunsuccessful\b"
    r"|\bnot the (?:issue|problem|cause)\b|\bdead end\b|\bg(?:i|a)ve up\b|\b(?:didn't|did not|doesn't) fix\b"
    r"|没用|失败|不行|无效|回退|换一种", I)

# a constraint said as a bare imperative about when to stop: "Then stop.", "Please finish the
# interaction after your finish coding."
STOP = lazy_regex(
    r"^(?:and |then |please |so )*(?:stop|finish the (?:interaction|conversation|session)|end the (?:interaction|conversation|session))"
    r"(?:\s+(?:here|there|now|after\b[^.!?]{0,80}|once\b[^.!?]{0,80}|when\b[^.!?]{0,80}))?\s*[.!。！]?$", I)

# a decision states a choice: a choice verb, or an alternative that was not taken
CHOICE = lazy_regex(
    r"\b(?:decided|decide to|decision|chose|choose|chosen|opted|opt for|settled on|going with|go with|went with|"
    r"stick(?:ing)? with|prefer(?:red)?|switch(?:ed|ing)? to|in favou?r of|instead of|rather than|over (?:the |a |an )?\w+ (?:because|since|as)|"
    r"the (?:best|right|simplest|safest|cleanest|correct) (?:approach|option|fix|way|choice|solution))\b"
    r"|\b(?:I'll|I will|we'll|we will|I'm going to|we're going to)\b[^?!]{0,160}\b(?:because|so that|to avoid|given that)\b"
    r"|决定|选择了|选定|选用|采用|改用|就用|定为|而不是|倾向于|(?:选|用)[^。；;.]{0,20}(?:因为|由于)|方案[A-Za-z一二三甲乙][^，。]{0,6}(?:更好|更合适|胜出)",
    I,
)

# not a decision: an observation or a routine step ("I see that ...", "Let's use find_file to ...")
OBSERVATION = lazy_regex(
    r"^(?:(?:interesting|good|great|perfect|ok(?:ay)?|now|so|hmm)[!,.]?\s+)*(?:I see|I can see|I notice|we see|we can see|it (?:looks|seems)|"
    r"it appears|this (?:shows|means|confirms)|the (?:output|test|result|error|code|file)s? (?:shows?|prints?|is|are|has|says)|"
    r"now the|there (?:is|are)|looks like|seems like)\b", I)

# harness and tool chrome that is never a fact (banners, package-manager chatter, cost lines)
CHROME_FACT = lazy_regex(
    r"^(?:Aider v\d|\S*/aider\s+--|Error checking pypi for new version|Main model:|Weak model:|Editor model:|Git repo:|Repo-map:|Added .+ to the chat|Copied code context|"
    r"You can skip this check|Use /help|Tokens: [\d.,k]+ sent|Cost: \$|Get:\d+ |Hit:\d+ |Ign:\d+ |Fetched [\d.,]+ [kMG]?B|"
    r"Reading package lists|Building dependency tree|WARNING: Running pip as the 'root' user|"
    r"\[notice\] |# packages in environment at|platform \w+ -- Python|cachedir: |rootdir: |configfile: |plugins: |"
    r"collecting \.\.\.|collected \d+ items?$|Requirement already satisfied|Downloading |Obtaining |Installing build dependencies|"
    r"Checking if build backend|Getting requirements to build|Preparing (?:editable )?metadata|Using cached|"
    # build and download progress ("Compiling foo v1.2.3", "Downloaded bar v0.4", "Finished `dev` profile")
    r"\s*(?:Compiling|Downloaded|Downloading|Checking|Fresh|Locking|Updating|Unpacking|Resolved|Prepared|Installed)\s+\S+\s+v?\d[\w.+-]*(?:\s|$)|"
    r"Finished [`'\"]?\w+[`'\"]? profile|\d{1,3}%\s*[|\[]|"
    # a warning a tool printed, a test runner's version header, a "Name: 1.2.3" version notice
    r"(?:sys:\d+: )?\w*Warning: |Running tests with \S+ version|[\w.-]{1,30}:\s*v?\d+(?:\.\d+)+[\w.+-]*\s*$|"
    # a record's timing, date or process field, alone on its line
    r"(?:Date|Time|Timestamp|Started|Finished|Duration|Elapsed|Took|Wall time|Runtime|PID|Process ID)\s*[:=]\s*"
    r"[\dT:.,+\-/ ]+(?:ms|s|sec|secs|seconds|m|min|minutes|Z|UTC)?\s*$)",
    I,
)

# what a search, a listing or a build prints about the code, not about the run: a grep hit
# ("src/a.py:12:    def f():", "a.py-14-  context"), a compiler's bare pointer ("--> src/a.rs:3:5"),
# a numbered listing line, a bundler's size table ("dist/a.js  12.6 kB │ gzip: 4.5 kB"), a search
# tool's paging note, a debugger's "Breakpoint 1 at ...". Never when the line reports an error.
TOOL_CHROME = lazy_regex(
    r"^(?!.*(?:\b(?:error|warning|fatal|failed|failure|panic)\b|\w(?:Error|Exception|Warning)\b))"
    r"(?:(?:\.{0,2}/)?[\w@+~-][\w.@+~-]*(?:/[\w.@+~-]+)*\.[A-Za-z][\w]{0,7}[:-]\d{1,6}[:-](?!\d+:)|"
    r"\d{1,6}(?:-|:|\t|\s{2,})\s*\S|"
    r"-->\s*\S+:\d+(?::\d+)?\s*$|"
    r".*\b\d+(?:\.\d+)?\s*[kKM]i?B\s*[│|]\s*gzip:|"
    r"Found \d+ (?:files?|matches|results?)\b.*\blimit: \d+|\[Showing results with pagination|"
    r"Breakpoint \d+ at \S+:\d+\s*$)",
    I,
)

# the agent saying the work is finished
FINISHED = lazy_regex(
    r"\b(?:the task is (?:now )?complete|task (?:is )?(?:now )?(?:complete|completed|done|finished)|I have (?:fully )?completed|"
    r"(?:have|has) been (?:successfully )?(?:completed|implemented|fixed|resolved)|the fix is complete|"
    r"all (?:tests|checks) pass(?:ed)?|nothing (?:left|more) to do)\b|^done\b|任务(?:已)?完成|已经完成",
    I,
)

# a request to the user at the end of the agent's message ("Please verify the path or provide ...")
ASKS_USER = lazy_regex(
    r"^(?:please|could you|can you|would you|let me know|kindly)\b|\b(?:please (?:verify|provide|confirm|clarify|check|let me know|share))\b"
    r"|请(?:确认|提供|告诉)",
    I,
)

RELAX = lazy_regex(
    r"\b(?:you can|you may|it's fine to|it is fine to|it's ok(?:ay)? to|feel free to|go ahead and|allowed to|no longer (?:need|required|a requirement))\b"
    r"|可以(?:用|使用|改|动)|允许|不再(?:要求|需要|限制)",
    I,
)

REJECT = lazy_regex(
    r"^(?:no|nope|nah)\b[,.!;\s]|^(?:not that|never mind|scratch that|forget (?:it|that|about))\b"
    r"|\b(?:that's not what I|not what I (?:want|asked|meant)|I don't want|we don't want|I do not want|we do not want|rather not|let's not|let us not|drop the idea|no longer (?:need|want))\b"
    r"|^(?:please\s+)?(?:don't|do not) (?:do|use|go with|add|build|make|implement|switch)\b"
    r"|^(?:不|不是|不对|不行|别|算了)|不要|不想|别用|放弃|否决|不考虑|不采用",
    I,
)

CLARIFY = lazy_regex(
    r"\b(?:I mean|I meant|to clarify|clarification|what I meant|more precisely|specifically,|in other words|by that I mean|actually,|to be clear|to be precise)\b"
    r"|我的意思|准确地说|具体来说|具体地说|补充一下|补充：|补充:|澄清|也就是说|其实|换句话说|更准确",
    I,
)

_ACK_PREFIX = r"(?:(?:ok(?:ay)?|thanks|thank you|great|good|perfect|nice|cool|好的?|可以|行|谢谢|很好|不错)[\s,，.。!！—–-]*)?"

NEW_REQUEST = lazy_regex(
    r"^" + _ACK_PREFIX + r"(?:now|next|then|also|and now|additionally|another thing|new task|one more thing|after that|please also)\b"
    r"|^" + _ACK_PREFIX + r"(?:接下来|现在|然后|另外|再帮|还要|下一步|新任务|顺便)",
    I,
)

# "also do Y": a request in addition to the current one, which stays open (not finished)
ADDITIVE = lazy_regex(
    r"^" + _ACK_PREFIX + r"(?:also|additionally|in addition|please also|as well|another thing|one more thing)\b"
    r"|^" + _ACK_PREFIX + r"(?:另外|还要|顺便|同时)",
    I,
)

ACK = lazy_regex(
    r"^(?:thanks|thank you|great|perfect|nice|good|ok|okay|cool|awesome|looks good|lgtm|done)\b"
    r"|^(?:好的|好|谢谢|很好|不错|可以了|完美|搞定)",
    I,
)

CONFIRM = lazy_regex(
    r"^(?:yes|yeah|yep|yup|correct|right|exactly|sure|confirmed|that's right|indeed|agreed)\b"
    r"|^(?:对|是的|没错|确认|可以|行|嗯|同意)",
    I,
)

ASSUMPTION = lazy_regex(
    r"\b(?:I(?:'ll| will)? assume|I'm assuming|I am assuming|we(?:'ll| will)? assume|assuming (?:that|you|the|we|this|it)|presumably|my assumption|I take it)\b"
    r"|假设|假定|我先按|暂定|默认(?:是|为|按)",
    I,
)

QUESTION_CUE = lazy_regex(
    r"\b(?:not sure (?:whether|if|why|how|what)|unclear (?:whether|if|why|how|what)|it is unclear|it's unclear|open question|to be determined|TBD"
    r"|need to (?:confirm|verify|find out|figure out|determine) (?:whether|if|why|how|what))\b"
    r"|不确定|待确认|需要确认|不清楚|尚不明确|有待(?:确认|验证)",
    I,
)

HEDGE = lazy_regex(
    r"\b(?:reports vary|sources (?:vary|differ|disagree|conflict)|conflicting (?:reports|information|sources)"
    r"|needs? (?:a |an |more |further |the )?(?:primary |official |reliable |independent )?(?:sources?|confirmation|verification|evidence)(?: to (?:confirm|verify))?"
    r"|unconfirmed|unverified|could not (?:be )?(?:confirm|verif)\w*|not (?:yet )?confirmed|remains unclear|is unclear|unknown whether)\b"
    r"|待确认|尚未确认|说法不一|需要.{0,6}(?:来源|证实|确认)",
    I,
)

NEXT_STEP = lazy_regex(
    r"^(?:next|then|after that|afterwards|finally)\b,?\s+(?:I|we|let's|let me)\b"
    r"|^(?:next steps?|todo|to do|remaining|plan)\s*:"
    r"|\bthe next step (?:is|will be)\b|\b(?:I|we) (?:still )?need to\b|\b(?:I|we) (?:should|will|'ll) (?:then|next)\b"
    r"|^(?:接下来|下一步|然后)|还需要|待办",
    I,
)

CHECKBOX = lazy_regex(r"^\s*[-*]\s*\[( |x|X)\]\s+(.+?)\s*$", regex.M)

EDIT_FAILED = lazy_regex(
    r"Your proposed edit has introduced new syntax error|Your changes have NOT been applied|No replacement was performed"
    r"|did not appear verbatim|^ERROR:|^Error:|Invalid `\w+` parameter|is not a valid|does not exist|File not found"
    r"|old_str .{0,200}? (?:did not|does not|is not)|String to replace not found|Found \d+ matches of the string to replace",
    regex.M,
)

# facts in tool output
TEST_SUMMARY = lazy_regex(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b|^Ran \d+ tests? in\b|^(?:FAILED|OK) \((?:failures|errors|skipped)="
    r"|\bTests run: \d+|\b\d+ (?:tests?|examples?|specs?) (?:passed|failed|run)\b|^test result: (?:ok|FAILED)\.",
    I,
)
INSTALLED = lazy_regex(r"^Successfully installed\b|\badded \d+ packages?\b|^Successfully (?:built|uninstalled)\b")
VERSION = lazy_regex(r"^[A-Za-z][\w .+/-]{0,40}?(?:version\s*|\bv)?[ :=v]\s*\d+\.\d+(?:\.\d+)*(?:[-+.][\w.]+)?\s*$", I)
KEY_NUM = lazy_regex(r"\b[A-Za-z_][\w.]{1,40}\s*[=:]\s*-?\d+(?:\.\d+)?(?:\s*(?:%|ms|s|MB|GB|KB|kB|B))?(?![\w.])")
CODEISH = lazy_regex(r"^\s*(?:def |class |import |from \S+ import|return\b|if |for |while |#|//|/\*|\*|@|[{}\[\]]|\d+[:|])|[{};]\s*$|^\s{4,}")
PROSE_SKIP = lazy_regex(r"^(?:please|note:|hint:|you can|here's|here is|here are|the above|\(open file|\(current directory|\[file:|file updated|your proposed edit|observation:)", I)
HAS_DIGIT = lazy_regex(r"\d")
NAME_WORD = lazy_regex(r"(?<=\s)[\p{Lu}][\p{L}\d-]{1,}")
HAN = lazy_regex(r"\p{Han}")
USE_OBJECT = lazy_regex(r"(?:don't|do not|never|not|no longer) (?:use|using|go with|add|adopt)\s+([\w.+#-]{2,40})|(?:不要|别|不用|不再|不能)(?:用|使用|采用|引入)\s*([\w.+#-]{2,40}|\p{Han}{2,8})", I)


# --------------------------------------------------------------------------- literal prefilters
#
# The cue patterns scan at a few MB/s; most text holds no cue at all. Each cue below is only run
# on text that contains one of its trigger literals (checked on the lower-cased text with ``in``,
# at memory speed). Every alternative of a pattern contains at least one of its triggers, so a
# prefilter never hides a match (tests/test_anchor_files.py checks the examples both ways).


class Cue:
    """A cue pattern with the literals that any of its matches must contain."""

    __slots__ = ("pattern", "triggers", "_set")

    def __init__(self, pattern: regex.Pattern, triggers: tuple[str, ...]):
        self.pattern = pattern
        self.triggers = triggers
        self._set: frozenset[str] | None = None  # the triggers, once the shared automaton covers them

    def possible(self, low: str) -> bool:
        """Could the (lower-cased) text hold a match?"""
        if len(low) < _AUTO_MIN and not _AUTO:
            return any(t in low for t in self.triggers)
        if self._set is None:
            found = _present(low)
            if found is None or not self._covered():
                return any(t in low for t in self.triggers)
        else:
            found = _present(low)
        return not self._set.isdisjoint(found)

    def search(self, text: str, low: str | None = None):
        if not self.possible(low if low is not None else text.lower()):
            return None
        return self.pattern.search(text)

    def _covered(self) -> bool:
        auto = _automaton()
        if auto is not None and all(self.triggers) and auto[1].issuperset(self.triggers):
            self._set = frozenset(self.triggers)
            return True
        return False


# Every cue's triggers are looked for in one pass of an Aho-Corasick automaton (``ahocorasick_rs``,
# when installed) instead of one substring search per trigger: a prose message is asked about
# ~300 triggers (a 5 KB task statement took 3 ms that way, 0.1 ms in one pass). The set of the
# triggers in a text is kept for the last text (the cues are asked about one text in a row). A
# short text (a sentence, a one-line request) is searched as before until a longer one has built
# the automaton: importing and building it (~3 ms, once per process) would cost a compaction of a
# few short messages more than it saves.
_AUTO_MIN = 128
_AUTO: list = []
_LAST: tuple = (None, None)  # (the last text, its triggers), replaced whole (threads may share it)


def _automaton() -> tuple[Any, frozenset[str], list[str]] | None:
    if not _AUTO:
        try:
            from ahocorasick_rs import AhoCorasick
        except ImportError:
            _AUTO.append(None)
        else:
            words = sorted({t for c in CUES.values() for t in c.triggers if t})
            _AUTO.append((AhoCorasick(words), frozenset(words), words))
    return _AUTO[0]


def _present(low: str) -> frozenset[str] | None:
    """The triggers (of every cue) that occur in ``low``; None without the automaton."""
    global _LAST
    last = _LAST
    if last[0] is low:
        return last[1]
    auto = _automaton()
    if auto is None:
        return None
    words = auto[2]
    found = frozenset([words[i] for i, _, _ in auto[0].find_matches_as_indexes(low, overlapping=True)])
    _LAST = (low, found)
    return found


_ZH_DEAD = ("无效", "没用", "不起作用", "没起作用", "没有效果", "没效果", "行不通", "走不通", "不管用", "没解决", "没有解决",
            "报错", "失败", "排除", "放弃", "原因")
CUES = {
    "decision": Cue(DECISION, (
        "decid", "decision", "chose", "choos", "opt", "settle", "gone with", "go with", "going with", "stick",
        "prefer", "switch to", "stay with", "instead of", "rather than", "because", "since", "so that", "to avoid",
        "given that", "the best ", "the right ", "the simplest ", "the safest ", "the cleanest ", "the correct ",
        "决定", "选", "采用", "改用", "就用", "定为", "确定", "方案", "因为", "由于")),
    "dead_end": Cue(DEAD_END, (
        "n't", "not", "cannot", "no effect", "no difference", "no luck", "still ", "same ", "dead end", "rule",
        "wrong", "insufficient", "incorrect", "mistake", "herring", "cause", "gave up", "abandon", "viable")
        + _ZH_DEAD),
    "constraint": Cue(CONSTRAINT, (
        "do not", "don't", "never", "always", "avoid", "only", "make sure", "ensure", "keep", "no need to", "must",
        "you ", "allowed", "required", "forbidden", "mandatory", "compatible", "without ", "please ",
        "stop", "no", "want", "need",
        "不要", "不能", "不得", "不许", "不允许", "禁止", "必须", "务必", "一定要", "只能", "只用", "别", "兼容", "避免",
        "保证", "确保", "不用", "不需要")),
    "question": Cue(QUESTION_CUE, (
        "not sure", "unclear", "open question", "to be determined", "tbd", "need to", "不确定", "待确认", "需要确认",
        "不清楚", "尚不明确", "有待")),
    "assumption": Cue(ASSUMPTION, (
        "assum", "presumably", "i take it", "假设", "假定", "我先按", "暂定", "默认")),
    "next_step": Cue(NEXT_STEP, (
        "next", "then", "after", "finally", "todo", "to do", "remaining", "plan", "need to", "should ", "will ",
        "'ll ", "接下来", "下一步", "然后", "还需要", "待办")),
    "hedge": Cue(HEDGE, (
        "vary", "differ", "disagree", "conflict", "need", "unconfirmed", "unverified", "could not", "confirmed",
        "unclear", "unknown whether", "待确认", "尚未确认", "说法不一", "需要")),
    "relax": Cue(RELAX, (
        "you can", "you may", "fine to", "ok to", "okay to", "feel free", "go ahead", "allowed to", "no longer",
        "可以", "允许", "不再")),
}


# --------------------------------------------------------------------------- the cues are data
#
# The patterns above are the cue rules of ``rules/cue`` (one TOML file per cue, with the examples
# that must and must not match; tests are generated from them). At import the rules are loaded
# and replace the patterns, so the rule files are the one place the vocabulary is edited; the
# literals here only stand in when the rules directory is not available (a stripped install),
# which the tests make sure never happens silently in a checkout.

_RULE_OF = {
    "cue.decision": "DECISION", "cue.choice": "CHOICE", "cue.observation": "OBSERVATION",
    "cue.failed-approach": "DEAD_END", "cue.constraint": "CONSTRAINT", "cue.stop": "STOP", "cue.relax": "RELAX",
    "cue.reject": "REJECT", "cue.clarify": "CLARIFY", "cue.new-request": "NEW_REQUEST", "cue.additive": "ADDITIVE",
    "cue.ack": "ACK", "cue.confirm": "CONFIRM", "cue.assumption": "ASSUMPTION", "cue.question": "QUESTION_CUE",
    "cue.hedge": "HEDGE", "cue.next-step": "NEXT_STEP", "cue.finished": "FINISHED", "cue.asks-user": "ASKS_USER",
    "cue.chrome-fact": "CHROME_FACT", "cue.advisory": "ADVISORY",
    "cue.harness-part": "HARNESS_PART", "cue.binding": "BINDING", "cue.changed-approach": "CHANGED_APPROACH",
}
_CUE_KEY = {"DECISION": "decision", "DEAD_END": "dead_end", "CONSTRAINT": "constraint", "QUESTION_CUE": "question",
            "ASSUMPTION": "assumption", "NEXT_STEP": "next_step", "HEDGE": "hedge", "RELAX": "relax"}
LOADED_FROM_RULES: list[str] = []


def _load_cue_rules() -> None:
    try:
        from ..engine import load_rules

        rules = load_rules().records("cue")  # plain data: no typed models built
    except Exception:  # noqa: BLE001 - no rules directory: the literals above stay
        return
    g = globals()
    for r in rules:
        name = _RULE_OF.get(r.id)
        if name is None or r.regex_ is None:
            continue
        flags = I if "IGNORECASE" in r.regex_.flags else 0
        if "MULTILINE" in r.regex_.flags:
            flags |= regex.M
        pat = lazy_regex(r.regex_.pattern, flags)
        g[name] = pat
        key = _CUE_KEY.get(name)
        if key is not None:
            CUES[key] = Cue(pat, tuple(t.lower() for t in r.prefilter) or CUES[key].triggers)
        LOADED_FROM_RULES.append(r.id)


_load_cue_rules()


# --------------------------------------------------------------------------- one labelling function
#
# Every use of the cues to file a sentence of prose goes through ``label_sentence``: a trained
# classifier can replace its body without touching the sections that read the labels.

LABELS = ("decision", "rejected", "constraint", "question", "plan", "status", "noise")

_PLAN = lazy_regex(
    r"^(?:(?:now|next|then|first|finally|so|ok(?:ay)?|alright)[,!.]?\s+)*(?:I'll|I will|I'm going to|I am going to|"
    r"let me|let's|we'll|we will|we need to|I need to|I still need to|we still need to|I should|we should|"
    r"the next step is|next step:|next,|todo:)\b|^(?:接下来|下一步|然后我|我(?:将|会|要|先)|还需要)", I)
_TO_USER = lazy_regex(
    r"\b(?:you|your|yours|shall I|should I|do you|would you|could you|can you|let me know|would it be|is it ok|"
    r"may I|want me to|prefer)\b|你|您|是否需要|要不要", I)
_SELF_TALK = lazy_regex(
    r"^(?:(?:hmm+|wait|hm+|ah|oh|well|but|so|and|or|actually|really|right|now)[,.!]?\s+)*(?:is (?:that|this|it) (?:really|actually|right|correct)|"
    r"what (?:if|about|else|could|would|does|is)|why (?:is|does|did|would|do)|how (?:is|does|did|do|can|could|would)|"
    r"where (?:is|does|do)|could (?:it|this|that) be|is there|are there|did (?:I|we|it)|do (?:I|we)|am I|have I|"
    r"does (?:this|that|it)|was (?:it|this|that)|or (?:is|was|does|maybe))\b", I)
_CODE_LIKE = lazy_regex(r"^\s*(?:#|//|/\*|\*\s|>>>|\$ )|[;{}]\s*$|^\s*(?:def|class|import|from|return|if|for|while)\b.*[:(]")


def cue_label(text: str, context: dict | None = None) -> str:
    """The label the cue patterns alone give one sentence (one of ``LABELS``).

    ``context`` as for :func:`label_sentence`. A question is one put to the user (a rhetorical
    question or self-talk is noise); a constraint binds only when the user (or the task) states
    it; a plan is the agent's own statement of what it will do next.
    """
    ctx = context or {}
    role = ctx.get("role", "assistant")
    s = text.strip()
    if len(s) < 4 or _CODE_LIKE.search(s) or CHROME_FACT.match(s):
        return "noise"
    low = s.lower()
    if s.endswith(("?", "？")):
        if role != "assistant":
            return "question"
        if _SELF_TALK.match(s) and not _TO_USER.search(s):
            return "noise"
        return "question" if _TO_USER.search(s) else "noise"
    if role == "user":
        if STOP.search(s) or CUES["constraint"].search(s, low) and not ADVISORY.search(s):
            return "constraint"
        if REJECT.search(s):
            return "rejected"
        if CUES["decision"].search(s, low):
            return "decision"
        return "noise"
    if FINISHED.search(s):
        return "status"
    if CUES["dead_end"].search(s, low):
        return "rejected"
    if CUES["decision"].search(s, low) and not OBSERVATION.search(s):
        return "decision"
    if _PLAN.search(s) or CUES["next_step"].search(s, low):
        return "plan"
    if ASKS_USER.search(s):
        return "question"
    return "noise"


def label_sentence(text: str, context: dict | None = None) -> str:
    """The label of one sentence of prose: ``decision``, ``rejected``, ``constraint``,
    ``question``, ``plan``, ``status`` or ``noise``.

    ``context``: ``role`` (``"user"`` or ``"assistant"``, default assistant), ``last`` (the
    sentence ends its message; unknown when absent).

    The trained classifier (:mod:`.prose_model`, which also reads the cue label as a feature)
    decides, except where the cues were better on the tuning half of the sentence labels
    (cross-validated by run): the rule is data, chosen by the training script and shipped in the
    weights' ``combine`` entry, and reads

    - ``cue_labels``: when the cues give one of these labels, the cue label stands;
    - ``threshold``: when the model's probability for its label is below it, the cue label stands;
    - otherwise the model's label.
    """
    ctx = context or {}
    cue = cue_label(text, ctx)
    from .prose_model import model

    m = model()
    rule = m.meta.get("combine") or {}
    if cue in rule.get("cue_labels", ()):
        return cue
    label, p = m.predict(text, ctx.get("role", "assistant"), ctx.get("last"), cue)
    if p < rule.get("threshold", 0.0):
        return cue
    return label
