"""The command line is built on the public API, and its compaction flags come from the
configuration model (a new setting gets its flag without editing the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import compactor
from compactor import CompactorConfig, cli
from compactor.record import Field

CLI = Path(cli.__file__)
# layers that are themselves built on the public API, beside the CLI (documented in the README)
PEERS = ("batch", "integrations", "tools")


def test_cli_imports_only_public_names():
    tree = ast.parse(CLI.read_text(encoding="utf-8"))
    seen = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and not module.startswith("compactor"):
                continue  # the standard library
            if node.level == 0:
                module = module[len("compactor"):].lstrip(".")
            seen += 1
            if module == "":
                for alias in node.names:
                    assert alias.name in compactor.__all__, f"line {node.lineno}: compactor.{alias.name} is not public"
            else:
                assert module.split(".")[0] in PEERS, f"line {node.lineno}: imports compactor.{module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith("compactor."), f"line {node.lineno}: imports {alias.name}"
    assert seen > 10


def _parser_options(command: str) -> dict[str, object]:
    parser = cli.build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command")
    p = sub.choices[command]
    return {opt: a for a in p._actions for opt in a.option_strings}


def _value_for(name: str, field) -> tuple[list[str], object]:
    """Command-line words giving the field a valid value that is not its default, and that value."""
    kind, choices = cli._flag_type(field.annotation)
    if kind == "bool":
        return [], not field.default
    if kind == "choice":
        value = next(c for c in choices if c != field.default)
        return [str(value)], value
    if kind == "list":
        return ["x"], ("x",)
    if kind == "int":
        lo = next((m.ge for m in field.metadata if hasattr(m, "ge")), 1)
        return [str(lo + 1)], lo + 1
    if kind == "float":
        return ["0.5"], 0.5
    return ["some-text"], "some-text"


@pytest.mark.parametrize("command", ["compact", "batch"])
def test_every_setting_has_a_flag_that_reaches_the_config(command):
    options = _parser_options(command)
    for name, field in CompactorConfig.model_fields.items():
        flag = cli.config_flag(name) if not (field.annotation is bool and field.default) \
            else "--no-" + name.replace("_", "-")
        assert flag in options, f"{command}: no flag for setting {name!r}"
        if name in cli.CONFIG_FLAGS_BY_HAND:
            continue
        words, value = _value_for(name, field)
        argv = [command, *(["in"] if command == "compact" else ["in", "--out", "o"]), flag, *words]
        args = cli.build_parser(argv).parse_args(argv)
        got = cli.config_options(args)
        assert got == {name: value}, (name, got)
        assert getattr(CompactorConfig(**got), name) == value
    # nothing given: nothing set, the model's defaults apply
    argv = [command, "in"] + ([] if command == "compact" else ["--out", "o"])
    assert cli.config_options(cli.build_parser(argv).parse_args(argv)) == {}


def test_a_new_setting_gets_its_flag_without_editing_the_cli(monkeypatch):
    class Extended(CompactorConfig):
        fold_widgets: int = Field(default=4, ge=1, description="widgets folded per line")
        fancy: bool = False

    monkeypatch.setattr(cli, "_config_fields", lambda: dict(Extended.model_fields))
    options = _parser_options("compact")
    assert "--fold-widgets" in options and "--fancy" in options
    assert "widgets folded per line (default 4)" in options["--fold-widgets"].help
    argv = ["compact", "in", "--fold-widgets", "9", "--fancy"]
    assert cli.config_options(cli.build_parser(argv).parse_args(argv)) == {"fold_widgets": 9, "fancy": True}


def test_every_setting_is_described():
    for name, field in CompactorConfig.model_fields.items():
        assert field.description and len(field.description) > 10, name


def test_a_bad_setting_value_is_one_line_exit_2(capsys):
    rc = cli.main(["compact", "in.json", "--context-lines", "99"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "argument --context-lines: " in err  # the flag the user typed
    rc = cli.main(["compact", "in.json", "--level", "7"])
    err = capsys.readouterr().err
    assert rc == 2 and "invalid choice" in err and err.count("\n") == 1


def test_only_the_named_command_is_built():
    parser = cli.build_parser(["trim", "x.log"])
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == ["trim"]
    full = cli.build_parser(["--help"])
    names = list(next(a for a in full._actions if a.dest == "command").choices)
    assert names[:3] == ["compact", "trim", "batch"] and "hook" in names and "check" in names
