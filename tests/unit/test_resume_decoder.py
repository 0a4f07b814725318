"""The subscription decoder and the resume extension's fields (tests/server/test_resume.py resumes)."""

from __future__ import annotations

import pytest

from tests.wire import (
    decode_strictly,
)


def test_the_strict_decoder_refuses_a_field_nominal_does_not_know() -> None:
    frame = (
        '{"type":"subscriptionUpdate","subscriptionUpdate":{"subscriptionId":"a","update":{"type":"full",'
        '"full":{"result":{"type":"numeric","numeric":{"timestamps":[],"values":[]}}}}%s}}'
    )
    decode_strictly(frame % "")
    with pytest.raises(AssertionError, match="does not know"):
        decode_strictly(frame % ',"resumeToken":"x"')
    with pytest.raises(ValueError, match="unknown union type"):
        decode_strictly('{"type":"lateReport","lateReport":{"subscriptionId":"a"}}')
