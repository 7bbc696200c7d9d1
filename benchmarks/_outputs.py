"""What every benchmark script does with its output paths before any work: refuse existing files (unless
``--overwrite``) with argparse's usage error, so a long measurement never ends on a file it may not replace."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

from placement_gym import results


def refuse_existing_outputs(parser: argparse.ArgumentParser, paths: Iterable["str | Path | None"],
                            overwrite: bool) -> None:
    """``parser.error`` (exit 2, usage line) if any of `paths` (None entries skipped) exists and not `overwrite`."""
    for path in paths:
        if path is None:
            continue
        try:
            results.refuse_existing(path, overwrite)
        except FileExistsError as exc:
            parser.error(str(exc))
