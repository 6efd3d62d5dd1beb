"""Chinese debugging sessions in seed 001's style keep what seed 001 protects (issue 32).

The fixtures in ``tests/fixtures/anchor_zh`` are written for this test (not taken from any run,
and not used to train the prose classifier): a Claude Code session and an OpenAI-chat session
in Chinese, and one where the user mixes Chinese and English and the agent answers in both.
Each has binding constraints (不要用 X / 必须兼容 Y / 禁止修改 Z / 只能 ...), a dead end with its
reason, a decision between alternatives with its reason, real tracebacks / compiler errors with
``file:line``, and benign output (installs, listings, logs, file reads) for compaction to cut.

Compacted at Level 2 they must keep every constraint (verbatim), the dead end with its reason
under the excluded approaches, the decision with its reason, every error line and frame
verbatim, in at most 60% of the input's tokens, byte-identical across runs; the anchor in
English and in Chinese carries the same items.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compactor import compact
from compactor.anchor import to_markdown
from compactor.anchor.render import render_lines
from compactor.emit import render
from compactor.pipeline import Compactor, load_document
from compactor.tokens import get_counter

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).resolve().parent / "fixtures" / "anchor_zh"

# name -> (file, layout, constraints, (dead end, its reason), (decision, its reason), error lines and frames)
SESSIONS = {
    "safari-date": (
        "safari-date.zh.claude-code.jsonl", "claude-code",
        ["不要用 moment.js，包体积已经超标了，也不要引入别的日期库。",
         "必须兼容 Safari 12，我们还有不少老 iPad 用户。",
         "禁止修改 src/api/ 下的文件，后端接口的返回格式不能动。",
         "只能用 npm test 跑测试，不要改 jest 配置。"],
        ("换成 T", "当成 UTC 来解析"),
        ("决定用正则拆分再按本地时间构造", "也不需要引入任何日期库"),
        ["RangeError: 无法解析的时间: 2026-03-01 08:05:09",
         "at formatDateTime (src/utils/date.js:19:11)",
         "at src/utils/date.test.js:42:14",
         'Expected: "2026-03-01 08:05"',
         'Received: "2026-03-01 16:05"',
         "at src/utils/date.test.js:42:53"],
    ),
    "gbk-import": (
        "gbk-import.zh.openai.json", "openai-chat",
        ["不要用 pandas，生产机上装不了；",
         "必须兼容 Python 3.6（服务器还是 CentOS 7）；",
         "禁止修改 data/incoming/ 下的原始 CSV 文件，那是财务系统导出的；",
         "只能用标准库，不能加新依赖。"],
        ("统一改成 gbk 不行", "带 BOM 的 UTF-8"),
        ("决定用方案 B", "gb18030 是 GBK 的超集"),
        ["UnicodeDecodeError: 'utf-8' codec can't decode byte 0xb6 in position 2048: invalid start byte",
         'File "scripts/import_orders.py", line 57, in read_rows',
         'File "scripts/import_orders.py", line 98, in main',
         "import_orders.HeaderError: 缺少列: 订单号",
         'File "scripts/import_orders.py", line 31, in check_header'],
    ),
    "tokio-bump": (
        "tokio-bump.zh-en.openai.json", "openai-chat",
        ["不要改 src/lib.rs 里的 public API，下游有三个服务在用。",
         "必须兼容 MSRV 1.70, CI 里还有 1.70 的 job。",
         "Also: do not add new crates to Cargo.toml."],
        ("pinning tokio to 1.36", "hyper-util 0.1.6 requires tokio ^1.38"),
        ("决定用 tokio::time::timeout", "它不需要新增 crate"),
        ["error[E0599]: no method named `into_std_timeout` found for struct `tokio::net::TcpStream` in the current scope",
         "--> src/conn/dial.rs:88:14",
         "error[E0308]: mismatched types",
         "--> src/conn/pool.rs:142:29",
         'error: failed to select a version for the requirement `tokio = "^1.38"`'],
    ),
}

NAMES = sorted(SESSIONS)


@pytest.fixture(scope="module")
def counter():
    return get_counter()


@pytest.fixture(scope="module")
def results():
    """Each session compacted at Level 2 with the Chinese anchor (one run per session)."""
    comp = Compactor()
    return {name: comp.compact(FIX / SESSIONS[name][0], level=2, lang="zh") for name in NAMES}


def _texts(path: Path) -> list[str]:
    return [s.text for s in load_document(path).segments]


def _written(result, tmp_path: Path, name: str) -> Path:
    """The compacted conversation written in its own layout (what the model is sent)."""
    out = tmp_path / f"{name}.out{''.join(Path(SESSIONS[name][0]).suffixes[-1:])}"
    out.write_text(render(result, "messages"), encoding="utf-8")
    return out


@pytest.mark.parametrize("name", NAMES)
def test_level2_is_at_most_60_percent_of_the_input(results, counter, tmp_path, name):
    file, layout = SESSIONS[name][:2]
    res = results[name]
    assert res.format == layout and res.report.level == 2
    written = _written(res, tmp_path, name)
    doc = load_document(written)
    assert doc.format == layout  # the output reads back in the input's layout
    before = sum(map(counter.count, _texts(FIX / file)))
    after = sum(map(counter.count, [s.text for s in doc.segments]))
    assert before == res.report.tokens_before and after == res.report.tokens_after
    assert after <= 0.60 * before, (name, before, after)
    # the older turns went into the anchor: the summary message carries it
    assert any("## 当前工作状态" in t for t in (s.text for s in doc.segments))


@pytest.mark.parametrize("name", NAMES)
def test_level2_keeps_constraints_dead_end_decision_and_evidence(results, tmp_path, name):
    _, _, constraints, (dead, dead_why), (decision, why), evidence = SESSIONS[name]
    res = results[name]
    a = res.anchor
    out = "\n".join(_texts(_written(res, tmp_path, name)))
    md = to_markdown(a, "zh")
    # every constraint: an item of the anchor's constraints, verbatim, and in what the model is sent
    kept = [c.text for c in a.user_constraints if c.status == "active"]
    for c in constraints:
        assert any(c in k for k in kept), (name, c, kept)
        assert c in out
    # the dead end, with its reason, under the excluded approaches
    excluded = [f"{x.approach} {x.why}" for x in a.dead_ends if x.status == "excluded"]
    assert any(dead in x and dead_why in x for x in excluded), (name, excluded)
    section = md.split("**已排除方案**:", 1)[1].split("\n\n", 1)[0]
    assert dead in section and dead_why in section
    # the decision, with its reason
    decisions = [f"{d.decision} {d.reason}" for d in a.decisions_made if d.status == "active"]
    assert any(decision in d and why in d for d in decisions), (name, decisions)
    assert all(d.reason for d in a.decisions_made if decision in d.decision)
    section = md.split("**已做决策**:", 1)[1].split("\n\n", 1)[0]
    assert decision in section and why in section
    # every error line and frame, verbatim
    for line in evidence:
        assert line in out, (name, line)
    # and every line of every error the detector protected in the tools' output
    results_ = {s.id for s in load_document(FIX / SESSIONS[name][0]).segments if s.kind.value == "tool_result"}
    checked = 0
    for sp in res.report.protected:
        if sp.family in ("trace", "error", "test-failure") and sp.segment_id in results_:
            checked += 1
            for line in sp.text.split("\n"):
                assert line.strip() in out, (name, sp.rule_id, line)
    assert checked >= 2


@pytest.mark.parametrize("name", NAMES)
def test_english_and_chinese_anchor_carry_the_same_items(results, name):
    a = results[name].anchor
    en, zh = to_markdown(a, "en"), to_markdown(a, "zh")
    assert en.startswith("## Current working state") and zh.startswith("## 当前工作状态")
    en_ids = [i for _, i, _ in render_lines(a, "en") if i]
    assert en_ids and en_ids == [i for _, i, _ in render_lines(a, "zh") if i]
    items = [c.text for c in a.user_constraints] + [d.decision for d in a.decisions_made] \
        + [d.reason for d in a.decisions_made if d.reason] + [x.approach for x in a.dead_ends] \
        + [x.why for x in a.dead_ends if x.why]
    for e in a.key_evidence:
        items += [ln.strip() for ln in e.text.split("\n") if ln.strip()]
    assert len(items) >= 6
    for t in items:
        assert t in en and t in zh, t


def test_the_failed_attempts_name_the_compiler_error_not_its_caret_line(results):
    """A rustc diagnostic's message is its header (``error[E0599]: ...``), not the caret line
    under the source excerpt."""
    a = results["tokio-bump"].anchor
    errors = [f.error for f in a.failed_attempts if f.command == "cargo build"]
    assert errors and errors[0].startswith("error[E0599]: no method named `into_std_timeout`")
    assert not any(e.text.lstrip().startswith("|") for e in a.key_evidence)


def test_adjacent_chinese_clauses_are_each_a_constraint():
    """Chinese punctuation has no space after it: a constraint clause that starts where the last
    one ended is still found."""
    text = "不要用 Redis；必须兼容 MySQL 5.7；禁止修改 migrations/ 目录；只能改 app/points.py。"
    got = [sp.text for sp in Compactor().scan(text, role="user") if sp.family == "constraint"]
    assert got == ["不要用 Redis；", "必须兼容 MySQL 5.7；", "禁止修改 migrations/ 目录；", "只能改 app/points.py。"]


def test_the_cli_output_is_byte_identical_across_runs(tmp_path):
    outs = []
    for seed in ("0", "4242"):
        for name in NAMES:
            env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT),
                       COMPACTOR_STORE=str(tmp_path / f"store-{seed}"))
            p = subprocess.run([sys.executable, "-m", "compactor", "compact", "--level", "2", "--lang", "zh",
                                "--emit", "messages", str(FIX / SESSIONS[name][0])],
                               capture_output=True, env=env, timeout=300)
            assert p.returncode == 0, p.stderr.decode("utf-8", "replace")[-2000:]
            outs.append(p.stdout)
    n = len(NAMES)
    assert outs[:n] == outs[n:]
    for out in outs[:n]:
        assert "## 当前工作状态".encode() in out


# name -> how many records of the session were written when it is compacted mid-way: after the
# decision was carried out and before its check ran
MID = {"safari-date": 42, "gbk-import": 32}


def _prefix(name: str, n: int, tmp_path: Path) -> Path:
    src = FIX / SESSIONS[name][0]
    out = tmp_path / src.name
    if src.suffix == ".jsonl":
        out.write_text("".join(src.read_text(encoding="utf-8").splitlines(True)[:n]), encoding="utf-8")
    else:
        import json

        out.write_text(json.dumps(json.loads(src.read_text(encoding="utf-8"))[:n], ensure_ascii=False), encoding="utf-8")
    return out


@pytest.mark.parametrize("name", sorted(MID))
def test_compacted_mid_session_the_work_is_in_progress_and_nothing_is_lost(counter, tmp_path, name):
    """Compaction happens while the work goes on: the anchor says the change awaits its check
    (naming the failure it must fix, not a summary line of the test run), and still keeps the
    constraints, the dead end and the decision."""
    _, _, constraints, (dead, dead_why), (decision, why), _ = SESSIONS[name]
    src = _prefix(name, MID[name], tmp_path)
    res = Compactor().compact(src, level=2, lang="zh")
    assert res.report.level == 2 and res.report.tokens_after <= 0.60 * res.report.tokens_before
    a = res.anchor
    assert a.cursor.run.status == "working"
    md = to_markdown(a, "zh")
    assert md.split("\n")[2].startswith("**状态**: 进行中")
    steps = [n.text for n in a.next_steps if n.status == "pending"]
    assert any(s.startswith("check the change of") for s in steps), steps
    check = next(s for s in steps if s.startswith("check the change of"))
    assert "Time:" not in check and "passed" not in check
    if name == "safari-date":
        assert "● formatDateTime (safari) › parses the API format without the native parser" in check
    else:
        assert "UnicodeDecodeError" in check
    for c in constraints:
        assert any(c in x.text for x in a.user_constraints)
    assert any(dead in f"{x.approach} {x.why}" and dead_why in f"{x.approach} {x.why}" for x in a.dead_ends)
    assert any(decision in d.decision and why in d.reason for d in a.decisions_made)
    # the derived step in each rendering's language, its command and error verbatim
    en = to_markdown(a, "en")
    assert check in en and "check the change of" not in md
    row = next(ln for ln in md.split("\n") if "的改动：重新运行 `" in ln)
    assert row.startswith("- 下一步 (") and check.split("`")[1] in row and check.split("`")[3] in row


def test_derived_next_steps_are_said_in_chinese_with_their_parts_verbatim():
    from compactor.anchor.sections import step_text

    cases = {
        "resolve the live failure: KeyError: 'sku' (app/cart.py:41); then re-run `python -m pytest`":
            "解决当前失败：KeyError: 'sku' (app/cart.py:41)；然后重新运行 `python -m pytest`",
        "resolve the live failure: error[E0308]: mismatched types":
            "解决当前失败：error[E0308]: mismatched types",
        "check the change of s9: re-run `npm test` (it failed at s7 with `TypeError: x is undefined`)":
            "检查 s9 的改动：重新运行 `npm test`（它在 s7 失败：`TypeError: x is undefined`）",
        "verify the change of s4: run `python repro.py` again (no passing run since)":
            "验证 s4 的改动：再运行一次 `python repro.py`（此后没有通过的运行）",
        "carry out the stated plan: 先把 sniff_encoding 的单元测试补上":
            "执行已说明的计划：先把 sniff_encoding 的单元测试补上",
        "the run stopped at its step or cost limit (s40); continue from where it stopped":
            "运行在 s40 因步数或费用上限停止；从停下的地方继续",
        "the run stopped on an API or harness error (s12): retry `cargo build`":
            "运行在 s12 因 API 或运行环境错误停止：重试 `cargo build`",
        "answer the pending request: 帮我看看为什么 CI 挂了":
            "答复待处理的需求：帮我看看为什么 CI 挂了",
    }
    for en, zh in cases.items():
        assert step_text(en, "zh") == zh
        assert step_text(en, "en") == en
    # the agent's own words are shown as written, in either rendering
    for own in ("下一步：把 CI 的 tokio 版本矩阵更新到 1.38。", "run the linter before committing",
                "Next, I need to run it against the old report.py"):
        assert step_text(own, "zh") == own
