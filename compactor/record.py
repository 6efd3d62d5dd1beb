"""Typed records: the data model's base class, without pydantic at start-up.

Ground floor: no imports from the rest of the package. A one-message ``compactor compact`` cost
about 12x an empty Python start, half of it importing pydantic and building the validators of the
models it touched. The pipeline builds its records from values it produced itself, which need no
validation; validation belongs where data comes in from outside. So a :class:`Record`:

- declares its fields as annotations with defaults, or :func:`Field` (``default``,
  ``default_factory``, ``description`` and constraints such as ``ge``, ``le``, ``pattern``);
- is built from keywords without validation, only normalised: a field typed as an enum takes its
  value (``role="user"`` becomes ``Role.user``), a tuple field takes any iterable, a list or dict
  field gets its own copy (a record never aliases the caller's list);
- is read-only (unless the class says ``frozen=False``), hashable, equal by class and values,
  slotted, picklable;
- has the pydantic surface the rest of the package and its users call: ``model_copy(update=)``,
  ``model_dump(mode=, include=, exclude=, exclude_none=)``, ``model_dump_json()``,
  ``model_fields``, and validation of outside data with ``model_validate``,
  ``model_validate_json`` and ``model_json_schema``: these build an equivalent pydantic model on
  first use (pydantic is imported then, not before) and raise its ``ValidationError``.

A class given ``validate=True`` checks its values when built (the configuration: what a user
types): types, literal choices and numeric bounds, with pydantic's wording, raising
:class:`RecordError` (a ``ValueError``) that names the field.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any, Callable

__all__ = ["Field", "FieldInfo", "Record", "RecordError"]

_MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__bool__": lambda self: False})()
_CONSTRAINTS = ("ge", "gt", "le", "lt", "pattern", "min_length", "max_length")


class RecordError(ValueError):
    """A value a validating record refused: ``field`` names it, ``msg`` says why."""

    def __init__(self, field: str, msg: str):
        super().__init__(f"{field}: {msg}")
        self.field = field
        self.msg = msg

    def errors(self) -> list[dict[str, Any]]:
        """The same shape as pydantic's ``ValidationError.errors()`` (location and message)."""
        return [{"loc": (self.field,), "msg": self.msg}]


class _Bound:
    """One constraint of a field (``.ge``, ``.le``, ...), as in pydantic's field metadata."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: Any):
        self.name = name
        self.value = value

    def __getattr__(self, name: str) -> Any:
        if name == object.__getattribute__(self, "name"):
            return object.__getattribute__(self, "value")
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"{self.name}={self.value!r}"


class FieldInfo:
    """A field of a record: its name, annotation (resolved on first use of ``model_fields``),
    default or default factory, description and constraints."""

    __slots__ = ("name", "source", "annotation", "default", "default_factory", "description", "constraints",
                 "repr", "compare")

    def __init__(self, default: Any = _MISSING, *, default_factory: Callable[[], Any] | None = None,
                 description: str | None = None, repr: bool = True, compare: bool = True,  # noqa: A002
                 **constraints: Any):
        unknown = set(constraints) - set(_CONSTRAINTS)
        if unknown:
            raise TypeError(f"Field() got unknown arguments {', '.join(sorted(unknown))}")
        self.name = ""
        self.source = "Any"
        self.annotation: Any = None
        self.default = default
        self.default_factory = default_factory
        self.description = description
        self.constraints = constraints
        self.repr = repr
        self.compare = compare

    @property
    def metadata(self) -> list[_Bound]:
        return [_Bound(k, v) for k, v in self.constraints.items()]

    def is_required(self) -> bool:
        return self.default is _MISSING and self.default_factory is None

    def get_default(self, *, call_default_factory: bool = False) -> Any:
        if self.default_factory is not None:
            return self.default_factory() if call_default_factory else None
        return self.default

    def __repr__(self) -> str:
        return f"FieldInfo(name={self.name!r}, annotation={self.source}, default={self.default!r})"


def Field(default: Any = _MISSING, *, default_factory: Callable[[], Any] | None = None,  # noqa: N802
          description: str | None = None, repr: bool = True, compare: bool = True,  # noqa: A002
          **constraints: Any) -> Any:
    """A field with a default (or a factory), a description and constraints; ``repr=False`` /
    ``compare=False`` leave it out of the record's repr / equality and hash."""
    return FieldInfo(default, default_factory=default_factory, description=description, repr=repr, compare=compare,
                     **constraints)


class _Meta(type):
    def __new__(mcs, name: str, bases: tuple, ns: dict, *, frozen: bool | None = None,
                validate: bool | None = None, plain: bool | None = None, **kw: Any):
        fields: dict[str, FieldInfo] = {}
        for base in reversed(bases):
            fields.update(getattr(base, "__record_fields__", {}))
        own = []
        for fname, source in ns.get("__annotations__", {}).items():
            if isinstance(source, str) and source.startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = ns.pop(fname, _MISSING)
            info = value if isinstance(value, FieldInfo) else FieldInfo(value)
            info.name = fname
            info.source = source if isinstance(source, str) else getattr(source, "__name__", repr(source))
            info.annotation = None if isinstance(source, str) else source
            if fname not in fields:
                own.append(fname)
            fields[fname] = info
        inherit = (lambda attr, default: next((getattr(b, attr) for b in bases if hasattr(b, attr)), default))
        frozen = inherit("__record_frozen__", True) if frozen is None else frozen
        has_dict = inherit("__record_dict__", False)
        if not frozen:  # mutable: plain attribute writes, and room for attributes set later
            ns.setdefault("__setattr__", object.__setattr__)
            ns.setdefault("__delattr__", object.__delattr__)
            if not has_dict:
                own.append("__dict__")
                has_dict = True
        ns["__slots__"] = tuple(own) + tuple(ns.get("__slots__", ()))  # and any the class declares itself
        ns.setdefault("__init__", _first_init)
        ns.pop("model_config", None)
        cls = super().__new__(mcs, name, bases, ns, **kw)
        cls.__record_fields__ = fields
        cls.__record_frozen__ = frozen
        cls.__record_dict__ = has_dict
        cls.__record_validate__ = inherit("__record_validate__", False) if validate is None else validate
        cls.__record_plain__ = inherit("__record_plain__", False) if plain is None else plain
        cls.__record_compare__ = tuple(n for n, f in fields.items() if f.compare)
        cls.__record_plan__ = None
        return cls

    def __init__(cls, name: str, bases: tuple, ns: dict, **kw: Any):
        super().__init__(name, bases, ns)

    @property
    def model_fields(cls) -> dict[str, FieldInfo]:
        _plan(cls)
        return dict(cls.__record_fields__)


# ------------------------------------------------------------------------------ building


def _first_init(self, *args: Any, **values: Any) -> None:
    """Generates the class's ``__init__`` from its resolved annotations on first use (the module
    that declares it is complete by then, so annotations naming later classes resolve)."""
    cls = type(self)
    _plan(cls)
    cls.__init__(self, *args, **values)


def _resolve(cls) -> dict[str, Any]:
    import typing

    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for fname, source in klass.__dict__.get("__annotations__", {}).items():
            if fname in cls.__record_fields__:
                glb = vars(sys.modules[klass.__module__])
                hints[fname] = eval(source, glb, {"typing": typing}) if isinstance(source, str) else source  # noqa: S307 - the class's own annotation
    return hints


def _shape(tp: Any) -> tuple[str, Any]:
    """How a value of this annotation is normalised when stored: ('enum', E) | ('record', R) |
    ('tuple', None) | ('list', None) | ('records', R) | ('dict', None) | ('', None); optional
    types normalise their non-None values."""
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _shape(args[0]) if len(args) == 1 else ("", None)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "enum", tp
    if isinstance(tp, type) and issubclass(tp, Record):
        return "record", tp
    if tp is tuple or origin is tuple:
        return "tuple", None
    if origin is list:
        (item,) = typing.get_args(tp) or (None,)
        if isinstance(item, type) and issubclass(item, Record):
            return "records", item
    if tp is list or origin is list:
        return "list", None
    if tp is dict or origin is dict:
        return "dict", None
    return "", None


def _plan(cls) -> None:
    if cls.__dict__.get("__record_plan__") is not None:
        return
    hints = _resolve(cls)
    fields = cls.__record_fields__
    for fname, info in fields.items():
        info.annotation = hints[fname]
    env: dict[str, Any] = {"_MISSING": _MISSING, "_check": _check, "_cls": cls}
    params, body = [], []
    for i, (fname, info) in enumerate(fields.items()):
        setter = f"_s{i}"
        env[setter] = getattr(cls, fname).__set__
        kind, enum = ("", None) if cls.__record_plain__ else _shape(info.annotation)
        if info.default_factory is not None or (isinstance(info.default, (list, dict, set))
                                                and not cls.__record_plain__):
            env[f"_f{i}"] = info.default_factory or (lambda d=info.default: type(d)(d))
            params.append(f"{fname}=_MISSING")
            body.append(f"    if {fname} is _MISSING: {fname} = _f{i}()")
            fresh = True
        elif info.default is _MISSING:
            params.append(fname)
            fresh = False
        else:
            env[f"_d{i}"] = info.default
            params.append(f"{fname}=_d{i}")
            fresh = False
        if kind == "enum":
            env[f"_e{i}"] = enum
            body.append(f"    if {fname}.__class__ is not _e{i} and {fname} is not None: {fname} = _e{i}({fname})")
        elif kind == "record":  # a dict of its fields becomes the record
            env[f"_e{i}"] = enum
            body.append(f"    if {fname}.__class__ is dict: {fname} = _e{i}(**{fname})")
        elif kind == "tuple":
            body.append(f"    if {fname}.__class__ is not tuple and {fname} is not None: {fname} = tuple({fname})")
        elif kind in ("list", "records", "dict"):
            guard = f"{fname} is not None" + (f" and {fname} is not _MISSING" if fresh else "")
            copy = f"{fname} = {'dict' if kind == 'dict' else 'list'}({fname})"
            if kind == "records":  # items given as dicts of their fields become records
                env[f"_e{i}"] = enum
                copy += (f"\n        if dict in map(type, {fname}): "
                         f"{fname} = [_e{i}(**x) if x.__class__ is dict else x for x in {fname}]")
            line = f"    if {guard}:\n        {copy}"
            if fresh:  # a fresh default is the record's own; a given one is copied
                body.insert(len(body) - 1, line)
            else:
                body.append(line)
        body.append(f"    {setter}(self, {fname})")
    if cls.__record_validate__:
        body.append("    _check(_cls, self)")
    names = ", ".join(params)
    # plain records (the dataclass kind) also take their fields by position, in order
    star = "" if cls.__record_plain__ and _ordered(params) else "*, "
    src = f"def __init__(self, {star}{names}):\n" + ("\n".join(body) or "    pass") + "\n" if params else \
        "def __init__(self):\n    pass\n"
    exec(src, env)  # noqa: S102 - generated from the class's own field names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    cls.__record_plan__ = True


def _ordered(params: list[str]) -> bool:
    """No parameter without a default after one with a default."""
    seen_default = False
    for p in params:
        if "=" in p:
            seen_default = True
        elif seen_default:
            return False
    return True


# ------------------------------------------------------------------------------ validation

def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def _check_value(tp: Any, v: Any) -> str | None:
    """Why ``v`` is not a value of ``tp`` (pydantic's wording), or None."""
    import types
    import typing

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        whys = [_check_value(a, v) for a in args if a is not type(None)]
        return None if any(w is None for w in whys) else whys[0]
    if origin is typing.Literal:
        if any(v == a and type(v) is type(a) for a in args):
            return None
        choices = [_fmt(a) for a in args]
        return "Input should be " + (" or ".join([", ".join(choices[:-1]), choices[-1]]) if len(choices) > 1 else choices[0])
    if tp is type(None):
        return None if v is None else "Input should be None"
    if tp is bool:
        return None if isinstance(v, bool) else "Input should be a valid boolean"
    if tp is int:
        return None if isinstance(v, int) and not isinstance(v, bool) else "Input should be a valid integer"
    if tp is float:
        return None if isinstance(v, (int, float)) and not isinstance(v, bool) else "Input should be a valid number"
    if tp is str:
        return None if isinstance(v, str) else "Input should be a valid string"
    if origin in (tuple, list):
        if not isinstance(v, (tuple, list)):
            return f"Input should be a valid {origin.__name__}"
        inner = args[0] if args else Any
        for item in v:
            why = _check_value(inner, item)
            if why:
                return why
        return None
    if isinstance(tp, type) and not isinstance(v, tp):
        return f"Input should be an instance of {tp.__name__}"
    return None


def _check(cls, obj: Any) -> None:
    for fname, info in cls.__record_fields__.items():
        v = getattr(obj, fname)
        why = _check_value(info.annotation, v)
        if why is None and v is not None:
            c = info.constraints
            if "ge" in c and v < c["ge"]:
                why = f"Input should be greater than or equal to {c['ge']}"
            elif "gt" in c and v <= c["gt"]:
                why = f"Input should be greater than {c['gt']}"
            elif "le" in c and v > c["le"]:
                why = f"Input should be less than or equal to {c['le']}"
            elif "lt" in c and v >= c["lt"]:
                why = f"Input should be less than {c['lt']}"
        if why:
            raise RecordError(fname, why)


# ------------------------------------------------------------------------------ dumping


def _dump(v: Any, json: bool, exclude_none: bool) -> Any:
    if isinstance(v, Record):
        return v._dump(json, exclude_none, None, None)
    cls = v.__class__
    if cls is list:
        return [_dump(x, json, exclude_none) for x in v]
    if cls is tuple:
        out = [_dump(x, json, exclude_none) for x in v]
        return out if json else tuple(out)
    if cls is dict:
        return {k: _dump(x, json, exclude_none) for k, x in v.items()}
    if json and isinstance(v, Enum):
        return v.value
    return v


class Record(metaclass=_Meta):
    """Base of the typed records (see the module's description)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__record_frozen__:
            raise AttributeError(f"{type(self).__name__} is frozen: use model_copy(update=...)")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} fields cannot be deleted")

    def _values(self) -> tuple[Any, ...]:
        return _layout(type(self))[0](self)

    def _compared(self) -> tuple[Any, ...]:
        return _layout(type(self))[3](self)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        if not self.__record_frozen__:
            raise TypeError(f"unhashable type: {type(self).__name__!r}")
        return hash((self.__class__, self._compared()))

    def __repr__(self) -> str:
        shown = (f"{n}={getattr(self, n)!r}" for n, f in self.__record_fields__.items() if f.repr)
        return f"{type(self).__name__}({', '.join(shown)})"

    def __reduce__(self):
        return (_rebuild, (type(self), self._values()))

    def __copy__(self):
        return self.model_copy()

    def __deepcopy__(self, memo: dict):
        import copy

        return _rebuild(type(self), copy.deepcopy(self._values(), memo))

    # the pydantic surface -----------------------------------------------------------------

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False):
        """A copy, with ``update`` applied as given (not normalised or validated, as pydantic's)."""
        if deep:
            import copy

            new = copy.deepcopy(self)
        else:
            new = _rebuild(type(self), self._values())
        if update:
            by_name = _layout(type(self))[2]
            for k, v in update.items():
                put = by_name.get(k)
                if put is None:
                    raise AttributeError(f"{type(self).__name__} has no field {k!r}")
                put(new, v)
        return new

    def _dump(self, json: bool, exclude_none: bool, include, exclude) -> dict[str, Any]:
        out = {}
        for n in self.__record_fields__:
            if (include is not None and n not in include) or (exclude is not None and n in exclude):
                continue
            v = getattr(self, n)
            if exclude_none and v is None:
                continue
            out[n] = _dump(v, json, exclude_none)
        return out

    def model_dump(self, *, mode: str = "python", include: Any = None, exclude: Any = None,
                   exclude_none: bool = False, by_alias: bool = False) -> dict[str, Any]:
        """The record as plain data: nested records as dicts; ``mode="json"``: enums as their
        values and tuples as lists. ``include`` / ``exclude``: sets of field names."""
        return self._dump(mode == "json", exclude_none, include, exclude)

    def model_dump_json(self, *, indent: int | None = None, exclude_none: bool = False) -> str:
        import json

        data = self._dump(True, exclude_none, None, None)
        if indent is None:
            return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(data, ensure_ascii=False, indent=indent)

    @property
    def model_fields_set(self) -> set[str]:
        """The fields whose value is not the default (records keep no set of given names)."""
        out = set()
        for n, info in self.__record_fields__.items():
            default = info.get_default(call_default_factory=True)
            if getattr(self, n) != default:
                out.add(n)
        return out

    @classmethod
    def model_validate(cls, obj: Any):
        """Validate outside data (a dict, or a record) into this record, through the equivalent
        pydantic model (built on first use); raises pydantic's ``ValidationError``."""
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, Record):
            obj = obj.model_dump()
        return _from_twin(_twin(cls).model_validate(obj))

    @classmethod
    def model_validate_json(cls, data: str | bytes):
        return _from_twin(_twin(cls).model_validate_json(data))

    @classmethod
    def model_json_schema(cls, **kw: Any) -> dict[str, Any]:
        return _twin(cls).model_json_schema(**kw)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A record as a field of a pydantic model: validated as :meth:`model_validate` does,
        dumped as :meth:`model_dump` does."""
        from pydantic_core import core_schema as cs

        return cs.no_info_plain_validator_function(
            cls.model_validate,
            json_schema_input_schema=handler.generate_schema(_twin(cls)),
            serialization=cs.plain_serializer_function_ser_schema(
                lambda v, info: v.model_dump(mode=info.mode), info_arg=True))


def _slot(cls, name: str):
    """The slot (member descriptor) that stores field ``name`` (a subclass may shadow the name
    with a property; the value is still kept in the slot)."""
    for klass in cls.__mro__:
        d = klass.__dict__.get(name)
        if d is not None and type(d).__name__ == "member_descriptor":
            return d
    raise AttributeError(name)


def _layout(cls) -> tuple:
    """(values getter, slot setters in field order, setter by name, compared-values getter) of a
    record class, made once: copies, equality and pickling run at C speed per field."""
    got = cls.__dict__.get("__record_layout__")
    if got is None:
        from operator import attrgetter

        names = tuple(cls.__record_fields__)
        compared = cls.__record_compare__

        def getter(fields):
            if not fields:
                return lambda obj: ()
            if len(fields) == 1:
                one = attrgetter(fields[0])
                return lambda obj: (one(obj),)
            return attrgetter(*fields)

        setters = tuple(_slot(cls, n).__set__ for n in names)
        got = (getter(names), setters, dict(zip(names, setters)), getter(compared))
        type.__setattr__(cls, "__record_layout__", got)
    return got


def _rebuild(cls, values: tuple):
    obj = cls.__new__(cls)
    for put, v in zip(_layout(cls)[1], values):
        put(obj, v)
    return obj


# ------------------------------------------------------------------------------ the pydantic twin

_TWINS: dict[type, Any] = {}


class _TwinNames(dict):
    """Names for evaluating an annotation where every record class stands for its twin."""

    def __init__(self, module_globals: dict):
        super().__init__()
        self.glb = module_globals

    def __missing__(self, key: str) -> Any:
        v = self.glb[key]
        if isinstance(v, type) and issubclass(v, Record):
            return _twin(v)
        return v


def _twin(cls) -> Any:
    """The pydantic model equal to this record class (frozen, extra fields forbidden, the same
    fields, defaults, descriptions and constraints), built once."""
    twin = _TWINS.get(cls)
    if twin is not None:
        return twin
    import typing

    from pydantic import ConfigDict, create_model
    from pydantic import Field as PField

    _plan(cls)
    spec = {}
    for klass in reversed(cls.__mro__):
        for fname, source in klass.__dict__.get("__annotations__", {}).items():
            info = cls.__record_fields__.get(fname)
            if info is None:
                continue
            names = _TwinNames(vars(sys.modules[klass.__module__]))
            names["typing"] = typing
            tp = eval(source, {"__builtins__": __builtins__}, names) if isinstance(source, str) else source  # noqa: S307
            kw: dict[str, Any] = dict(info.constraints)
            if info.description:
                kw["description"] = info.description
            if info.default_factory is not None:
                kw["default_factory"] = info.default_factory
            elif info.default is not _MISSING:
                kw["default"] = info.default
            spec[fname] = (tp, PField(**kw))
    twin = create_model(cls.__name__, __config__=ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True),
                        __module__=cls.__module__, **spec)
    twin.__record__ = cls
    _TWINS[cls] = twin
    return twin


def _from_twin(v: Any) -> Any:
    record = getattr(type(v), "__record__", None)
    if record is not None:
        return record(**{n: _from_twin(getattr(v, n)) for n in record.__record_fields__})
    cls = v.__class__
    if cls is list:
        return [_from_twin(x) for x in v]
    if cls is tuple:
        return tuple(_from_twin(x) for x in v)
    if cls is dict:
        return {k: _from_twin(x) for k, x in v.items()}
    return v
