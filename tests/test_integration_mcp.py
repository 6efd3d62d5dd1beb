"""``compactor mcp``: the MCP server, driven by the official SDK's client, in process and over stdio."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the 'mcp' extra is part of .[dev]")

from mcp import Client, StdioServerParameters  # noqa: E402

from compactor import get_counter  # noqa: E402
from compactor.integrations.mcp_server import build_server, default_max_tokens  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"
REF = re.compile(r"ref (c-[0-9a-f]{16})")
EXPAND = re.compile(r"(?:ref|expand|expand_placeholder) (c-[0-9a-f]{16})")
COUNT = get_counter().count
TOOLS = {"expand_placeholder", "trim_log_file", "compact_transcript_file", "scan_file_for_evidence",
         "show_transcript_anchor"}


def _run(coro_fn):
    return anyio.run(coro_fn)


def _text(result) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


@pytest.fixture
def long_log(tmp_path: Path) -> Path:
    lines = [f"[{i:05d}] downloading chunk {i} of 3000 ... ok" for i in range(2999)]
    lines += ["Traceback (most recent call last):",
              '  File "/srv/app/main.py", line 42, in <module>',
              "    run()",
              "ValueError: boom: checksum mismatch for chunk 2998"]
    p = tmp_path / "build.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_tools_resources_and_results_in_process(tmp_path: Path):
    store = str(tmp_path / "store.sqlite")
    original = json.loads(DEMO.read_text(encoding="utf-8"))

    async def main():
        async with Client(build_server(store=store)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == TOOLS
            for tool in (await client.list_tools()).tools:
                assert tool.output_schema is None  # unstructured text results
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["compactor://blob/{id}"]

            res = await client.call_tool("compact_transcript_file", {"path": str(DEMO), "keep_recent": 1})
            assert not res.is_error and res.structured_content is None
            text = _text(res)
            receipt, body = text.split("\n\n", 1)
            m = re.match(r"\[compactor: openai-chat layout, (\d+) -> (\d+) tokens", receipt)
            assert m and int(m.group(2)) < int(m.group(1))
            # the conversation as a model reads it, one block per message, not the layout's JSON
            heads = [line for line in body.splitlines() if line.startswith("## ")]
            want = []
            for x in original:
                if x["role"] == "tool":
                    want.append("## bash result")
                    continue
                if x.get("content"):
                    want.append(f"## {x['role']}")
                want += [f"## assistant calls {c['function']['name']}" for c in x.get("tool_calls") or []]
            assert heads == want
            with pytest.raises(json.JSONDecodeError):
                json.loads(body)
            assert "ConnectionPoolExhausted: pool_size=20, queue_depth=347" in body
            refs = REF.findall(body)
            assert refs, "the demo's npm install output is collapsed into a placeholder"
            # every placeholder expands to text that is in the original transcript, by tool and as a resource
            contents = [m["content"] for m in original if isinstance(m.get("content"), str)]
            for ref in refs:
                via_tool = _text(await client.call_tool("expand_placeholder", {"placeholder_id": ref}))
                via_res = await client.read_resource(f"compactor://blob/{ref}")
                assert via_res.contents[0].text == via_tool
                assert via_tool.strip() and any(via_tool in c for c in contents)
            npm = next(m["content"] for m in original if m["role"] == "tool")
            assert _text(await client.call_tool("expand_placeholder", {"placeholder_id": refs[0]})) == npm

            again = _text(await client.call_tool("compact_transcript_file", {"path": str(DEMO), "keep_recent": 1}))
            assert again == text  # deterministic

            budget = _text(await client.call_tool("compact_transcript_file", {"path": str(DEMO), "budget": 900}))
            tokens_after = int(re.match(r"\[compactor: \S+ layout, \d+ -> (\d+)", budget).group(1))
            assert tokens_after <= 900 and COUNT(budget) <= 900

            scan = _text(await client.call_tool("scan_file_for_evidence", {"path": str(DEMO)}))
            assert "[constraint.en]" in scan and "Don't use TypeScript" in scan
            assert "ConnectionPoolExhausted: pool_size=20" in scan
            assert "src/db/pool.js:142:11" in scan

            anchor = _text(await client.call_tool("show_transcript_anchor", {"path": str(DEMO)}))
            assert anchor.startswith("## Current working state")
            assert "pool_size from 20 to 50" in anchor  # the failed approach survives
            zh = _text(await client.call_tool("show_transcript_anchor", {"path": str(DEMO), "lang": "zh"}))
            assert zh.startswith("## 当前工作状态")

    _run(main)


def test_trim_log_file_keeps_the_final_error_and_folds_expandably(tmp_path: Path, long_log: Path):
    store = str(tmp_path / "store.sqlite")

    async def main():
        async with Client(build_server(store=store)) as client:
            res = await client.call_tool("trim_log_file", {"path": str(long_log)})
            text = _text(res)
            assert not res.is_error
            assert "ValueError: boom: checksum mismatch for chunk 2998" in text
            assert 'File "/srv/app/main.py", line 42' in text
            assert len(text) < len(long_log.read_text()) / 10
            assert text.rstrip().splitlines()[-1].startswith("[compactor trim: 3003 lines in")
            refs = REF.findall(text)
            assert refs
            folded = _text(await client.call_tool("expand_placeholder", {"placeholder_id": refs[0], "max_chars": 10**9, "max_tokens": 10**6}))
            assert "[01000] downloading chunk 1000 of 3000 ... ok" in folded
            assert folded in long_log.read_text()

    _run(main)


def _unfoldable(n_outputs: int, lines: int) -> list[dict]:
    """A transcript whose every output line is an error (kept verbatim at Level 1)."""
    msgs = [{"role": "user", "content": "Fix the build."}]
    for i in range(n_outputs):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"command": f"make module{i}"})}}]})
        out = "\n".join(f"src/mod{i}/file{j}.c:{j + 10}:5: error: use of undeclared identifier 'sym_{i}_{j}'"
                        for j in range(lines))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out + "\nmake: *** [Makefile:12: all] Error 2"})
    return msgs


def test_a_result_too_large_for_a_client_is_fitted_by_default(tmp_path: Path):
    """Level 1 keeps every line of these outputs (all errors): about 45,000 tokens. By default the
    result fits under Claude Code's limit, older turns folded into a summary that expands back."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_unfoldable(12, 150)), encoding="utf-8")
    store = str(tmp_path / "s.sqlite")

    async def main():
        async with Client(build_server(store=store)) as client:
            big = _text(await client.call_tool("compact_transcript_file", {"path": str(path)}))
            assert COUNT(big) <= 20_000
            assert big.startswith("[compactor: openai-chat layout,") and "fitted to 20000 tokens" in big.splitlines()[0]
            assert "Fix the build." in big and "make: *** [Makefile:12: all] Error 2" in big
            refs = EXPAND.findall(big)
            assert refs
            folded = _text(await client.call_tool("expand_placeholder", {"placeholder_id": refs[0], "max_tokens": 100_000}))
            assert "sym_0_0" in folded  # the oldest output, folded away, comes back
            res = await client.call_tool("compact_transcript_file", {"path": str(path), "max_tokens": 8000})
            small = _text(res)
            assert not res.is_error and COUNT(small) <= 8000 and "Fix the build." in small

    _run(main)


def test_long_expansions_come_in_pages_that_reassemble_exactly(tmp_path: Path, long_log: Path):
    async def main():
        async with Client(build_server(store=str(tmp_path / "s.sqlite"))) as client:
            text = _text(await client.call_tool("trim_log_file", {"path": str(long_log)}))
            ref = REF.findall(text)[0]
            whole = _text(await client.call_tool("expand_placeholder", {"placeholder_id": ref, "max_chars": 10**9, "max_tokens": 10**6}))
            assert len(whole) > 50_000
            pages, offset = [], 0
            nxt = re.compile(r"\n\[compactor: characters \d+-(\d+) of (\d+); call expand_placeholder again with offset=(\d+) for the rest\]$")
            while True:
                page = _text(await client.call_tool("expand_placeholder",
                                                    {"placeholder_id": f"ref {ref}", "offset": offset, "max_chars": 20_000}))
                m = nxt.search(page)
                if m is None:
                    pages.append(page)
                    break
                assert int(m.group(2)) == len(whole) and int(m.group(3)) == offset + 20_000
                pages.append(page[: m.start()])
                offset = int(m.group(3))
            assert "".join(pages) == whole and len(pages) == -(-len(whole) // 20_000)
            past = await client.call_tool("expand_placeholder", {"placeholder_id": ref, "offset": len(whole) + 1})
            assert past.is_error and "past the end" in _text(past)

    _run(main)


def test_relative_paths_resolve_against_the_root(tmp_path: Path, long_log: Path):
    async def main():
        async with Client(build_server(root=long_log.parent)) as client:
            text = _text(await client.call_tool("scan_file_for_evidence", {"path": long_log.name}))
            assert "pass --format text" in text  # a log whose first line starts with '[' looks like JSON
            text = _text(await client.call_tool("scan_file_for_evidence", {"path": long_log.name, "format": "text"}))
            assert "ValueError: boom" in text and text.startswith("[compactor: ")

    _run(main)


@pytest.mark.parametrize("tool,args,message", [
    ("expand_placeholder", {"placeholder_id": "../../etc/passwd"}, "invalid placeholder id"),
    ("expand_placeholder", {"placeholder_id": "c-0000000000000000"}, "unknown placeholder id c-0000000000000000"),
    ("trim_log_file", {"path": "/no/such/build.log"}, "/no/such/build.log: no such file"),
    ("compact_transcript_file", {"path": "/no/such/run.json"}, "/no/such/run.json: no such file"),
    ("compact_transcript_file", {"path": "DIR"}, "is a directory"),
    ("compact_transcript_file", {"path": "BAD", "format": "nope"}, "unknown layout 'nope'"),
    ("compact_transcript_file", {"path": "BAD", "format": "openai-chat"}, "bad.json"),
    ("trim_log_file", {"path": "BAD", "context": 99}, "context"),
    ("trim_log_file", {"path": "BIN"}, "bin.log:byte 0: binary data (NUL byte at offset 0)"),
    ("compact_transcript_file", {"path": "DEMO", "budget": 1}, "budget"),
])
def test_errors_are_one_line_tool_errors(tmp_path: Path, tool, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "content": "hi"}, {"role": ', encoding="utf-8")
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"\x00" * 64 + b"ok\n")
    subst = {"DIR": str(tmp_path), "BAD": str(bad), "DEMO": str(DEMO), "BIN": str(binary)}
    args = {k: subst.get(v, v) if isinstance(v, str) else v for k, v in args.items()}

    async def main():
        async with Client(build_server(store=str(tmp_path / "s.sqlite"))) as client:
            res = await client.call_tool(tool, args)
            assert res.is_error
            text = _text(res)
            assert message in text
            assert "\n" not in text and "Traceback" not in text

    _run(main)


def test_unknown_blob_resource_is_an_error(tmp_path: Path):
    from mcp.shared.exceptions import MCPError

    async def main():
        async with Client(build_server(store=str(tmp_path / "s.sqlite"))) as client:
            with pytest.raises(MCPError, match="unknown placeholder id c-00000000000000ff"):
                await client.read_resource("compactor://blob/c-00000000000000ff")

    _run(main)


def test_over_stdio_with_the_cli_entry_point(tmp_path: Path, long_log: Path):
    """``compactor mcp`` as a spawned process speaking MCP on stdin/stdout, as a client launches it."""
    store = str(tmp_path / "store.sqlite")
    # a client passes the server only a few variables (HOME, PATH, ...): the test session's cache
    # folders go along, or the server would write its caches under the real home
    caches = {k: os.environ[k] for k in ("COMPACTOR_CACHE", "XDG_CACHE_HOME") if k in os.environ}
    params = StdioServerParameters(command=sys.executable, args=["-m", "compactor", "mcp", "--store", store],
                                   cwd=str(long_log.parent), env=caches)

    async def main():
        with anyio.fail_after(60):
            async with Client(params) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                text = _text(await client.call_tool("trim_log_file", {"path": "build.log"}))
                assert "ValueError: boom: checksum mismatch for chunk 2998" in text
                ref = REF.findall(text)[0]
                blob = await client.read_resource(f"compactor://blob/{ref}")
                assert blob.contents[0].text in long_log.read_text()
                comp = _text(await client.call_tool("compact_transcript_file", {"path": str(DEMO), "keep_recent": 1}))
                ref = REF.findall(comp)[0]
                assert "234 packages" in _text(await client.call_tool("expand_placeholder", {"placeholder_id": ref}))

    _run(main)
    # the store is the one the CLI reads: a placeholder written by the server expands from the command line
    import subprocess

    out = subprocess.run([sys.executable, "-m", "compactor", "expand", "--store", store,
                          REF.findall(_plain_compact(store))[0]], capture_output=True, text=True)
    assert out.returncode == 0 and "234 packages" in out.stdout


def _plain_compact(store: str) -> str:
    import compactor

    res = compactor.Compactor(store=store, keep_recent=1).compact(str(DEMO))
    return json.dumps(res.messages)


def test_cli_without_the_sdk_is_a_one_line_error(monkeypatch, capsys):
    from compactor.cli import main

    monkeypatch.delitem(sys.modules, "compactor.integrations.mcp_server", raising=False)
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # as if the extra were not installed
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'context-compactor[mcp]'" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- results that fit the client

EXTRA = ROOT.parent / "shared" / "trajectories-extra"
LARGE_RUN = EXTRA / "openai-chat" / "prompt2repo.city-bus.trajectory.json"  # about 150,000 tokens


def test_the_default_bound_follows_the_client_limit():
    assert default_max_tokens({}) == 20_000 < 25_000
    assert default_max_tokens({"MAX_MCP_OUTPUT_TOKENS": "10000"}) == 8_000
    assert default_max_tokens({"MAX_MCP_OUTPUT_TOKENS": "100000"}) == 80_000
    assert default_max_tokens({"MAX_MCP_OUTPUT_TOKENS": "lots"}) == 20_000
    assert default_max_tokens({"MAX_MCP_OUTPUT_TOKENS": "50"}) == 200  # never below a useful result


@pytest.mark.slow
@pytest.mark.parametrize("limit", [None, 4000])
def test_every_tool_fits_on_a_large_real_run_and_its_references_expand(tmp_path: Path, limit):
    if not LARGE_RUN.is_file():
        pytest.skip(f"trajectories not available: {LARGE_RUN}")
    original = LARGE_RUN.read_text(encoding="utf-8")
    assert COUNT(original) > 100_000
    cap = limit or 20_000
    extra = {} if limit is None else {"max_tokens": limit}

    async def main():
        async with Client(build_server(store=str(tmp_path / "s.sqlite"))) as client:
            compacted = _text(await client.call_tool("compact_transcript_file", {"path": str(LARGE_RUN), **extra}))
            assert COUNT(compacted) <= cap
            assert compacted.startswith("[compactor: openai-chat layout, ") and "\n## user\n" in compacted
            refs = EXPAND.findall(compacted)
            assert refs
            for ref in refs:
                page = _text(await client.call_tool("expand_placeholder", {"placeholder_id": ref, **extra}))
                assert page.strip() and COUNT(page) <= cap
            # the summary's reference gives back the folded turns: their text is in the run
            summary_ref = re.search(r"earlier segments .*?ref (c-[0-9a-f]{16})", compacted).group(1)
            whole = _text(await client.call_tool("expand_placeholder", {"placeholder_id": summary_ref, "max_chars": 10**9, "max_tokens": 10**6}))
            line = next(x for x in whole.splitlines() if len(x) > 40)
            assert json.dumps(line)[1:-1][:40] in original or line[:40] in original

            for tool, args in (("trim_log_file", {}), ("scan_file_for_evidence", {}), ("show_transcript_anchor", {})):
                res = await client.call_tool(tool, {"path": str(LARGE_RUN), **args, **extra})
                assert not res.is_error, _text(res)
                assert COUNT(_text(res)) <= cap, tool

    _run(main)


def test_a_trimmed_log_over_the_bound_is_fitted_and_expands_back(tmp_path: Path):
    """Every line an error with its own location: trim keeps them all (about 60,000 tokens)."""
    lines = [f"src/pkg{i % 97}/mod{i}.go:{i % 400 + 1}:7: undefined: handler{i} (compile error {i})" for i in range(4000)]
    log = tmp_path / "build.log"
    log.write_text("\n".join(lines) + "\nFAIL\texample.com/pkg [build failed]\n", encoding="utf-8")

    async def main():
        async with Client(build_server(store=str(tmp_path / "s.sqlite"))) as client:
            for extra, cap in (({}, 20_000), ({"max_tokens": 3000}, 3000)):
                text = _text(await client.call_tool("trim_log_file", {"path": str(log), **extra}))
                assert COUNT(text) <= cap
                assert "FAIL\texample.com/pkg [build failed]" in text  # the newest evidence stays
                whole_ref = re.search(r"The whole trimmed log: expand_placeholder (c-[0-9a-f]{16})", text).group(1)
                whole = _text(await client.call_tool("expand_placeholder", {"placeholder_id": whole_ref, "max_chars": 10**9, "max_tokens": 10**6}))
                assert lines[0] in whole and lines[-1] in whole and COUNT(whole) > 40_000

    _run(main)


def test_a_long_evidence_list_comes_in_parts_that_add_up(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_unfoldable(300, 1)), encoding="utf-8")

    async def main():
        async with Client(build_server()) as client:
            whole = _text(await client.call_tool("scan_file_for_evidence", {"path": str(path), "max_tokens": 10**6}))
            total = int(re.match(r"\[compactor: (\d+) protected span", whole).group(1))
            spans = re.findall(r"^\S+ \S+ \[[^\]]+\] lines? ", whole, re.M)
            assert len(spans) == total > 300
            seen, offset, parts = 0, 0, 0
            while True:
                part = _text(await client.call_tool("scan_file_for_evidence",
                                                    {"path": str(path), "offset": offset, "max_tokens": 2000}))
                assert COUNT(part) <= 2000
                seen += len(re.findall(r"^\S+ \S+ \[[^\]]+\] lines? ", part, re.M))
                parts += 1
                m = re.search(r"call scan_file_for_evidence again with offset=(\d+)", part)
                if m is None:
                    break
                offset = int(m.group(1))
            assert seen == total and parts > 3

    _run(main)


def test_the_server_bound_is_a_command_line_option(capsys):
    from compactor.cli import main

    assert main(["mcp", "--max-tokens", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-tokens" in err and "200" in err


def test_the_server_bound_applies_to_every_tool(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_unfoldable(6, 150)), encoding="utf-8")

    async def main():
        async with Client(build_server(max_tokens=3000)) as client:
            for tool in ("compact_transcript_file", "scan_file_for_evidence", "show_transcript_anchor", "trim_log_file"):
                res = await client.call_tool(tool, {"path": str(path)})
                assert not res.is_error and COUNT(_text(res)) <= 3000, tool
            described = {t.name: t.description for t in (await client.list_tools()).tools}
            assert all("max_tokens" in d and "default 3000" in d for d in described.values())

    _run(main)
