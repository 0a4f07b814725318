"""The built-in live dashboard: static HTML, JavaScript and CSS (no build step, nothing fetched from
elsewhere), served by the app at `GET /` and `GET /dashboard/<file>`."""

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent
STATIC_SUFFIXES = frozenset({".html", ".js", ".css"})
