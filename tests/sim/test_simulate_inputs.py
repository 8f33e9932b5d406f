"""Every bad input to the simulator is refused with an error that names it (InvalidSetting, 10207)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from conveyor import InvalidSetting
from conveyor.sim import CloudflareModel, ConveyorModel, simulate

BAD: list[tuple[dict[str, Any], str]] = [
    ({"model": "aws"}, "model is 'aws'; it must be one of cloudflare, conveyor"),
    ({"messages": -1}, "messages is -1"),
    ({"messages": True}, "messages is True"),
    ({"messages": 2.5}, "messages is 2.5"),
    ({"hold": -1.0}, "hold of message 0 is -1.0"),
    ({"hold": math.nan}, "hold of message 0 is nan"),
    ({"hold": math.inf}, "hold of message 0 is inf"),
    ({"hold": "60"}, "hold is '60'"),
    ({"messages": 3, "hold": [1.0, 2.0]}, "hold gives 2 times for 3 messages"),
    ({"messages": 2, "hold": [1.0, None]}, "hold of message 1 is None"),
    ({"max_concurrency": 0}, "max_concurrency is 0; it must be None (automatic) or a whole number from 1 to 250"),
    ({"max_concurrency": 251}, "max_concurrency is 251"),
    ({"max_batch_size": 0}, "max_batch_size is 0; it must be a whole number from 1 to 100"),
    ({"max_batch_size": 101}, "max_batch_size is 101"),
    ({"max_batch_timeout": -1}, "max_batch_timeout is -1; it must be seconds from 0 to 60"),
    ({"max_batch_timeout": 61}, "max_batch_timeout is 61"),
    ({"handler_timeout": 0}, "handler_timeout is 0"),
    ({"hold": 1000.0}, "messages 0..0 hold their invocation 1000 s; the handler time limit is 900 s"),
    ({"hold": 40.0, "max_batch_size": 3, "handler_timeout": 100}, "messages 0..2 hold their invocation 120 s"),
]


@pytest.mark.parametrize(("given", "said"), BAD, ids=[said.split(";")[0] for _, said in BAD])
def test_a_bad_input_is_refused_with_its_name_and_value(given: dict[str, Any], said: str) -> None:
    arguments = {"model": "conveyor", **given}
    with pytest.raises(InvalidSetting) as refused:
        simulate(**arguments)
    assert said in str(refused.value)
    assert refused.value.code == 10207


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(TypeError, match="max_batch"):
        simulate("conveyor", max_batch=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "build",
    [
        lambda: CloudflareModel(first_start=-1.0),
        lambda: CloudflareModel(ramp_step=math.inf),
        lambda: ConveyorModel("sqlite", notice_seconds=-0.1, lease_seconds=0.0, settle_seconds=0.0),
        lambda: ConveyorModel("sqlite", notice_seconds=0.0, lease_seconds=math.nan, settle_seconds=0.0),
    ],
)
def test_a_model_with_a_bad_constant_is_refused(build: Any) -> None:
    with pytest.raises(InvalidSetting, match="it must be a finite number of seconds, 0 or more"):
        build()


def test_one_hold_per_message_is_taken_as_given() -> None:
    run = simulate("conveyor", messages=3, hold=(0.5, 0, 2))
    assert [end - start for start, end in zip(run.starts, run.ends, strict=True)] == pytest.approx([0.5, 0.0, 2.0])
