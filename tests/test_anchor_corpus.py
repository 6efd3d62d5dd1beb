"""The anchor on real trajectories (../shared/corpus; skipped when absent).

Two promises, checked on every trajectory whose layout has a reader:

- key evidence holds every error line the protected zone found in tool output that is evidence
  (trace / error / test-failure spans; not lines of a file shown by a viewer or an editor, not a
  listing, not the tool's framing, not a bare exit code; not the task text or the agent's own
  prose), live or marked resolved; and nothing else but the verification lines it adds;
- files touched matches the files the tool calls really touched. The expected set is computed
  here, independently, from the tool-call arguments (a separate, regex-based reading of the
  same conventions: editor tools, SWE-agent text commands, shell commands) and from the diffs
  that editor tools print (``+++ path``).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from compactor.anchor import EVIDENCE_FAMILIES, build_anchor
from compactor.anchor.build import _error_class, _first_error_line, _step_num
from compactor.codeview import classify
from compactor.models import Role, SegmentKind
from compactor.normalize import normalize
from compactor.pipeline import Compactor, load_document

TRAJECTORIES = [
    "swe-agent/pydicom__pydicom-1458.gpt4.traj",
    "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj",
    "mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json",
    "mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json",
    "openhands-v0/ponylang__ponyc-4593.json",
    "openhands-v0/runtime-trajs-basic.json",
    "openhands-v1/safety-corrupt-transactions.gpt-4o.json",
    "claude-code/coverage-test-fix.jsonl",
    "claude-code/stop-hook-uncommitted-changes.jsonl",
]

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def compactor():
    return Compactor()


def _load(corpus: Path, rel: str):
    p = corpus / rel
    if not p.exists():
        pytest.skip(f"corpus file missing: {rel}")
    doc = load_document(p)
    if doc.format == "text" or not any(s.kind == SegmentKind.tool_call for s in doc.segments):
        pytest.skip(f"no reader for this layout yet ({rel} read as {doc.format})")
    return doc


def _spans(compactor, doc):
    out = []
    for s in doc.segments:
        out.extend(compactor.detector.detect(normalize(s.text), role=s.role.value, segment_id=s.id,
                                             step_id=s.step_id).spans)
    return out


@pytest.mark.parametrize("rel", TRAJECTORIES)
def test_key_evidence_holds_every_error_span(corpus, compactor, rel):
    doc = _load(corpus, rel)
    spans = _spans(compactor, doc)
    anchor = build_anchor(doc.segments, spans)
    # extraction keeps every error span; which of them the anchor shows is the run model's
    # choice (the live failure, what backs a failed approach, each error once: see
    # tests/test_anchor_evidence_select.py), so the extracted list is what is checked here
    extracted = anchor.cursor.raw_evidence or anchor.key_evidence
    have = {e.text for e in extracted}
    by_id = {s.id: s for s in doc.segments}
    calls = {}
    for s in doc.segments:
        if s.kind == SegmentKind.tool_call:
            calls[s.call_id or s.step_id] = s
    expected, not_expected = [], []
    for sp in spans:
        seg = by_id[sp.segment_id]
        if sp.family not in EVIDENCE_FAMILIES or not sp.text.strip():
            continue
        finish = (seg.tool_name or "").lower() in ("finish", "submit", "attempt_completion")  # the agent's own words
        if seg.kind != SegmentKind.tool_result or seg.meta or finish or sp.family == "exit-code" \
                or re.fullmatch(r"(?:ERRORS?|Error|error|WARNING|Warning)\s*:?", sp.text.strip()):
            not_expected.append(sp)
            continue
        call = calls.get(seg.call_id or seg.step_id)
        view = classify(normalize(seg.text), command=seg.command or (call.command if call else None),
                        tool=seg.tool_name)
        if any(view.evidence_ok(i) for i in range(sp.line_start - 1, sp.line_end)):
            expected.append(sp)
        else:
            not_expected.append(sp)
    # an earlier one-line error that a failed attempt carries verbatim is not repeated as evidence
    # (a linter's "- E999 ..." list marker aside)
    have |= {part for f in anchor.failed_attempts for part in f.error.split(" … ")}
    # a resolved error keeps its decisive line, marked resolved; the frames stay at its source step
    resolved = {(e.source_step, e.text) for e in extracted if e.status == "resolved"}
    # the editor failing the same way on path after path is one failed attempt (first … newest command)
    merged = [f for f in anchor.failed_attempts if " … " in f.command and f.count > 1]

    def covered(sp) -> bool:
        t = sp.text.strip()
        if sp.text in have or t in have or (t.startswith("- ") and t[2:] in have):
            return True
        line = _first_error_line(sp.text)
        if (sp.step_id, line) in resolved or (sp.family == "trace" and line in have):
            return True
        return any(_error_class(t) == _error_class(f.error) and
                   _step_num(f.source_step) <= _step_num(sp.step_id) <= _step_num(f.last_step) for f in merged)

    missing = [(sp.step_id, sp.family, sp.text[:120]) for sp in expected if not covered(sp)]
    assert not missing, f"{rel}: {len(missing)} error spans missing from key evidence: {missing[:5]}"
    exp_texts = {sp.text for sp in expected}
    noise = [sp.text[:120] for sp in not_expected if sp.text in have and sp.text not in exp_texts]
    assert not noise, f"{rel}: source lines, task text or bare exit codes taken for evidence: {noise[:5]}"
    for e in anchor.key_evidence:
        assert e.status == "live" or e.resolved_at, e
    # every evidence item is verbatim text of its source step
    texts_by_step: dict[str, str] = {}
    for s in doc.segments:
        texts_by_step[s.step_id] = texts_by_step.get(s.step_id, "") + "\n" + normalize(s.text)
    for e in anchor.key_evidence:
        assert e.text in texts_by_step[e.source_step]
    # no fact the trajectory does not state: each is a line / sentence of its source step
    for f in anchor.facts_learned:
        assert " ".join(f.text.split()) in " ".join(texts_by_step[f.source_step].split()), f
    for c in anchor.user_constraints:
        assert c.text in texts_by_step[c.source_step], c


# --------------------------------------------------------------------------- the oracle

_PATH_KEYS = ("path", "file_path", "filename", "absolute_path", "notebook_path")
_KNOWN = {"makefile", "dockerfile", "license", "readme"}


def _is_file(p: str) -> bool:
    p = p.strip("'\"")
    if not p or p.startswith(("-", "/dev/", "/proc/")) or re.search(r"[*?\[\]{}$`<>|;&\s'\"\\(),=]", p):
        return False
    if p.endswith("/") or "://" in p:
        return False
    base = p.rstrip("/").split("/")[-1]
    if base.lower() in _KNOWN:
        return True
    if base.startswith("."):
        return len(base) > 1 and base[1] != "."
    if "." not in base:
        return False
    stem, ext = base.rsplit(".", 1)
    return bool(stem) and bool(re.fullmatch(r"[A-Za-z0-9_+-]{1,12}", ext)) and bool(re.search(r"[A-Za-z]", base))


def _clean(p: str) -> str:
    p = p.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    p = re.sub(r"/+", "/", p).replace("/./", "/")
    return p.rstrip("/") if len(p) > 1 else p


def _shell(cmd: str, reads: set[str], writes: set[str]) -> None:
    # here-document bodies are data
    cmd = re.sub(r"<<-?\s*['\"]?(\w[\w.-]*)['\"]?([^\n]*)\n.*?\n\s*\1\s*(?=\n|$)", r"\2", cmd, flags=re.S)
    cmd = cmd.replace("\\\n", " ")
    for part in re.split(r"&&|\|\||[;|\n&()]", cmd):
        for m in re.finditer(r"(?<![<0-9&>])(?:[12]?>>?|&>>?)\s*([^\s;&|<>]+)", part):
            if _is_file(m.group(1)):
                writes.add(_clean(m.group(1)))
        part = re.sub(r"(?:[12]?>>?|&>>?)\s*[^\s;&|<>]+|<<?<?\s*\S+", " ", part)
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in ("sudo", "env", "time", "nohup")):
            words = words[1:]
        if not words:
            continue
        prog, args = words[0].split("/")[-1], words[1:]
        pos = [a for a in args if not a.startswith("-") and not a.lstrip("+-").isdigit()]
        if prog in ("cat", "head", "tail", "less", "more", "nl", "bat", "tac"):
            reads.update(_clean(a) for a in pos if _is_file(a))
        elif prog == "sed":
            inplace = any(a.startswith("-i") or a.startswith("--in-place") for a in args)
            files = pos if any(a in ("-e", "-f") for a in args) else pos[1:]
            (writes if inplace else reads).update(_clean(a) for a in files if _is_file(a))
        elif prog in ("tee", "touch", "rm", "unlink"):
            writes.update(_clean(a) for a in pos if _is_file(a))
        elif prog in ("cp", "mv") and len(pos) >= 2:
            for a in pos[:-1]:
                if _is_file(a):
                    (reads if prog == "cp" else writes).add(_clean(a))
            if _is_file(pos[-1]):
                writes.add(_clean(pos[-1]))
            elif len(pos) == 2 and _is_file(pos[0]):
                writes.add(_clean(pos[-1].rstrip("/") + "/" + pos[0].split("/")[-1]))
        elif prog == "git" and args:
            rest = [a for a in pos[1:]]
            if args[0] in ("rm", "mv"):
                writes.update(_clean(a) for a in rest if _is_file(a))
            elif args[0] in ("checkout", "restore") and "--" in args:
                writes.update(_clean(a) for a in args[args.index("--") + 1:] if _is_file(a))


def expected_files(segments) -> tuple[set[str], set[str]]:
    """(all files touched, files written/deleted) from the tool-call arguments."""
    reads: set[str] = set()
    writes: set[str] = set()
    open_file = None
    for seg in segments:
        if seg.kind != SegmentKind.tool_call or seg.meta:
            continue
        name = (seg.tool_name or "").lower()
        args = None
        if seg.text.lstrip().startswith("{"):
            try:
                args = json.loads(seg.text)
            except ValueError:
                args = None
        if isinstance(args, dict):
            path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]), None)
            sub = args.get("command") if isinstance(args.get("command"), str) else None
            if sub is None and isinstance(args.get("translated_ipython_code"), str):
                m = re.search(r"'command': '(\w+)'", args["translated_ipython_code"])
                sub = m.group(1) if m else None
            if name in ("str_replace_editor", "file_editor", "str_replace_based_edit_tool") or (
                    path and sub in ("view", "create", "str_replace", "insert", "undo_edit")):
                if not path:
                    continue
                if sub == "view" or (sub is None and not any(args.get(k) for k in ("content", "file_text", "new_str"))):
                    if _is_file(path):
                        reads.add(_clean(path))
                else:
                    writes.add(_clean(path))
            elif name == "open" and path:
                reads.add(_clean(path))
                open_file = _clean(path)
            elif name == "create" and path:
                writes.add(_clean(path))
                open_file = _clean(path)
            elif name in ("edit", "insert", "append") and (path or open_file):
                writes.add(_clean(path or open_file))
            elif isinstance(args.get("command"), str):
                _shell(args["command"], reads, writes)
            continue
        cmd = (seg.command or seg.text).strip()
        words = cmd.split()
        if not words:
            continue
        if words[0] == "open" and len(words) > 1:
            reads.add(_clean(words[1]))
            open_file = _clean(words[1])
        elif words[0] == "create" and len(words) > 1:
            writes.add(_clean(words[1]))
            open_file = _clean(words[1])
        elif words[0] in ("edit", "insert", "append"):
            if open_file:
                writes.add(open_file)
        elif words[0] in ("goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file", "submit"):
            continue
        elif not re.match(r"^[A-Za-z_][\w.]*\(.*\)\s*$", cmd, re.S):
            _shell(cmd, reads, writes)
    return reads | writes, writes


def _same(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _match(expected: set[str], got: set[str]) -> tuple[list[str], list[str]]:
    missing = sorted(e for e in expected if not any(_same(e, g) for g in got))
    extra = sorted(g for g in got if not any(_same(e, g) for e in expected))
    return missing, extra


@pytest.mark.parametrize("rel", TRAJECTORIES)
def test_files_touched_match_tool_calls(corpus, compactor, rel):
    doc = _load(corpus, rel)
    anchor = build_anchor(doc.segments, _spans(compactor, doc))
    exp_all, exp_written = expected_files(doc.segments)
    for s in doc.segments:
        # an editor call whose reader kept only "<verb> <path>" (OpenHands v0)
        m = re.fullmatch(r"(view|create|str_replace|insert|undo_edit) (\S+)", (s.command or "").strip())
        if s.kind == SegmentKind.tool_call and m and (s.tool_name or "") == "str_replace_editor" \
                and "." in m.group(2).rsplit("/", 1)[-1]:
            exp_all.add(m.group(2))
            if m.group(1) != "view":
                exp_written.add(m.group(2))
    for s in doc.segments:
        # a Python script written by a here-document and run in the same command line writes the
        # files it opens for writing
        cmd = s.command or ""
        if s.kind == SegmentKind.tool_call and "<<" in cmd:
            for m in re.finditer(r"cat > (\S+\.py) << '?(\w+)'?\n(.*?)\n\2", cmd, re.S):
                if re.search(r"python\S* " + re.escape(m.group(1)), cmd[m.end():]):
                    for w in re.finditer(r"open\('([^']+)', '[wa]'", m.group(3)):
                        exp_all.add(w.group(1))
                        exp_written.add(w.group(1))
    for s in doc.segments:  # an editor's diff names the file it wrote
        if s.kind == SegmentKind.tool_result and s.text.startswith("--- ") and "\n+++ " in s.text:
            target = s.text.split("\n+++ ", 1)[1].split("\n", 1)[0].split("\t", 1)[0].strip()
            if target != "/dev/null":
                exp_all.add(target)
                exp_written.add(target)
    got_all = {f.path for f in anchor.files_touched}
    got_written = {f.path for f in anchor.files_touched if any(a != "read" for a in f.actions)}
    missing, extra = _match(exp_all, got_all)
    assert not missing and not extra, f"{rel}: missing {missing}, unexpected {extra}"
    missing, extra = _match(exp_written, got_written)
    assert not missing and not extra, f"{rel}: written files: missing {missing}, unexpected {extra}"
    assert len(got_all) == len({f.path for f in anchor.files_touched})  # one entry per file


def test_files_touched_covers_at_least_three_layouts(corpus, compactor):
    layouts = set()
    for rel in TRAJECTORIES:
        p = corpus / rel
        if not p.exists():
            continue
        doc = load_document(p)
        anchor = build_anchor(doc.segments, _spans(compactor, doc))
        if anchor.files_touched:
            layouts.add(doc.format)
    assert len(layouts) >= 3, layouts


def test_anchor_is_fast_on_corpus(corpus, compactor):
    import time

    for rel in TRAJECTORIES:
        p = corpus / rel
        if not p.exists():
            continue
        doc = load_document(p)
        spans = _spans(compactor, doc)
        t = time.perf_counter()
        build_anchor(doc.segments, spans)
        assert time.perf_counter() - t < 1.0, rel


@pytest.mark.parametrize("rel", TRAJECTORIES)
def test_merge_turn_by_turn_equals_build(corpus, compactor, rel):
    from compactor.anchor import merge

    doc = _load(corpus, rel)
    spans = _spans(compactor, doc)
    whole = build_anchor(doc.segments, spans)
    a = build_anchor([], [])
    by_seg: dict[str, list] = {}
    for sp in spans:
        by_seg.setdefault(sp.segment_id, []).append(sp)
    # one merge per step (turn), as an agent calling compact() every turn would
    i = 0
    segs = doc.segments
    while i < len(segs):
        j = i
        while j < len(segs) and segs[j].step_id == segs[i].step_id:
            j += 1
        chunk = segs[i:j]
        a = merge(a, chunk, [sp for s in chunk for sp in by_seg.get(s.id, [])])
        i = j
    assert a == whole
