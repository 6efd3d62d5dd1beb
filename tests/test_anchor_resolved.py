"""A fixed error is history, not the live failure: the anchor a user reads (``--emit markdown``)
marks it resolved when the same command later succeeds, or when the module it missed is installed;
an error nothing fixed stays live."""

from __future__ import annotations

import json

import compactor
from compactor.anchor import to_markdown

TEST = "python -m pytest tests/test_export.py -q"
FAILED = ("F\n=== FAILURES ===\n    def test_rows():\n>       assert export()['rows'] == 3\n"
          "E       KeyError: 'rows'\n\ntests/test_export.py:4: KeyError\n1 failed in 0.12s")
MISSING = ('Traceback (most recent call last):\n  File "report.py", line 1, in <module>\n    import pytz\n'
           "ModuleNotFoundError: No module named 'pytz'")


def _call(i: int, cmd: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": cmd})}}]}


def _out(i: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


def _anchor_lines(messages: list[dict], needle: str) -> list[str]:
    md = to_markdown(compactor.compact(messages, format="openai-chat").anchor)
    lines = [ln for ln in md.splitlines() if needle in ln]
    assert lines, md  # the error is in the anchor
    return lines


def _tests_then(last_output: str) -> list[dict]:
    return [{"role": "user", "content": "Make the export tests pass."},
            _call(1, TEST), _out(1, FAILED),
            _call(2, "sed -i 's/row/rows/' export.py"), _out(2, ""),
            _call(3, TEST), _out(3, last_output)]


def test_an_error_the_same_command_later_passes_is_resolved():
    lines = _anchor_lines(_tests_then(".\n1 passed in 0.10s"), "KeyError: 'rows'")
    assert all("resolved at s4" in ln for ln in lines), lines


def test_an_error_the_same_command_still_shows_stays_live():
    lines = _anchor_lines(_tests_then(FAILED), "KeyError: 'rows'")
    assert not any("resolved" in ln for ln in lines), lines


def _script_then(install: str) -> list[dict]:
    return [{"role": "user", "content": "Run the report script."},
            _call(1, "python report.py"), _out(1, MISSING),
            _call(2, install), _out(2, "Collecting pytz\n  Downloading pytz-2024.1-py2.py3-none-any.whl (505 kB)\n"
                                       "Installing collected packages: pytz\nSuccessfully installed pytz-2024.1")]


def test_a_missing_module_once_installed_is_resolved():
    lines = _anchor_lines(_script_then("pip install pytz"), "No module named 'pytz'")
    assert all("resolved at s3" in ln for ln in lines), lines


def test_installing_another_module_leaves_the_error_live():
    msgs = _script_then("pip install requests")
    msgs[-1] = _out(2, "Collecting requests\nInstalling collected packages: requests\n"
                       "Successfully installed requests-2.31.0")
    lines = _anchor_lines(msgs, "No module named 'pytz'")
    assert not any("resolved" in ln for ln in lines), lines
