"""Where the streaming query's checkpoint lives.

The stream starts at the log's end on every process start (history reaches computations by
back-fill from the durable log), so the checkpoint never has to survive the process: its offset and
commit files only pace the running query. They are written on every micro-batch; on this project's
machines their cost is Hadoop's file handling, not the device (docs/decisions/0004-checkpoint-placement.md,
0012-checkpoint-without-subprocesses.md),
so the default stays under the data dir, and `checkpoint_dir` can move it (e.g. to /dev/shm when the
data dir is a slow network volume).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path


def checkpoint_dir(configured: Path | None, data_dir: Path) -> Path:
    """An empty directory for this process's stream checkpoint: under `configured`, else under
    DATA_DIR/checkpoints."""
    stream = (configured if configured is not None else data_dir / "checkpoints") / "stream"
    # Nothing in an old checkpoint is worth resuming (see above), and a stale one would make the
    # query resume from its offsets instead of the log's end.
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(stream)
    return stream
