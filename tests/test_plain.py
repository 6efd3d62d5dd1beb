"""The small records trim uses instead of dataclasses behave as the dataclasses did: construction
by position or keyword with fresh defaults, equality by fields, read-only frozen records, copies
with changes, pickling."""

from __future__ import annotations

import copy
import pickle

import pytest

from compactor import TrimOptions, TrimResult, TrimStats
from compactor.collapse.fold import FoldRun
from compactor.collapse.trim import Annotation
from compactor.engine.matchers import TextView


def test_defaults_keywords_and_positions():
    o = TrimOptions(context=1, github=True)
    assert (o.context, o.github, o.keep_head, o.passthrough_bytes) == (1, True, 2, 16 * 1024 * 1024)
    assert FoldRun(3, 9, 2).as_dict() == {"start": 3, "end": 9, "period": 2}
    with pytest.raises(TypeError):
        TrimOptions(contxt=1)  # a misspelt option is an error, not ignored
    with pytest.raises(TypeError):
        FoldRun(1, 2)  # a field without a default is required
    with pytest.raises(TypeError):
        FoldRun(1, 2, 3, 4)


def test_factories_give_every_instance_its_own_value():
    a, b = TrimStats(), TrimStats()
    a.annotations.append("x")
    assert b.annotations == [] and a.annotations == ["x"]


def test_equality_hash_and_read_only():
    assert TrimOptions(context=1) == TrimOptions(context=1) != TrimOptions(context=2)
    assert hash(TrimOptions(context=1)) == hash(TrimOptions(context=1))
    assert len({TrimOptions(), TrimOptions(), TrimOptions(github=True)}) == 2
    with pytest.raises(AttributeError):
        TrimOptions().context = 5  # type: ignore[misc]
    s = TrimStats()
    s.lines_in += 3
    assert s.lines_in == 3 and s != TrimStats() and s == TrimStats(lines_in=3)
    with pytest.raises(TypeError):
        hash(s)  # mutable: not hashable (as the dataclass was)
    with pytest.raises(AttributeError):
        s.no_such_figure = 1  # slots: a typo is an error
    assert TrimOptions(context=1) != FoldRun(1, 2, 1)


def test_replace_repr_copy_and_pickle():
    o = TrimOptions(context=1)
    assert o.replace(github=True) == TrimOptions(context=1, github=True) and o.github is False
    assert repr(FoldRun(1, 2, 1)) == "FoldRun(start=1, end=2, period=1)"
    assert "annotations" not in repr(TrimStats())
    a = Annotation("a.py", 3, "boom", 7, "error.x", 5)
    r = TrimResult("text", TrimStats(lines_in=2), (a,))
    for x in (o, a, r, TrimStats(lines_in=4)):
        assert pickle.loads(pickle.dumps(x)) == x
        assert copy.deepcopy(x) == x and copy.copy(x) == x
    assert a.command() == "::error file=a.py,line=3::boom"


def test_text_view_splits_and_keeps_prefixes():
    v = TextView("2024-01-01T00:00:00.0000000Z ok\nline two")
    assert v.lines == ["2024-01-01T00:00:00.0000000Z ok", "line two"] and v.starts == [0, 32]
    assert v.body(0) == "ok" and v.prefix is not None
    with pytest.raises(AttributeError):
        v.extra = 1
