"""Where the stream's checkpoint goes: under the data dir by default, under a configured directory
when given, and never a stale checkpoint that would make the query resume from old offsets."""

from __future__ import annotations

from pathlib import Path

from compute.spark.checkpoint import checkpoint_dir


def test_a_configured_directory_is_used_and_only_its_old_stream_is_cleared(tmp_path: Path) -> None:
    old = tmp_path / "ckpt" / "stream" / "offsets"
    old.mkdir(parents=True)
    (old / "7").write_text("v1")
    keep = tmp_path / "ckpt" / "unrelated.txt"
    keep.write_text("mine")
    path = checkpoint_dir(tmp_path / "ckpt", tmp_path / "data")
    assert path == tmp_path / "ckpt" / "stream"
    assert not path.exists()
    assert keep.read_text() == "mine"


def test_by_default_it_goes_under_the_data_dir(tmp_path: Path) -> None:
    (tmp_path / "data" / "checkpoints" / "stream" / "commits").mkdir(parents=True)
    path = checkpoint_dir(None, tmp_path / "data")
    assert path == tmp_path / "data" / "checkpoints" / "stream"
    assert not path.exists()
