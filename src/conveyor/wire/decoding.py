"""Reading and writing the wire: one decode for every request body and every answer, and the one
place msgspec's refusals become Cloudflare's codes.

A body that does not parse is ``MalformedJSON`` (10208). A body that parses but has the wrong shape
(an unknown field, a wrong type, a missing field) is the refusal the struct at that spot declares
(``InvalidRequest``, 10207, unless it says otherwise: a message of a push is ``InvalidMessage``,
10203, as the Python API's ``send_batch`` refuses the same mistake), with a message naming the field
by its path (``messages[3].delay_seconds``). Value limits are not checked here: the handlers call
``conveyor.client.validation``, the one place for them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, TypeVar

import msgspec

from conveyor.errors import InvalidRequest, MalformedJSON

T = TypeVar("T")


class Shape(msgspec.Struct, forbid_unknown_fields=True):
    """A wire object: a field it does not name is refused, never ignored."""

    # The refusal for a mistake inside this object.
    refusal: ClassVar[type[InvalidRequest]] = InvalidRequest

    @classmethod
    def named(cls, path: str) -> str:
        """How a refusal names this object, found at ``path`` (``""`` for the whole body)."""
        return path or "the request body"


# msgspec's ValidationError text: "<problem>" or "<problem> - at `$<path>`".
_ERROR = re.compile(r"(?P<problem>.*?)(?: - at `\$(?P<path>.*)`)?\Z", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>.*)`\Z", re.DOTALL)
_MISSING = re.compile(r"Object missing required field `(?P<field>.*)`\Z", re.DOTALL)
_TYPE = re.compile(r"Expected `(?P<expected>.*)`, got `(?P<got>.*)`\Z", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """One decoder per type, built on first use (building one is far dearer than a decode)."""
    found = _decoders.get(kind)
    if found is None:
        found = _decoders[kind] = msgspec.json.Decoder(kind)
    return found


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """The JSON of ``value``: wire structs, and the builtin types around them."""
    return _encoder.encode(value)


def to_builtins(value: Any) -> Any:
    """``value`` as dicts and lists under the wire's field names (what the CLI's ``--json`` prints)."""
    return msgspec.to_builtins(value)


def decode(raw: bytes, kind: type[T], *, required: bool = True) -> T:
    """``raw`` as ``kind``, or the refusal that names what is wrong with it (see the module docstring).

    An empty body is ``{}`` (every field at its default) unless the body is ``required``.

    >>> decode(b'{"batch_size": 10}', PeekRequest).batch_size
    10
    """
    if not raw.strip():
        if required:
            raise InvalidRequest("the request needs a JSON object body")
        raw = b"{}"
    return _decode(raw, kind, "request body")


def decode_answer(raw: bytes, kind: type[T]) -> T:
    """An answer of the server as ``kind`` (the remote client's reading); a shape it does not expect
    is an error naming the field, as for a request."""
    return _decode(raw, kind, "server's answer")


def _decode(raw: bytes, kind: type[T], what: str) -> T:
    try:
        return _decoder(kind).decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise refusal(str(exc), kind) from None
    except msgspec.DecodeError as exc:
        raise MalformedJSON(f"{what} is not valid JSON: {exc}") from None


def refusal(text: str, kind: Any) -> InvalidRequest:
    """msgspec's ValidationError ``text`` for a body decoded as ``kind``, as Conveyor's refusal."""
    found = _ERROR.match(text)
    assert found is not None  # the pattern matches any text
    problem, path = found["problem"], (found["path"] or "").lstrip(".")
    steps = _STEP.findall(found["path"] or "")
    if m := _TYPE.match(problem):
        # A value of the wrong type: the object holding it answers for it (a body that is not an
        # object at all is the request's mistake).
        owner = _shape_at(kind, steps[:-1]) if steps else None
        error = owner.refusal if owner is not None else InvalidRequest
        return error(f"{path or 'the request body'} must be {_plain(m['expected'])}, not {_plain(m['got'])}")
    shape = _shape_at(kind, steps)
    error = shape.refusal if shape is not None else InvalidRequest
    where = shape.named(path) if shape is not None else path or "the request body"
    if m := _UNKNOWN.match(problem):
        takes = f"; it takes {', '.join(_field_names(shape))}" if shape is not None else ""
        return error(f"{where} has unknown field {m['field']!r}{takes}")
    if m := _MISSING.match(problem):
        return error(f"{where} has no {m['field']}")
    return error(f"{path or 'the request body'}: {problem[:1].lower()}{problem[1:]}")


def _plain(type_text: str) -> str:
    """msgspec's name of a JSON type as a person reads it: ``int | null`` is "int or null"."""
    return type_text.replace(" | ", " or ").replace("object", "a JSON object").replace("array", "a JSON array")


def _field_names(shape: type[Shape]) -> list[str]:
    return sorted(f.encode_name for f in msgspec.structs.fields(shape))


def _shape_at(kind: Any, steps: list[tuple[str, str]]) -> type[Shape] | None:
    """The wire struct found by following ``steps`` (field names and indexes) from ``kind``."""
    node: Any = msgspec.inspect.type_info(kind)
    for field, _index in steps:
        node = _struct_in(node) if field else _items_of(node)
        if node is None:
            return None
        if field:
            named = {f.encode_name: f.type for f in node.fields}
            if field not in named:
                return None
            node = named[field]
    struct = _struct_in(node)
    return struct.cls if struct is not None and issubclass(struct.cls, Shape) else None


def _struct_in(node: Any) -> Any:
    if isinstance(node, msgspec.inspect.StructType):
        return node
    if isinstance(node, msgspec.inspect.UnionType):
        return next((t for t in node.types if isinstance(t, msgspec.inspect.StructType)), None)
    return None


def _items_of(node: Any) -> Any:
    """What a list (or a dict, whose keys msgspec's paths write as ``[...]``) holds."""
    kinds = node.types if isinstance(node, msgspec.inspect.UnionType) else (node,)
    for kind in kinds:
        if isinstance(kind, msgspec.inspect.ListType):
            return kind.item_type
        if isinstance(kind, msgspec.inspect.DictType):
            return kind.value_type
    return None
