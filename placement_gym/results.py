"""Writing results files: what was run, on what, and never over a file the user already has."""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape a result."""
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for module in ("placement_gym", "openvino", "numpy", "gymnasium", "torch", "torch_geometric", "stable_baselines3"):
        mod = sys.modules.get(module)
        if mod is None:
            try:
                mod = __import__(module)
            except ImportError:
                continue
        found[module] = str(getattr(mod, "__version__", "unknown"))
    return found


def machine() -> dict[str, Any]:
    """The host: processor and core count (what the measured latencies depend on)."""
    return {"processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()}


def write_json(path: "str | os.PathLike", data: Any, *, overwrite: bool = False) -> Path:
    """Write `data` as JSON to `path` atomically; refuse to replace an existing file unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True (--overwrite)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, default=_jsonable)
        f.write("\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a results file is as readable as any other
    os.replace(tmp, path)
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
