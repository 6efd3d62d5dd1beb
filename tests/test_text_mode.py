"""Plain-text mode: prose paragraphs are never collapsed; JSON of no known layout warns."""

from __future__ import annotations

import json
import subprocess
import sys

from compactor import Compactor
from compactor.collapse.prose import is_prose, prose_lines

USER = ("Please keep the public API of config.load() exactly as it is. We tried raising the pool size "
        "last week and it did not help, so do not go down that road again.")
AGENT = ("I will look at the connection handling first, because the traceback points at the pool, "
         "and the retry loop only hides the leak. After that I will run the whole suite.")
ZH = "不要修改公共接口。我们上周已经试过调大连接池，没有用，所以这次先检查连接是否被正确释放，然后再跑完整的测试。"


def _log() -> str:
    noise = "\n".join(f"2026-01-01 10:00:{i % 60:02d} INFO worker-{i % 4} processed batch {i} in {i % 7} ms"
                      for i in range(200))
    pip = "\n".join(f"Collecting package-{i}==1.{i}.0" for i in range(60))
    return f"{USER}\n\n{noise}\n\n{AGENT}\n\n{pip}\n\n{ZH}\n"


def test_prose_paragraphs_survive_level1_in_text_mode():
    res = Compactor().compact(_log(), format="text")
    out = res.messages
    assert isinstance(out, str)
    assert USER in out and AGENT in out and ZH in out
    assert len(out) < len(_log()) / 3  # the log lines around them were still collapsed


def test_prose_detector_rejects_logs_code_and_lists():
    assert is_prose([USER]) and is_prose([AGENT]) and is_prose([ZH])
    assert not is_prose(["2026-01-01 10:00:01 INFO worker processed the batch of all the records in time."])
    assert not is_prose(["def handler(request, response):", "    return render(request, 'page.html')"])
    assert not is_prose(["requests", "urllib3", "certifi", "idna", "charset-normalizer", "pydantic", "regex", "x"])
    assert not is_prose(['  File "app/db/pool.py", line 142, in _acquire_connection the pool was exhausted by.'])
    assert not is_prose(["$ pip install the package with all of its optional extras and then run the tests."])
    lines = ["", USER, "", "ERROR: something", "", AGENT]
    assert prose_lines(lines) == {1, 5}


def test_json_of_no_known_layout_is_read_as_text_with_a_warning(tmp_path):
    p = tmp_path / "data.json"
    p.write_text(json.dumps({"records": [{"id": i, "value": f"v{i}"} for i in range(5)]}), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "compactor", "compact", str(p), "--emit", "report",
                        "--store", str(tmp_path / "s")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "matches no known layout; read as plain text" in r.stderr and "--format" in r.stderr
    assert json.loads(r.stdout)["format"] == "text"
    r2 = subprocess.run([sys.executable, "-m", "compactor", "compact", str(p), "--format", "text", "--emit", "report",
                         "--store", str(tmp_path / "s")], capture_output=True, text=True)
    assert r2.returncode == 0 and "warning" not in r2.stderr
