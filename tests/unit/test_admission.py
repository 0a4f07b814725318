"""One admission for every route (app/protocol/admission.py): the Origin first, then the bearer
token, from a request's headers; each route renders the refusal its own way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.protocol.admission import Admission, Refused
from app.protocol.auth import ANONYMOUS, Authenticator, TokensFile
from app.protocol.origin import OriginPolicy

HOST = {"host": "sparkwire.example:8000"}


def _admission(tmp_path: Path, allowed: str = "https://ok.example") -> Admission:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": "t-admin", "sub": "ops", "admin": True}]}))
    return Admission(OriginPolicy(allowed), Authenticator(None, TokensFile(tokens)))


def test_a_foreign_origin_is_refused_before_the_token_is_looked_at(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    headers = {**HOST, "origin": "https://evil.example", "authorization": "Bearer t-admin"}
    with pytest.raises(Refused) as refused:
        admission.admit(headers, "read the directory of computations")
    assert refused.value.status == 403
    assert refused.value.message == "this Origin may not read the directory of computations"


def test_a_listed_or_own_origin_then_the_token_decides(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    for origin in ("https://ok.example", "http://sparkwire.example:8000"):
        who = admission.admit({**HOST, "origin": origin, "authorization": "Bearer t-admin"}, "write here")
        assert who.subject == "ops" and who.admin
    with pytest.raises(Refused) as missing:
        admission.admit({**HOST, "origin": "https://ok.example"}, "write here")
    assert missing.value.status == 401 and "bearer token is required" in missing.value.message
    with pytest.raises(Refused) as unknown:
        admission.admit({"authorization": "Bearer nope"}, "write here")  # no Origin: not a browser
    assert unknown.value.status == 401 and unknown.value.message == "unknown token"


def test_the_websocket_token_may_come_as_a_subprotocol(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    who = admission.admit(HOST, "open WebSockets here", ["bearer", "t-admin"])
    assert who.subject == "ops"


def test_without_authentication_everyone_is_anonymous_but_the_origin_still_counts() -> None:
    admission = Admission(OriginPolicy(""), None)
    assert admission.admit(HOST, "read the catalog") is ANONYMOUS
    with pytest.raises(Refused) as refused:
        admission.admit({**HOST, "origin": "null"}, "read the catalog")
    assert refused.value.status == 403
