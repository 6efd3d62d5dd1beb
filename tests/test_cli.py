"""The CLI contract: exit codes, one-line errors, data on stdout, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"


@pytest.fixture(autouse=True)
def _store(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))


def run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_compact_json_contract(capsys):
    rc, out, err = run(["compact", str(DEMO), "--keep-recent", "1"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert d["format"] == "openai-chat"
    assert set(d["report"]) >= {"tokens_before", "tokens_after", "level", "protected", "placeholders", "diagnostics"}
    assert d["report"]["tokens_after"] < d["report"]["tokens_before"]
    assert d["report"]["level"] >= 1
    msgs = d["messages"]
    assert [m["role"] for m in msgs] == [m["role"] for m in json.loads(DEMO.read_text())]
    joined = json.dumps(msgs)
    # the evidence survived verbatim
    assert "ConnectionPoolExhausted: pool_size=20, queue_depth=347" in joined
    assert "at Pool._acquireConnection (src/db/pool.js:142:11)" in joined
    assert "npm install: completed, 234 packages added" in joined


def test_compact_then_expand_roundtrip(capsys):
    rc, out, _ = run(["compact", str(DEMO), "--keep-recent", "1"], capsys)
    d = json.loads(out)
    ph = d["report"]["placeholders"][0]
    rc, out2, err = run(["expand", ph["id"]], capsys)
    assert rc == 0, err
    import hashlib

    assert hashlib.sha256(out2.encode()).hexdigest() == ph["sha256"]


def test_emit_messages_is_the_layout(capsys):
    rc, out, _ = run(["compact", str(DEMO), "--emit", "messages", "--keep-recent", "1"], capsys)
    assert rc == 0
    msgs = json.loads(out)
    assert isinstance(msgs, list) and msgs[0]["role"] == "system"


@pytest.mark.parametrize("content,needle", [
    (b'{"messages": [{"role": "user", "content": "hi"}', "line 1"),
    (b'{"type":"user"}\n{"type":"assistant", "message": {\n', "line 2"),
    (b"\x00\x01\x02\x03binary\x00\x00\x00" * 50, "binary data"),
    (b"", "empty input"),
    (b"   \n\n  ", "empty input"),
])
def test_bad_input_exit_2_one_line(tmp_path, capsys, content, needle):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    rc, out, err = run(["compact", str(p)], capsys)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(p) in lines[0] and needle in lines[0]
    assert "Traceback" not in err


def test_invalid_utf8_is_replaced_with_a_diagnostic(tmp_path, capsys):
    p = tmp_path / "log.txt"
    p.write_bytes(b"build ok\nerror: bad byte \xff\xfe here\nmore\n")
    rc, out, err = run(["compact", str(p)], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert any(x["code"] == "invalid-utf8" and "byte 25" in x["message"] for x in d["report"]["diagnostics"])
    assert "error: bad byte \ufffd\ufffd here" in d["messages"]
    # the output alone does not show that bytes were replaced: stderr names the file and the byte
    assert err.strip() == f"compactor: warning: {p}:byte 25: invalid UTF-8; undecodable bytes were replaced with U+FFFD"


def test_invalid_utf8_in_a_trajectory_is_reported_on_stderr(tmp_path, capsys):
    p = tmp_path / "t.json"
    p.write_bytes(b'[{"role": "user", "content": "a\xff\xfe"}]')
    rc, out, err = run(["compact", str(p), "--emit", "messages"], capsys)
    assert rc == 0, err
    assert json.loads(out)[0]["content"] == "a\ufffd\ufffd"
    assert f"{p}:byte 31: invalid UTF-8" in err and "Traceback" not in err
    rc, out, err = run(["scan", str(p)], capsys)
    assert rc == 0 and f"{p}:byte 31: invalid UTF-8" in err


def test_deep_json_is_rejected_cleanly(tmp_path, capsys):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    rc, out, err = run(["compact", str(p)], capsys)
    assert rc == 2 and "nesting deeper than 512" in err and len(err.strip().splitlines()) == 1


def test_unknown_format_and_missing_file(tmp_path, capsys):
    rc, _, err = run(["compact", str(DEMO), "--format", "nope"], capsys)
    assert rc == 2 and "unknown format 'nope'" in err
    rc, _, err = run(["compact", str(tmp_path / "missing.json")], capsys)
    assert rc == 2 and "no such file" in err


def test_wrong_forced_layout_says_why(capsys):
    rc, _, err = run(["compact", str(DEMO), "--format", "claude-code"], capsys)
    assert rc == 2 and "not in the claude-code layout" in err


def test_usage_error_is_exit_2(capsys):
    rc, _, err = run(["compact"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("ref", ["../../etc/passwd", "c-../../x", "/etc/passwd", "c-0123", "c-0123456789ABCDEF", "c-0123456789abcdef\x00"])
def test_expand_hostile_ids_fail_cleanly(capsys, ref):
    rc, out, err = run(["expand", ref], capsys)
    assert rc == 2 and out == "" and "invalid placeholder id" in err


def test_expand_unknown_id(capsys):
    rc, out, err = run(["expand", "c-0123456789abcdef"], capsys)
    assert rc == 2 and "unknown placeholder id" in err


def test_formats_lists_every_layout(capsys):
    rc, out, _ = run(["formats"], capsys)
    for name in ["openai-chat", "anthropic", "steps", "claude-code", "swe-agent", "openhands", "gemini-cli", "codex", "aider", "text"]:
        assert name in out


def test_rules_list_and_explain(capsys):
    rc, out, _ = run(["rules", "list"], capsys)
    assert rc == 0 and "trace.python" in out
    rc, out, _ = run(["rules", "explain", "trace.python"], capsys)
    assert rc == 0 and json.loads(out)["id"] == "trace.python"
    rc, _, err = run(["rules", "explain", "trace.nope"], capsys)
    assert rc == 2 and "no rule" in err


def test_rules_test_on_a_user_folder(tmp_path, capsys):
    (tmp_path / "error.boom.toml").write_text(
        'kind = "regex"\nfamily = "error"\ndescription = "our build prints BOOM on failure"\n'
        'prefilter = ["BOOM"]\n[regex]\npattern = "BOOM: .+"\n'
        '[examples]\nmatch = ["BOOM: disk full"]\nno_match = ["boom box", "BOOM"]\n')
    rc, out, _ = run(["rules", "test", str(tmp_path)], capsys)
    assert rc == 0 and "3 passed, 0 failed" in out
    (tmp_path / "error.bad.toml").write_text(
        'kind = "regex"\nfamily = "error"\ndescription = "a rule whose example fails"\n'
        '[regex]\npattern = "XYZ"\n[examples]\nmatch = ["abc"]\nno_match = ["def"]\n')
    rc, out, _ = run(["rules", "test", str(tmp_path)], capsys)
    assert rc == 1 and "FAIL error.bad:match[0]" in out


def test_rules_test_catches_redos(tmp_path, capsys):
    (tmp_path / "error.slow.toml").write_text(
        'kind = "regex"\nfamily = "error"\ndescription = "catastrophic backtracking bait"\n'
        '[regex]\npattern = "^(a|a)+$"\n[examples]\nmatch = ["aaaa"]\nno_match = ["b"]\n')
    rc, out, _ = run(["rules", "test", str(tmp_path)], capsys)
    assert rc == 1 and "error.slow:pump" in out


def test_trim_streams_with_receipt(tmp_path, capsys):
    log = tmp_path / "ci.log"
    lines = [f"Downloading artifact {i} of 500 (12{i % 10} kB)" for i in range(500)]
    lines.insert(250, "src/app/main.py:12: error: Incompatible types in assignment")
    log.write_text("\n".join(lines) + "\n")
    rc, out, err = run(["trim", str(log)], capsys)
    assert rc == 0, err
    assert "src/app/main.py:12: error: Incompatible types in assignment" in out
    assert out.strip().splitlines()[-1].startswith("[compactor trim: 501 lines in")
    assert len(out) * 4 < log.stat().st_size


def _cli(*args, env=None, stdin=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "compactor", *args], capture_output=True, env=e, input=stdin, timeout=120)


@pytest.mark.slow
def test_byte_identical_across_hash_seeds_locale_and_tz(tmp_path):
    outs = []
    for seed, lang, tz in [("0", "C.UTF-8", "UTC"), ("123", "en_US.UTF-8", "Asia/Shanghai"), ("random", "C", "America/New_York")]:
        r = _cli("compact", str(DEMO), "--keep-recent", "1",
                 env={"PYTHONHASHSEED": seed, "LC_ALL": lang, "TZ": tz, "COMPACTOR_STORE": str(tmp_path / f"s{seed}.sqlite")})
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.slow
def test_closed_pipe_is_not_an_error(tmp_path):
    big = tmp_path / "big.log"
    big.write_text("".join(f"line {i} ok\n" for i in range(200_000)))
    p = subprocess.Popen([sys.executable, "-m", "compactor", "compact", str(big), "--emit", "messages"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COMPACTOR_STORE": str(tmp_path / "s.sqlite")})
    p.stdout.read(10)
    p.stdout.close()
    rc = p.wait(timeout=120)
    err = p.stderr.read().decode()
    assert rc == 0 and "Traceback" not in err, err


def test_stdin_dash(tmp_path):
    r = _cli("compact", "-", "--emit", "report", stdin=b"hello\nerror: it broke at x.py:3\n",
             env={"COMPACTOR_STORE": str(tmp_path / "s.sqlite")})
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["format"] == "text" and any("error: it broke" in s["text"] for s in rep["protected"])


def test_output_file_may_be_the_input_and_keeps_its_permissions(tmp_path, capsys):
    log = tmp_path / "ci.log"
    log.write_text("".join(f"Downloading artifact {i} of 500 (12{i % 10} kB)\n" for i in range(500))
                   + "src/app/main.py:12: error: Incompatible types in assignment\n")
    rc, expected, err = run(["trim", str(log)], capsys)
    assert rc == 0, err
    log.chmod(0o640)
    rc, out, err = run(["trim", str(log), "-o", str(log)], capsys)
    assert rc == 0 and out == "", err
    assert log.read_text() == expected and log.stat().st_mode & 0o777 == 0o640
    conv = tmp_path / "conv.json"
    conv.write_bytes(DEMO.read_bytes())
    rc, expected, err = run(["compact", str(conv), "--keep-recent", "1"], capsys)
    rc, out, err = run(["compact", str(conv), "--keep-recent", "1", "-o", str(conv)], capsys)
    assert rc == 0 and conv.read_text() == expected
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary left


def test_a_failed_run_leaves_the_old_output_file_whole(tmp_path, capsys, monkeypatch):
    import compactor

    log = tmp_path / "ci.log"
    log.write_text("error: something broke\n" * 50)
    old = tmp_path / "out.txt"
    old.write_text("the previous output\n")

    def half_then_fail(out, *a, **kw):
        out.write("half of a trimmed log\n")
        out.flush()
        raise compactor.InputError("cannot read", source=str(log))

    monkeypatch.setattr(compactor, "trim_to", half_then_fail)
    rc, out, err = run(["trim", str(log), "-o", str(old)], capsys)
    assert rc == 2 and "cannot read" in err
    assert old.read_text() == "the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ci.log", "out.txt"]
    rc, out, err = run(["trim", str(log), "-o", str(tmp_path / "missing" / "x.txt")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "missing/x.txt: cannot write output" in err


@pytest.mark.parametrize("argv, flag", [
    (["compact", "--keep-recent", "-1"], "--keep-recent"),
    (["compact", "--budget", "0"], "--budget"),
    (["compact", "--anchor-max-tokens", "-3"], "--anchor-max-tokens"),
])
def test_an_out_of_range_flag_value_names_the_flag(tmp_path, capsys, argv, flag):
    p = tmp_path / "t.json"
    p.write_text('[{"role": "user", "content": "hi"}]')
    rc, out, err = run([*argv, str(p)], capsys)
    assert rc == 2 and out == ""
    assert err.strip().startswith(f"compactor: argument {flag}: Input should be greater than or equal to")
    assert err.strip().endswith("(see 'compactor compact --help')") and err.count("\n") == 1


def test_the_library_names_the_option_not_a_flag():
    from compactor import Compactor, ConfigError

    with pytest.raises(ConfigError) as info:
        Compactor(keep_recent=-1)
    assert info.value.option == "keep_recent" and "invalid option keep_recent" in str(info.value)


@pytest.mark.parametrize("command,values", [
    ("compact", ("json", "messages", "anchor", "markdown", "handoff", "report")),
    ("batch", ("messages", "json", "anchor", "markdown", "report")),
])
def test_emit_values_are_described_in_help(command, values, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    emit = text[text.rindex("--emit {"):]  # the option's help, not the usage line
    emit = emit[: emit.index(" --", 10)]
    for value in values:
        assert f"{value}:" in emit or f"{value} (default):" in emit, (value, emit)
