"""README.md: its configuration table is the one generated from app/config.py's Settings (its
snippets are run against a real server in tests/server/test_readme_snippets.py)."""

from __future__ import annotations

from app.config import Settings
from app.runtime.settings_table import markdown, section
from tests.conftest import ROOT


def test_the_readme_configuration_table_lists_every_setting() -> None:
    table = section((ROOT / "README.md").read_text())
    assert table == markdown(), "README.md is stale: run `python -m app.runtime.settings_table`"
    for name in Settings.model_fields:
        assert f"| `--{name.replace('_', '-')}` | `SPARKWIRE_{name.upper()}` |" in table
