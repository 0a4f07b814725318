"""README.md's configuration table, generated from `Settings` so the two cannot drift apart:
`python -m app.runtime.settings_table` rewrites the table between its markers (a test checks it)."""

from __future__ import annotations

import sys
from pathlib import Path

from app.config import Settings

START = "<!-- settings-table:start -->"
END = "<!-- settings-table:end -->"


def markdown() -> str:
    lines = [
        "| flag (`sparkwire serve`) | environment variable | default | what |",
        "|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = field.default
        lines.append(f"| `{flag}` | `SPARKWIRE_{name.upper()}` | `{default}` | {field.description} |")
    return "\n".join(lines)


def section(text: str) -> str:
    """The table as it stands between the markers of a README."""
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def rewrite(readme: Path) -> None:
    text = readme.read_text()
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{START}\n{markdown()}\n{END}{tail}")


if __name__ == "__main__":
    rewrite(Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
