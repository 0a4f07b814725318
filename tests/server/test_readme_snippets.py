"""Every snippet of README.md runs as written, against a real server."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx

from tests.conftest import ROOT, ServerProcess
from tests.server.test_nominal_sdk import NOMINAL_PYTHON

# -- every snippet of README.md runs as written, against a real server ---------------------------------
# Only the address changes (the server under test listens on a port of its own). A snippet that
# follows a subscription forever runs until its output shows what it promises, then is stopped.
README_ADDRESS = "127.0.0.1:8000"
FOLLOWS_FOREVER = {  # a line of the snippet -> what its output must show
    "from sparkwire_client import Client": ["vehicle", "a1", "value"],
    "websockets.connect(": ["subscriptionCreation", "subscriptionUpdate"],
}


def snippets(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


async def run_snippet(command: list[str], expect: list[str] | None, timeout: float = 120) -> str:
    """Its output: to the end (exit 0), or, with `expect`, until each of those strings showed."""
    process = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert process.stdout is not None
    output = ""
    try:
        async with asyncio.timeout(timeout):
            while line := await process.stdout.readline():
                output += line.decode()
                if expect is not None and all(e in output for e in expect):
                    return output
            assert await process.wait() == 0, output
            assert expect is None, f"ended before showing {expect}:\n{output}"
            return output
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_every_readme_snippet_runs_as_written(server: ServerProcess) -> None:
    address = server.base_url.removeprefix("http://")
    shell = [s for s in snippets("sh") if s.startswith("curl ")]
    for writer in ("/storage/writer/v1 ", "/storage/writer/v1/columnar ", "/storage/writer/v1/telegraf/"):
        assert any(writer in curl for curl in shell), writer  # each writer's example runs
    for curl in shell:
        answer = await run_snippet(["bash", "-c", curl.replace(README_ADDRESS, address)], None)
        assert "errorName" not in answer, answer  # curl exits 0 on any status: the body says a refusal
    python = snippets("python")
    assert len(python) == 4
    for snippet in python:
        code = snippet.replace(README_ADDRESS, address)
        compile(code, "README.md", "exec")  # every one is a whole script
        expect = next((out for marker, out in FOLLOWS_FOREVER.items() if marker in snippet), None)
        # `nominal` pins an older nominal-api than the test extra: it has an environment of its own
        python_of = NOMINAL_PYTHON if "from nominal.core import" in snippet else Path(sys.executable)
        assert python_of.exists(), "the nominal SDK's environment is missing: run `make install`"
        output = await run_snippet([str(python_of), "-c", code], expect)
        if expect is None:  # Nominal's writers: they print nothing, and exit 0 once written
            assert "Traceback" not in output, output
    # What the snippets wrote (curl, nominal-streaming, nominal) is in the log.
    listed = httpx.get(f"{server.base_url}/series", timeout=10).json()
    assert any(
        s["dataSourceRid"] == "ri.sparkwire.main.dataset.demo" and s["channel"] == "engine.temp"
        for s in listed
    ), listed
