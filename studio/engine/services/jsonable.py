"""A typed report as the dict its ``--json`` prints (services/requests.py: the reports that cross
the worker): the fields under their encoded names, in declaration order, a field left at its
default omitted where the Struct says ``omit_defaults``, nested Structs (and lists of them) as
dicts too, every other value as it is. Not ``msgspec.to_builtins``: the engine's reports hold numpy
floats (a median, a rounded time), which ``json.dumps`` writes and ``to_builtins`` refuses."""
from __future__ import annotations

import msgspec

_NONE = msgspec.NODEFAULT


def as_dict(obj: msgspec.Struct, drop: tuple[str, ...] = ()) -> dict:
    omit = obj.__struct_config__.omit_defaults
    out = {}
    for f in msgspec.structs.fields(obj):
        value = getattr(obj, f.name)
        if f.name in drop or (omit and _is_default(f, value)):
            continue
        out[f.encode_name] = _value(value)
    return out


def _is_default(f, value) -> bool:
    if f.default is not _NONE:
        return value is f.default or (type(value) is type(f.default) and value == f.default)
    return f.default_factory is not _NONE and value == f.default_factory()


def _value(v):
    if isinstance(v, msgspec.Struct):
        return as_dict(v)
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v
