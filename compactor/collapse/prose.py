"""Which paragraphs of a plain-text input read as human or assistant prose.

In plain-text mode the whole input is one output, but a pasted chat, a design note or an agent
log holds paragraphs that a person or a model wrote; Level 1 never collapses those. A paragraph
(a run of non-blank lines) reads as prose when it is mostly words in sentences: enough words,
mostly letters, sentence punctuation, and no line that looks like a log record, a shell prompt,
code, a table or a path listing. CJK text counts its characters as words.
"""

from __future__ import annotations

from ..lazyre import lazy_regex

__all__ = ["prose_lines", "is_prose"]

_LOGGY = lazy_regex(
    r"""(?x)^\s*(?:
        \d{4}-\d\d-\d\d[T\s]\d\d:\d\d          # timestamps
      | \d\d:\d\d:\d\d
      | \[[A-Z ]{3,8}\]                          # [INFO] [ERROR]
      | (?:DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL|TRACE)\b[:\s]
      | [$#>%]\s                                 # prompts
      | \+\s                                     # set -x
      | (?:>>>|\.\.\.)\s
      | at\s+\S+\(                               # stack frames
      | File\ "
      | \d+[:.)]\s*$
      | [|+-]{3,}                                # tables, rules
      | \S+\.\w{1,5}:\d+                         # path:line
      | (?:def|class|import|from|return|if|for|while|function|const|let|var|public|private)\b.*[:;{(]\s*$
    )"""
)
_WORD = lazy_regex(r"[^\W\d_]{2,}")
_CJK = lazy_regex(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_SENTENCE_END = lazy_regex(r"[.!?。！？：:;；,，)\]\"'”’]\s*$|[.!?。！？]\s")
_CODEY = lazy_regex(r"[{};=<>\\]|\(\)|::|->|=>|\$\{")


def is_prose(lines: list[str]) -> bool:
    text = " ".join(ln.strip() for ln in lines)
    if not text:
        return False
    if any(_LOGGY.match(ln) for ln in lines):
        return False
    cjk = len(_CJK.findall(text))
    words = len(_WORD.findall(text)) + cjk // 2
    if words < 8:
        return False
    letters = sum(1 for ch in text if ch.isalpha() or ch == " ")
    if letters / len(text) < 0.8:
        return False
    if len(_CODEY.findall(text)) > max(1, words // 12):
        return False
    if not any(_SENTENCE_END.search(ln) for ln in lines) and cjk < 8:
        return False
    # a list of short items (file names, package names) is not prose
    avg = sum(len(ln.strip()) for ln in lines) / len(lines)
    return avg >= 30 or cjk >= 8


def prose_lines(lines: list[str]) -> set[int]:
    """0-based indices of the lines that belong to prose paragraphs."""
    out: set[int] = set()
    i, n = 0, len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        while j < n and lines[j].strip():
            j += 1
        if is_prose(lines[i:j]):
            out.update(range(i, j))
        i = j
    return out
