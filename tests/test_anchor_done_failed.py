"""A change whose call failed changed nothing: it is not listed under Done (the failed approaches
hold it), in English and in Chinese alike."""

from __future__ import annotations

import json

from compactor import compact
from compactor.anchor import to_markdown


def _call(cid: str, cmd: str) -> dict:
    return {"role": "assistant", "content": "Next.", "tool_calls": [{"id": cid, "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": cmd})}}]}


RUN = [{"role": "user", "content": "Install libfoo and build the extension."},
       _call("c1", "apt-get install -y libfoo-dev"),
       {"role": "tool", "tool_call_id": "c1", "content": "E: Unable to locate package libfoo-dev\n[exit code 100]"},
       _call("c2", "sed -i 's/-O0/-O2/' /repo/Makefile"),
       {"role": "tool", "tool_call_id": "c2", "content": ""}]


def _done(md: str, head: str) -> str:
    part = md.split(head, 1)[1]
    return part.split("\n**", 1)[0]


def test_a_failed_install_is_not_done():
    a = compact(RUN, format="openai-chat").anchor
    assert any(c.status == "failed" for c in a.changes_made)  # the model still knows it failed
    for lang, head in (("en", "**Done**"), ("zh", "**已完成**")):
        md = to_markdown(a, lang=lang)
        done = _done(md, head)
        assert "libfoo" not in done, (lang, done)
        assert "Makefile" in done, (lang, done)
