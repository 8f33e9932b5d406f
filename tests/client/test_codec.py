"""Bodies decode to exactly the value the standard library's ``json`` gives, whichever decoder ran."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.codec import decode, decode_json, encode_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_matches_json(value: Any) -> None:
    data = encode_json(value)
    reference = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    assert json.loads(data) == json.loads(reference)
    decoded = decode(data, "json")
    assert decoded == json.loads(data)
    assert repr(decoded) == repr(json.loads(data))  # int stays int, -0.0 stays -0.0


@pytest.mark.parametrize(
    "text",
    [
        b"123456789012345678901234567890",  # past 64 bits: exact, not a float
        b"-9223372036854775809",
        b'{"n":[18446744073709551616,1.5]}',
        b'"\\ud800"',  # a lone surrogate, which json keeps
        b"1e400",  # past a float's range: json gives inf
        b'{"a":1,"a":2}',
        b'"1234567890123456789012345"',  # a long digit run inside a string
        b"[1e19, -1e19, 9223372036854775807, 18446744073709551615]",  # big floats stay floats
        b'{"a":[[{"b":-99999999999999999999}]]}',  # deep inside
    ],
)
def test_values_only_json_gets_right(text: bytes) -> None:
    assert repr(decode_json(text)) == repr(json.loads(text))


def test_text_and_bytes() -> None:
    assert decode("héllo".encode(), "text") == "héllo"
    assert decode(b"\x00\xff", "bytes") == b"\x00\xff"
