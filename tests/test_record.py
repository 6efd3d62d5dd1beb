"""The typed records behind the data model (``compactor.record``): built without pydantic,
normalised as the models' types say, read-only, and validated through pydantic only when data
comes from outside."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from pydantic import BaseModel, ValidationError

from compactor import CompactorConfig, ConfigError
from compactor.config import make_config
from compactor.models import (Anchor, CompactionResult, CutItem, Diagnostic, Fact, Placeholder, Report, Role, Segment,
                              SegmentKind, Severity, Span, ToolCall, CallKind)
from compactor.record import Field, Record, RecordError


def _seg(**kw):
    base = dict(id="m1", index=0, step=1, step_id="s1", role="user", kind="message", text="hi")
    return Segment(**{**base, **kw})


def test_enum_tuple_and_list_fields_are_normalised_and_never_alias_the_callers_values():
    s = _seg(origin=["messages", 0, "content"])
    assert s.role is Role.user and s.kind is SegmentKind.message and s.origin == ("messages", 0, "content")
    assert Diagnostic(code="x", message="m", severity="warning").severity is Severity.warning
    facts = [Fact(id="f1", text="a")]
    a = Anchor(facts_learned=facts)
    facts.append(Fact(id="f2", text="b"))
    assert [f.id for f in a.facts_learned] == ["f1"]  # the record has its own list
    b, c = Anchor(), Anchor()
    assert b.facts_learned is not c.facts_learned  # a fresh default per record
    # nested records given as dicts of their fields become records (as the pydantic models did)
    r = Report(format="x", tokens_before=2, tokens_after=1, token_counter="c", level=1,
               cut=[{"priority": 2, "what": "w"}], self_check={"continuity": False})
    assert r.cut == [CutItem(priority=2, what="w")] and r.self_check.passed is False


def test_read_only_equal_by_value_hashable_and_picklable():
    s = _seg()
    with pytest.raises(AttributeError):
        s.text = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del s.text
    assert not hasattr(s, "__dict__")
    assert s == _seg() and hash(s) == hash(_seg()) and s != _seg(text="other")
    assert s != Span(rule_id="a.b", family="error", start=0, end=1, line_start=1, line_end=1, text="x")
    call = ToolCall("bash", CallKind.shell, (), "ls", {"command": "ls"}, '{"command": "ls"}')
    t = _seg(kind="tool_call", role="assistant", call=call)
    for again in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
        assert again == t and again.call == call
    with pytest.raises(TypeError):
        _seg(colour="red")  # unknown fields are refused
    with pytest.raises(TypeError):
        Segment(id="m1")  # so are missing required ones


def test_model_copy_updates_a_copy_only():
    s = _seg(text="a")
    t = s.model_copy(update={"text": "b", "exit_code": 3})
    assert (s.text, s.exit_code, t.text, t.exit_code) == ("a", None, "b", 3)
    with pytest.raises(AttributeError):
        s.model_copy(update={"colour": 1})
    a = Anchor(facts_learned=[Fact(id="f1", text="a")])
    deep = a.model_copy(deep=True)
    assert deep == a and deep.facts_learned is not a.facts_learned


def test_dumps_match_the_pydantic_models_they_stand_for():
    """model_dump / model_dump_json of a record equal those of the pydantic model it validates
    through (the twin), in both modes, for a result with every kind of field."""
    span = Span(rule_id="trace.python", family="trace", segment_id="m1", start=0, end=5, line_start=1, line_end=1,
                text="Trace", step_id="s1")
    ph = Placeholder(id="c-0123456789abcdef", rule_id="pip.install", summary="[pip]", sha256="0" * 64)
    anchor = Anchor(objective_state="fix", facts_learned=[Fact(id="f1", text="a", source_step="s1")],
                    intent={"initial": "fix it", "history": [{"id": "i1", "kind": "initial", "text": "fix it"}]})
    anchor = anchor.model_copy(update={"cursor": anchor.cursor.model_copy(update={"file_seq": {"a.py": (1, 2, 0)}})})
    report = Report(format="openai-chat", tokens_before=10, tokens_after=5, token_counter="c", level=1,
                    protected=[span], placeholders=[ph], diagnostics=[Diagnostic(code="x", message="m")],
                    redacted={"secret.aws": 1}, llm={"sent": 1})
    result = CompactionResult(format="openai-chat", messages=[{"role": "user", "content": "x"}], anchor=anchor,
                              report=report)
    twin = type(result).model_validate  # validates through pydantic, gives the record back
    assert twin(result.model_dump()) == result
    from compactor.record import _twin

    as_pydantic = _twin(CompactionResult).model_validate(result.model_dump())
    assert isinstance(as_pydantic, BaseModel)
    assert as_pydantic.model_dump(mode="json") == result.model_dump(mode="json")
    assert json.loads(as_pydantic.model_dump_json()) == json.loads(result.model_dump_json())
    assert as_pydantic.model_dump_json() == result.model_dump_json()
    assert result.model_dump(mode="json")["anchor"]["cursor"]["file_seq"] == {"a.py": [1, 2, 0]}
    assert result.model_dump()["anchor"]["cursor"]["file_seq"] == {"a.py": (1, 2, 0)}
    assert report.model_dump(mode="json", include={"level", "format"}) == {"level": 1, "format": "openai-chat"}
    assert "protected" not in report.model_dump(mode="json", exclude={"protected"})


def test_outside_data_is_validated_through_pydantic():
    good = Anchor(facts_learned=[Fact(id="f1", text="a")]).model_dump(mode="json")
    a = Anchor.model_validate(good)
    assert isinstance(a, Anchor) and isinstance(a.facts_learned[0], Fact) and not isinstance(a, BaseModel)
    assert Anchor.model_validate_json(json.dumps(good)) == a
    with pytest.raises(ValidationError):
        Anchor.model_validate({**good, "colour": "red"})  # extra fields are forbidden
    with pytest.raises(ValidationError):
        Span.model_validate({"rule_id": "a.b", "family": "x", "start": -1, "end": 0, "line_start": 1,
                             "line_end": 1, "text": ""})  # start >= 0
    with pytest.raises(ValidationError):
        Placeholder.model_validate({"id": "c-12", "rule_id": "r", "summary": "s", "sha256": "0" * 64})  # pattern
    schema = Span.model_json_schema()
    assert schema["properties"]["start"]["minimum"] == 0 and "rule_id" in schema["required"]
    assert "family" in Anchor.model_json_schema()["$defs"]["Evidence"]["properties"]


def test_a_record_inside_a_pydantic_model_is_validated_and_dumped():
    class Job(BaseModel):
        config: CompactorConfig

    job = Job.model_validate({"config": {"budget": 500}})
    assert isinstance(job.config, CompactorConfig) and job.config.budget == 500
    assert job.model_dump(mode="json")["config"]["budget"] == 500
    with pytest.raises(ValidationError):
        Job.model_validate({"config": {"budget": 0}})


def test_the_config_checks_what_a_user_gives():
    assert CompactorConfig(budget=100, rules=["a"]).rules == ("a",)
    for bad, field in (({"budget": 0}, "budget"), ({"level": 7}, "level"), ({"level": "1"}, "level"),
                       ({"lang": "fr"}, "lang"), ({"keep_recent": "3"}, "keep_recent"),
                       ({"keep_recent": True}, "keep_recent"), ({"low_water": 0}, "low_water"),
                       ({"context_lines": 21}, "context_lines"), ({"rules": [1]}, "rules")):
        with pytest.raises(RecordError) as exc:
            CompactorConfig(**bad)
        assert exc.value.field == field
        with pytest.raises(ConfigError, match=f"invalid option {field}: Input should be"):
            make_config(None, **bad)
    with pytest.raises(ConfigError, match="colour"):
        make_config(None, colour=1)
    assert "less than or equal to 20" in str(pytest.raises(RecordError, CompactorConfig, context_lines=21).value)
    assert "'auto', 0, 1, 2 or 3" in str(pytest.raises(RecordError, CompactorConfig, level=9).value)
    base = CompactorConfig(budget=100)
    assert make_config(base, lang="zh") == CompactorConfig(budget=100, lang="zh")


def test_subclasses_add_fields_and_keep_the_checks():
    class Extended(CompactorConfig):
        widgets: int = Field(default=4, ge=1, description="widgets")

    e = Extended(widgets=5, budget=10)
    assert (e.widgets, e.budget) == (5, 10) and "widgets" in Extended.model_fields
    assert Extended.model_fields["widgets"].metadata[0].ge == 1
    with pytest.raises(RecordError):
        Extended(widgets=0)

    class Mutable(Record, frozen=False):
        n: int = 0
        items: list[int] = Field(default_factory=list)

    m = Mutable()
    m.n = 3
    assert m.n == 3 and Mutable(items=(1, 2)).items == [1, 2]
    with pytest.raises(TypeError):
        hash(m)


def test_a_segment_with_its_tool_call_dumps_to_json_validates_back_and_has_a_schema():
    call = ToolCall("bash", CallKind.shell, ("src/app.py",), "pytest -x", {"command": "pytest -x"},
                    '{"command": "pytest -x"}')
    seg = _seg(role="assistant", kind="tool_call", text=call.raw, call=call)
    dumped = json.loads(seg.model_dump_json())
    assert dumped["call"] == {"name": "bash", "kind": "shell", "paths": ["src/app.py"], "command": "pytest -x",
                              "arguments": {"command": "pytest -x"}, "raw": '{"command": "pytest -x"}'}
    back = Segment.model_validate_json(seg.model_dump_json())
    assert back == seg and isinstance(back.call, ToolCall) and back.call.kind is CallKind.shell
    assert back.call.paths == ("src/app.py",) and back.call.arguments == {"command": "pytest -x"}
    assert Segment.model_validate(seg.model_dump()) == seg
    schema = Segment.model_json_schema()
    assert set(schema["$defs"]["ToolCall"]["required"]) == {"name", "kind", "paths", "command", "arguments", "raw"}
    with pytest.raises(ValidationError):
        Segment.model_validate({**seg.model_dump(mode="json"), "call": {**dumped["call"], "kind": "teleport"}})
    # read-only, hashable although its parsed arguments are a dict (they follow from the compared raw text)
    with pytest.raises(AttributeError):
        call.name = "sh"  # type: ignore[misc]
    assert hash(call) == hash(copy.deepcopy(call)) and pickle.loads(pickle.dumps(call)) == call
