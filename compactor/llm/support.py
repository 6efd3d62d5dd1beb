"""Does a source text support a claim? A deterministic, conservative check.

Used by the guards on every LLM answer (hallucinated facts, decision laundering, stale dead
ends). It is lexical on purpose: it cannot understand paraphrase, so it errs on the side of
rejecting (a rejected item falls back to the deterministic anchor's item; nothing is lost).

A claim is supported by a source when all of these hold:

1. **numbers**: every number in the claim (``2023``, ``3.14``, ``1,024``, ``v2.31.0``'s parts) occurs
   as a number in the source. Numbers are where hallucinations hurt most;
2. **specific tokens**: every identifier-like token of the claim occurs in the source
   (case-insensitive substring): tokens with digits, ``_``, ``.``, ``/``, ``::``, CamelCase or
   ALLCAPS, and capitalised words that do not start a sentence (names);
3. **coverage**: ``(2 * specific present + general present) / (2 * specific + general) >=
   threshold`` (0.6) over the claim's content words (stop words dropped, light suffix
   stemming: ``failed`` / ``failure`` / ``fails`` → ``fail``); CJK text is compared by
   character bigrams;
4. **negation**: a claim that negates (``not``, ``never``, ``no``, ``n't``, ``without``, ``不``,
   ``没``…) needs a source that negates too (so "X did not pass" is not supported by "X passed").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import regex
from ..lazyre import lazy_regex

__all__ = ["SourceIndex", "Support", "content_tokens", "numbers_in", "support", "overlap"]

THRESHOLD = 0.6

_WORD = lazy_regex(r"[\p{L}\p{N}]+(?:(?:[._/\-]|::|:)[\p{L}\p{N}]+)*'?[\p{L}]*")
_NUMBER = lazy_regex(r"(?<![\p{L}\p{N}_.])\d+(?:[.,]\d+)*(?![\p{L}_])")
_HAN = lazy_regex(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_STEP_REF = lazy_regex(r"\b(?:steps?\s*#?\s*\d+|s\d+)\b", regex.IGNORECASE)
_SCOPE_END = lazy_regex(r"[,;.!?:()\[\]\n]")
_SCOPE_WORDS = frozenset({"but", "however", "although", "though", "whereas", "while", "yet", "so", "because"})
_NEG_SRC = lazy_regex(r"\b(?:not|no|never|none|nor|cannot|without|neither)\b|n't", regex.IGNORECASE)

STOPWORDS = frozenset("""
a an the and or but if then than so of to in on at by for with from into onto over under as is are was were be
been being am it its it's this that these those there here which who whom whose what when where why how all any
both each few more most other some such only own same too very can could should would will shall may might must
do does did done doing have has had having i me my we our us you your he him his she her they them their
not no nor never n't without also just about after before again further once up down out off above below
between through during while until because via per using use used we've we'll i'll let's let now
agent step steps trajectory user assistant tool
""".split())

NEGATIONS = frozenset({"not", "no", "never", "n't", "without", "cannot", "can't", "didn't", "doesn't", "don't",
                       "isn't", "wasn't", "aren't", "weren't", "won't", "hasn't", "haven't", "none", "neither",
                       "nor"})
_HAN_NEG = ("不", "没", "未", "无", "非", "别")

_SUFFIXES = ("ations", "ation", "ings", "ing", "ures", "ure", "edly", "ied", "ies", "ed", "es", "er",
             "ly", "al", "s", "e")


_TIMEOUT = lazy_regex(r"(?i)\btim(?:ed|ing|es|e)?\s+out\b")
_CANT = lazy_regex(r"(?i)\b(?:could\s*n[o']t|can\s*n[o']t|cannot|unable\s+to|failed\s+to)\b")
_CANON = {"error": "fail", "err": "fail", "failur": "fail", "unabl": "fail", "errored": "fail"}
_FAIL_STEMS = frozenset({"fail", "crash", "broken", "broke", "exception", "abort"})


def _pre(text: str) -> str:
    """Phrase normalisation shared by claims and sources ("timed out" → "timeout")."""
    return _TIMEOUT.sub("timeout", text.replace("\u2019", "'"))


def _stem(w: str) -> str:
    st = stem(w)
    return _CANON.get(st, st)


@lru_cache(maxsize=65536)
def stem(w: str) -> str:
    """Light suffix stripping, consistent across forms: pass/passed/passes/passing → pass,
    complete/completed/completing → complet, fail/failed/failure/fails → fail."""
    if w.endswith("ss"):
        return w
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def _norm_number(n: str) -> str:
    return n.replace(",", "")


def numbers_in(text: str) -> set[str]:
    """Numbers in ``text``, normalised (thousand separators dropped), with their dotted parts."""
    out: set[str] = set()
    for m in _NUMBER.finditer(text):
        n = _norm_number(m.group())
        out.add(n)
        if "." in n:
            parts = n.split(".")
            out.update(parts)
            for i in range(2, len(parts)):
                out.add(".".join(parts[:i]))
            try:  # 3.0 == 3
                f = float(n) if n.count(".") == 1 else None
                if f is not None and f.is_integer():
                    out.add(str(int(f)))
            except ValueError:
                pass
    return out


def _is_specific(tok: str, original: str, sentence_initial: bool) -> bool:
    if any(c.isdigit() for c in tok) and not tok.isdigit():
        return True
    if any(c in tok for c in "_./:") or "::" in tok:
        return True
    if len(original) >= 2 and original.isupper() and original.isalpha():
        return True  # ALLCAPS: an acronym or constant
    if any(c.isupper() for c in original[1:]) and any(c.islower() for c in original):
        return True  # camelCase / CamelCase
    if original[:1].isupper() and not sentence_initial and original.isalpha() and len(original) > 2:
        return True  # a capitalised name mid-sentence
    return False


@dataclass(frozen=True)
class ClaimTokens:
    specific: tuple[str, ...]   # lowercase, checked by substring
    general: tuple[str, ...]    # stems
    numbers: tuple[str, ...]
    negated: bool
    cjk: tuple[str, ...]        # CJK bigrams
    neg_scope: frozenset[str] = frozenset()  # general stems that sit inside a negation's scope


@lru_cache(maxsize=4096)
def claim_tokens(text: str) -> ClaimTokens:
    clean = _STEP_REF.sub(" ", _pre(text))
    specific: list[str] = []
    general: list[str] = []
    cjk: list[str] = []
    negated = False
    neg_scope: set[str] = set()
    in_neg = False
    last_end = 0
    for m in _WORD.finditer(clean):
        orig = m.group()
        low = orig.lower()
        if in_neg and _SCOPE_END.search(clean, last_end, m.start()):
            in_neg = False
        if low in _SCOPE_WORDS:
            in_neg = False
        last_end = m.end()
        if _HAN.search(orig):
            cjk.extend(_bigrams(orig))
            if any(n in orig for n in _HAN_NEG):
                negated = True
            continue
        if low in NEGATIONS or low.endswith("n't"):
            negated = True
            in_neg = True
            continue
        if low.isdigit() or _NUMBER.fullmatch(low):
            continue  # numbers are checked separately
        prev = clean[:m.start()].rstrip()
        initial = not prev or prev[-1] in ".!?:;\n\"'([-*>#`"
        if _is_specific(low, orig, initial):
            specific.append(low)
        elif low not in STOPWORDS and len(low) >= 2:
            st = _stem(low.strip("'"))
            general.append(st)
            if in_neg:
                neg_scope.add(st)
    return ClaimTokens(tuple(dict.fromkeys(specific)), tuple(dict.fromkeys(general)),
                       tuple(sorted(numbers_in(clean))), negated, tuple(dict.fromkeys(cjk)),
                       frozenset(neg_scope))


_HAN_CLAUSE = lazy_regex(r"[，。；！？、,.;!?\n]")


def _cjk_polarity(text: str) -> tuple[set[str], set[str]]:
    """(bigrams inside a negation's scope, bigrams outside) for CJK text: a negation character
    (不 没 未 无 非 别) scopes over the next 4 characters of its clause."""
    neg: set[str] = set()
    pos: set[str] = set()
    for clause in _HAN_CLAUSE.split(text):
        chars = [(i, c) for i, c in enumerate(clause) if _HAN.match(c)]
        scope_until = -1
        for k in range(len(chars) - 1):
            i, c = chars[k]
            if c in _HAN_NEG:
                scope_until = i + 4
            j, d = chars[k + 1]
            if j != i + 1:
                continue
            (neg if j <= scope_until else pos).add(c + d)
    return neg, pos


def _bigrams(s: str) -> list[str]:
    chars = [c for c in s if _HAN.match(c)]
    if len(chars) == 1:
        return chars
    return [chars[i] + chars[i + 1] for i in range(len(chars) - 1)]


def content_tokens(text: str) -> set[str]:
    """Stems + specific tokens + numbers + CJK bigrams of ``text`` (for overlap comparisons)."""
    ct = claim_tokens(text)
    return set(ct.specific) | set(ct.general) | set(ct.numbers) | set(ct.cjk)


class SourceIndex:
    """A source text prepared once for many support checks."""

    def __init__(self, text: str):
        self.text = text
        self.lower = text.lower()
        self.numbers = numbers_in(text)
        stems: set[str] = set()
        neg: set[str] = set()
        pos: set[str] = set()
        in_neg = False
        last_end = 0
        low = _pre(self.lower)
        for m in _WORD.finditer(low):
            w = m.group()
            if in_neg and _SCOPE_END.search(low, last_end, m.start()):
                in_neg = False
            last_end = m.end()
            if w in _SCOPE_WORDS:
                in_neg = False
            if w in NEGATIONS or w.endswith("n't"):
                in_neg = True
                continue
            group = neg if in_neg else pos
            for st in {_stem(w.strip("'"))} | {_stem(p) for p in regex.split(r"[._/:\-]+", w) if p}:
                stems.add(st)
                group.add(st)
        if _CANT.search(low):  # "could not install" states a failure
            stems.add("fail")
            pos.add("fail")
        self.stems = stems
        self.neg_stems = neg
        self.pos_stems = pos
        self.fails = bool(stems & _FAIL_STEMS)
        self.cjk = set(_bigrams(text)) | {c for c in text if _HAN.match(c)}
        self._cjk_pol: tuple[set[str], set[str]] | None = None
        self.negates = bool(_NEG_SRC.search(self.lower.replace("\u2019", "'"))) or any(n in text for n in _HAN_NEG)

    def cjk_polarity(self) -> tuple[set[str], set[str]]:
        if self._cjk_pol is None:
            self._cjk_pol = _cjk_polarity(self.text)
        return self._cjk_pol


@dataclass(frozen=True)
class Support:
    ok: bool
    score: float
    reason: str = ""  # empty when ok: 'numbers', 'specific', 'coverage', 'negation', 'empty'
    missing: tuple[str, ...] = ()


def support(claim: str, source: SourceIndex | str, threshold: float = THRESHOLD) -> Support:
    src = source if isinstance(source, SourceIndex) else SourceIndex(source)
    ct = claim_tokens(claim)
    if not (ct.specific or ct.general or ct.numbers or ct.cjk):
        return Support(False, 0.0, "empty")
    missing_nums = tuple(n for n in ct.numbers if n not in src.numbers)
    if missing_nums:
        return Support(False, 0.0, "numbers", missing_nums)
    missing_spec = tuple(t for t in ct.specific if t not in src.lower)
    spec_present = len(ct.specific) - len(missing_spec)
    gen_present = sum(1 for g in ct.general if g in src.stems or g in src.lower)
    cjk_present = sum(1 for b in ct.cjk if b in src.cjk)
    denom = 2 * len(ct.specific) + len(ct.general) + len(ct.cjk) + len(ct.numbers)
    num = 2 * spec_present + gen_present + cjk_present + len(ct.numbers)
    score = num / denom if denom else 0.0
    if missing_spec:
        return Support(False, score, "specific", missing_spec)
    if score < threshold:
        missing = tuple(g for g in ct.general if g not in src.stems and g not in src.lower)
        return Support(False, score, "coverage", missing)
    if ct.negated and not src.negates:
        return Support(False, score, "negation")
    # polarity: a stem the claim asserts (or negates) must occur in the source with that polarity
    # ("X failed" and "could not X" agree: a claim that states a failure may match a negated stem)
    claim_fails = bool(set(ct.general) & _FAIL_STEMS)
    flipped = tuple(g for g in ct.general if g in src.stems and (
        (g in ct.neg_scope and g not in src.neg_stems and not src.fails) or
        (g not in ct.neg_scope and g not in src.pos_stems and not claim_fails)))
    if flipped:
        return Support(False, score, "negation", flipped)
    if ct.cjk:
        c_neg, c_pos = _cjk_polarity(claim)
        s_neg, s_pos = src.cjk_polarity()
        flipped_cjk = tuple(b for b in ct.cjk if b in src.cjk and (
            (b in c_neg and b not in c_pos and b not in s_neg) or (b in c_pos and b not in c_neg and b not in s_pos)))
        if flipped_cjk:
            return Support(False, score, "negation", flipped_cjk)
    return Support(True, score)


def overlap(a: str, b: str) -> float:
    """Symmetric content overlap (Dice coefficient of content tokens), 0..1."""
    ta, tb = content_tokens(a), content_tokens(b)
    if not ta or not tb:
        return 1.0 if a.strip() == b.strip() else 0.0
    return 2 * len(ta & tb) / (len(ta) + len(tb))
