"""`compactor trim`: baseline folding, repeated blocks, informative summaries, untouched
passthrough, never larger than the input, GitHub Actions output, the Python API and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

import compactor
from compactor import Baseline, TrimOptions, trim
from compactor.cli import main
from compactor.normalize import strip_ansi

from conftest import CORPUS

ERR = "src/app/main.py:12: error: Incompatible types in assignment"


def _cli(*args, stdin=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "compactor", *args], capture_output=True, input=stdin, env=e,
                          timeout=120)


def _maven_like(n_invocations: int = 4) -> str:
    block = [
        "WARNING: An illegal reflective access operation has occurred",
        "WARNING: Illegal reflective access by com.google.inject.internal.cglib.core.$ReflectUtils$1",
        "WARNING: Please consider reporting this to the maintainers of com.google.inject",
        "WARNING: Use --illegal-access=warn to enable warnings of further illegal reflective access operations",
        "WARNING: All illegal access operations will be denied in a future release",
    ]
    lines = []
    for k in range(n_invocations):
        lines += [f"+ mvn -q test -pl module{k}"] + block + [f"[INFO] module{k}: Tests run: {10 + k}, Failures: 0"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- repeated blocks


def test_a_block_already_printed_becomes_one_line():
    text = _maven_like(4)
    res = trim(text)
    out = res.text
    assert out.count("WARNING: An illegal reflective access operation has occurred") == 1
    assert "[… same 5 lines as at line 2]" in out
    # the lines that differ stay
    for k in range(4):
        assert f"+ mvn -q test -pl module{k}" in out
    assert res.stats.repeated_blocks == 3
    assert len(out.encode()) < len(text.encode())


def test_consecutive_repeats_are_counted():
    block = ["Exception in thread \"main\" java.lang.IllegalStateException: boom",
             "\tat com.example.App.run(App.java:42)",
             "\tat com.example.App.main(App.java:7)"]
    text = "\n".join(["start"] + block * 5 + ["end"]) + "\n"
    out = trim(text).text
    assert out.count("java.lang.IllegalStateException: boom") == 1
    assert "[… same 3 lines as at line 2 (×4)]" in out


def test_lines_differing_only_in_ci_timestamps_are_not_repeats():
    block = ["##[error]Process completed with exit code 1.", "FAIL\tgithub.com/x/y [build failed]",
             "--- FAIL: TestA (0.00s)"]
    lines = []
    for k in range(3):
        lines += [f"2022-06-04T16:06:5{k}.1234567Z {b}" for b in block]
    out = trim("\n".join(lines) + "\n").text
    for line in lines:
        assert line in out


# ---------------------------------------------------------------------------- summaries


def test_fold_summary_names_informative_shapes_never_separators():
    lines = []
    for i in range(60):
        lines += ["-----", "", f"Downloading https://repo/maven2/org/lib{i}/1.{i}/lib{i}-1.{i}.jar ({i} kB)"]
    out = trim("\n".join(lines) + "\n").text
    marker = next(line for line in out.splitlines() if line.startswith("[… "))
    assert '× "-----"' not in marker and '× ""' not in marker
    assert '× "Downloading' in marker
    assert "first \"Downloading" in marker and "last \"Downloading" in marker


def test_summary_of_only_separators_says_so():
    text = "start\n" + "-----\n\n" * 40 + "end\n"
    out = trim(text).text
    assert "separators and blank lines" in out


# ---------------------------------------------------------------------------- never larger


def test_nothing_to_fold_passes_through_untouched_without_receipt():
    text = "Traceback (most recent call last):\r\n  File \"a.py\", line 3, in <module>\r\nKeyError: 'x'\r\n"
    res = trim(text, receipt=True)
    assert res.text == text
    assert res.stats.passthrough


def test_small_exception_trace_is_not_enlarged_by_the_cli(tmp_path):
    f = tmp_path / "t.txt"
    data = b"\x1b[31mjava.lang.NullPointerException\x1b[0m\n\tat a.B.c(B.java:3)\n\tat a.B.main(B.java:9)\n"
    f.write_bytes(data)
    r = _cli("trim", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout == data  # byte for byte, ANSI escapes included
    r = _cli("trim", str(f), "--receipt", "stderr")
    assert r.stdout == data and r.stderr == b""


_line = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=40),
    st.sampled_from(["", "-----", "ERROR: boom", "  File \"x.py\", line 3, in f", "Downloading 12 kB",
                     "\tat a.B.c(B.java:3)", "2022-06-04T16:06:52.1754831Z ok  pkg 0.1s", "\x1b[1m[INFO]\x1b[m x",
                     "progress 10%\rprogress 100%", "x.py:3: error: bad"]),
)


@given(st.lists(_line, max_size=120), st.booleans(), st.integers(min_value=0, max_value=3))
def test_trim_output_is_never_larger_than_its_input(lines, final_newline, context):
    text = "\n".join(lines) + ("\n" if final_newline else "")
    for receipt in (False, True):
        res = trim(text, context=context, receipt=receipt)
        assert len(res.text.encode()) <= len(text.encode())
        if not res.stats.folded:
            assert res.text == text
    base = trim(text, baseline=text[: len(text) // 2], context=context)
    assert len(base.text.encode()) <= len(text.encode())


def test_deterministic_across_hash_seeds(tmp_path):
    f = tmp_path / "m.log"
    f.write_text(_maven_like(6) + ("Downloading 1 kB\n" * 30) + ERR + "\n")
    outs = {_cli("trim", str(f), env={"PYTHONHASHSEED": s}).stdout for s in ("0", "1", "77")}
    assert len(outs) == 1


# ---------------------------------------------------------------------------- baseline


def _job(seed: int, fail: bool) -> str:
    lines = [f"Run #{seed}", "Setting up JDK 17"]
    lines += [f"Downloading from central: https://repo/org/dep{i}/{seed}.{i}/dep{i}.jar" for i in range(80)]
    lines += [f"[INFO] Compiling {100 + seed} source files", "[INFO] BUILD SUCCESS" if not fail else ""]
    if fail:
        lines += ["[ERROR] Tests run: 5, Failures: 1", "[ERROR] FooTest.bar:42 expected:<1> but was:<2>",
                  "Something new the passing run never printed", "and another novel line"]
    lines += [f"Post job cleanup {i}" for i in range(20)]
    return "\n".join(lines) + "\n"


def test_baseline_shapes_fold_first_and_errors_stay():
    passing, failing = _job(1, False), _job(2, True)
    plain = trim(failing)
    res = trim(failing, baseline=passing)
    out = res.text
    assert "[ERROR] FooTest.bar:42 expected:<1> but was:<2>" in out
    assert "Something new the passing run never printed" in out
    assert "as in the passing run" in out
    assert res.stats.baseline_lines >= 90
    assert len(out) < len(plain.text)
    # the same via a Baseline object, paths and several runs
    b = Baseline().add_text(passing).add_text(_job(3, False))
    assert trim(failing, baseline=b).text == trim(failing, baseline=[passing, _job(3, False)]).text


def test_baseline_memory_is_bounded_by_distinct_shapes():
    b = Baseline()
    b.add_text("".join(f"2022-01-01T00:00:{i % 60:02d}.0000000Z step {i} done in {i % 97} ms\n" for i in range(50_000)))
    assert len(b) <= 10 and b.lines == 50_001  # digit counts differ (1..5 digits × 1..2), nothing else


@pytest.mark.corpus
def test_ci_breakages_with_and_without_baseline():
    root = CORPUS / "ci-breakages"
    if not root.is_dir():
        pytest.skip("corpus absent")
    figures = {}
    for mode in ("plain", "baseline"):
        labelled = kept = b_in = b_out = 0
        for folder in sorted(p for p in root.iterdir() if (p / "fail.log").is_file()):
            text = (folder / "fail.log").read_text(encoding="utf-8")
            base = folder / "pass.log" if mode == "baseline" else None
            out = trim(text, baseline=base).text
            lines = text.splitlines()
            for n in json.loads((folder / "labels.json").read_text())["error_lines"]:
                labelled += 1
                want = strip_ansi(lines[n - 1]).strip()
                kept += (not want) or (want in out)
            b_in += len(text.encode())
            b_out += len(out.encode())
        figures[mode] = (kept / labelled, b_in / b_out)
    print(figures)
    recall, ratio = figures["plain"]
    assert recall >= 0.99 and ratio >= 5.0, figures
    recall, ratio = figures["baseline"]
    assert recall >= 0.995 and ratio >= 10.0, figures


# ---------------------------------------------------------------------------- CLI and GitHub


def test_cli_baseline_flags_and_receipt_on_stderr(tmp_path, capsys):
    (tmp_path / "green").mkdir()
    (tmp_path / "green" / "a.log").write_text(_job(1, False))
    (tmp_path / "green" / "b.log").write_text(_job(3, False))
    fail = tmp_path / "fail.log"
    fail.write_text(_job(2, True))
    rc = main(["trim", str(fail), "--baseline-dir", str(tmp_path / "green"), "--receipt", "stderr"])
    cap = capsys.readouterr()
    assert rc == 0
    assert "[ERROR] FooTest.bar:42" in cap.out and "[compactor trim:" not in cap.out
    assert cap.err.startswith("[compactor trim:") and "as in the baseline" in cap.err
    rc = main(["trim", str(fail), "--baseline", str(tmp_path / "green" / "a.log")])
    assert rc == 0 and "as in the passing run" in capsys.readouterr().out


def test_cli_bad_baseline_is_one_line_exit_2(tmp_path):
    fail = tmp_path / "fail.log"
    fail.write_text("x\n")
    r = _cli("trim", str(fail), "--baseline", str(tmp_path / "missing.log"))
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"missing.log" in r.stderr
    r = _cli("trim", str(fail), "--baseline-dir", str(tmp_path / "nope"))
    assert r.returncode == 2 and b"nope" in r.stderr


def test_github_annotations_groups_and_job_summary(tmp_path):
    lines = []
    for i in range(30):
        lines += [f"Compiling module {i}"] * 3
        lines.append(f"src/mod{i}/file{i}.c:{i + 1}:5: error: expected ';' before '}}' token")
    lines += [f"Downloading {i} kB" for i in range(50)]
    log = tmp_path / "b.log"
    log.write_text("\n".join(lines) + "\n")
    summary = tmp_path / "summary.md"
    r = _cli("trim", str(log), "--github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    ann = [x for x in out.splitlines() if x.startswith("::error ")]
    assert 1 <= len(ann) <= 10
    assert ann[0].startswith("::error file=src/mod0/file0.c,line=1::")
    assert out.count("::group::") == out.count("::endgroup::") >= 1
    # flat: a group never opens inside another one
    depth = 0
    for x in out.splitlines():
        depth += x.startswith("::group::") - x.startswith("::endgroup::")
        assert depth in (0, 1)
    table = summary.read_text()
    assert "| lines in |" in table and "src/mod0/file0.c" in table


def test_exit_code_of_the_producer_survives_with_pipefail(tmp_path):
    script = f'set -o pipefail; (printf "a\\nb\\nerror: boom\\n"; exit 3) | "{sys.executable}" -m compactor trim --github'
    r = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert b"error: boom" in r.stdout


def test_api_is_exported():
    assert compactor.trim is trim
    res = trim(Path(__file__).read_bytes())
    assert isinstance(res, compactor.TrimResult) and res.stats.lines_in > 100
    with pytest.raises(TypeError):
        trim(12)  # type: ignore[arg-type]
    assert isinstance(TrimOptions(), TrimOptions)


def test_trim_api_refuses_binary_data_and_names_the_input(tmp_path):
    import compactor
    from compactor import InputError

    blob = tmp_path / "core.bin"
    blob.write_bytes(b"\x7fELF\x00\x00\x00\x00" * 512)
    with pytest.raises(InputError) as exc:
        compactor.trim(blob)
    assert exc.value.one_line().startswith(f"{blob}:byte 4: binary data")
    with pytest.raises(InputError) as exc:
        compactor.trim(blob.read_bytes(), source="job-17.log")
    assert "job-17.log" in exc.value.one_line()
    # a log with a stray NUL byte is still a log
    assert "boom" in compactor.trim(b"ok\n" * 200 + b"x\x00y\nValueError: boom\n").text
