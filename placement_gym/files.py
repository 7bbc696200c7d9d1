"""Files: what a result was run on (versions, machine) and the one safe writer every file placement-gym writes
goes through. The env library's own files (a model cache's index, a profile, a figure) and the application's
(results, checkpoints, placed folders, `placement_gym.results`) both use it, so it sits in the library.

* `write_atomically` (and `write_json`, `write_text`, `save_figure`): a temporary file beside the target moved into
  place, so a reader never sees half a file, and an existing file is never replaced unless the caller says so.
* `safe_name`: the one way a file or folder name is made from a name a user or a file gave (a suite, a model, an
  agent): one path component, never ``..`` or a separator, so no name writes outside the folder meant.
* `folder_lock`: a folder one process writes for minutes (a benchmark's): a second process is refused in one
  line naming the first's pid, instead of both computing everything.
* `check_outputs`: every file and folder a job will write, checked before it starts: no two at one path, none
  over a file it reads, none inside a folder written whole, none over an existing file unless the caller says so,
  each where it can be created (its folder writable, its name one the file system takes).
* `keep_records`: where writing the results failed (a full disk, a folder gone read-only), the finished runs'
  records written elsewhere (beside, the current folder, the temp folder) and said where, so no finished run is
  lost to an output error (`OutputError`).
* `load_json`: a JSON file this project wrote, read back bounded (`placement_gym.schema.read_json`); ``x.json``
  is read from ``x.json.gz`` where only that is stored.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import importlib.metadata
import json
import math
import os
import platform
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .schema import Anything, read_json

# ------------------------------------------------------------------------------------- what was run on what
def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape a result: a loaded module's ``__version__`` (OpenVINO's
    names its build), else the installed distribution's version, read without importing it (importing torch and
    PyG only to read their versions is slow, and a ``compare --ray`` driver never loads them otherwise)."""
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for module in ("placement_gym", "openvino", "numpy", "gymnasium", "torch", "torch_geometric", "stable_baselines3"):
        if module in sys.modules:
            found[module] = str(getattr(sys.modules[module], "__version__", "unknown"))
            continue
        try:
            found[module] = importlib.metadata.version(module)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    """The host: processor, its model and core count (what the measured latencies depend on; the model also
    decides the float rounding of torch's kernels, so a seeded training can differ between two CPU models)."""
    return {"processor": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count()}


def cpu_model() -> str:
    """The CPU's model name as the OS reports it (Linux: /proc/cpuinfo), else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ------------------------------------------------------------------------------------- the safe writer
#: The longest name `safe_name` makes (file systems refuse components above 255 bytes).
MAX_NAME_LEN = 120


def safe_name(name: str) -> str:
    """`name` (a suite, case, model or agent, as a user or a file gave it) as one file-name component: characters
    other than letters, digits, ``_``, ``.`` and ``-`` become ``_`` (``hybrid:hsdag`` -> ``hybrid_hsdag``), no dot
    first (``../../x`` -> ``_.._x``, never ``.`` or ``..``), at most `MAX_NAME_LEN` characters (a longer name is
    cut and ends in a digest of the whole, so two long names stay apart). Every path placement-gym derives from
    such a name goes through here, so none leads outside the folder it is meant for."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "_"
    if len(safe) > MAX_NAME_LEN:
        import hashlib

        safe = f"{safe[:MAX_NAME_LEN - 17]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    return safe


def refuse_existing(path: "str | os.PathLike", overwrite: bool = False) -> Path:
    """`path` as a `Path`; ``FileExistsError`` if it exists and `overwrite` is False, or if it is a folder
    (a file cannot replace one, `overwrite` or not). Check before long work."""
    path = Path(path)
    if path.is_dir():
        raise FileExistsError(f"{path} is a folder; give a file path")
    if not overwrite and (path.exists() or path.is_symlink()):
        raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True (--overwrite)")
    return path


#: The lock file `folder_lock` keeps in a folder while a process writes there (it holds that process's pid).
LOCK_NAME = ".placement-gym.lock"


class FolderInUse(FileExistsError):
    """A folder that another live process holds with `folder_lock` (the message names its pid)."""


@contextlib.contextmanager
def folder_lock(folder: "str | os.PathLike") -> Iterator[Path]:
    """Hold `folder` (created if need be) for this process until the block ends; `FolderInUse` at once where
    another process holds it.

    An exclusive ``flock`` on `LOCK_NAME` in the folder, which holds the pid of its holder: the kernel releases
    it when the holder dies however it dies (SIGKILL too), so a stale lock never blocks, and the file is removed
    when the block ends. Where there is no ``fcntl`` (Windows) nothing is locked, as the model cache's build lock.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield folder
        return
    path = folder / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", errors="replace").strip() or "unknown"
            os.close(fd)
            raise FolderInUse(f"{folder} is in use by pid {holder} (another process is writing there); wait for "
                              "it to finish, or choose another folder") from None
        try:  # the holder before us removes the file as it lets go: lock the file that is there now
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode("ascii"))
        yield folder
    finally:
        path.unlink(missing_ok=True)  # while still held: a process that opened it meanwhile retries
        os.close(fd)


def check_outputs(outputs: Mapping[str, "str | os.PathLike"], overwrite: bool = False,
                  inputs: Mapping[str, "str | os.PathLike | None"] | None = None,
                  folders: Mapping[str, "str | os.PathLike"] | None = None) -> None:
    """Check every file and folder a job will write, before the job starts.

    `outputs` and `inputs` map how the user named each file (``"--json"``, ``"the CSV beside --json"``) to its
    path; inputs that are not existing files or folders (a preset or zoo name, None) are skipped. `folders` names
    the folders the job writes whole (a placed folder, ``--out`` of place and export: swapped in as a whole, so
    nothing else may be written into it, and no input may be in it; what may already be there is the folder
    writer's to check, `placement_gym.deploy.check_out`).

    ``ValueError`` naming both when two outputs are one file, an output is a file the job reads, or an output or an
    input is in a folder written whole: one would replace the other, so this is refused even with `overwrite`.
    Then, for each output, ``ValueError`` where it cannot be created (`check_creatable`), and ``FileExistsError``
    (`refuse_existing`, prefixed with the output's name) for an existing file unless `overwrite`, and for a folder.
    """
    def same_file(path: "str | os.PathLike") -> str:
        # One key per file however it is spelled: ./r.json, r.json, a symlink to it, R.JSON on macOS.
        return os.path.normcase(os.path.realpath(path))

    taken = {same_file(path): (name, "read") for name, path in (inputs or {}).items()
             if path is not None and Path(path).is_file()}
    for name, path in outputs.items():
        key = same_file(path)
        if key in taken:
            other, role = taken[key]
            clash = "the output would replace the input" if role == "read" else "one would replace the other"
            raise ValueError(f"{other} and {name} are both {path}: {clash}, even with --overwrite; give each "
                             "output its own path")
        taken[key] = (name, "written")
    for folder_name, folder in (folders or {}).items():
        whole = same_file(folder)
        for name, path in [*outputs.items(), *((n, p) for n, p in (inputs or {}).items()
                                               if p is not None and os.path.lexists(p))]:
            key = same_file(path)
            if key == whole or key.startswith(whole.rstrip(os.sep) + os.sep):
                role = "the folder would replace it" if name not in outputs else "the folder is written whole, " \
                    "so it would be lost"
                raise ValueError(f"{name} ({path}) is inside {folder_name} ({folder}): {role}, even with "
                                 "--overwrite; give it a path outside the folder")
    for name, path in [*outputs.items(), *(folders or {}).items()]:
        check_creatable(path, name)
    for name, path in outputs.items():
        try:
            refuse_existing(path, overwrite)
        except FileExistsError as exc:
            raise FileExistsError(f"{name}: {exc}") from None


def check_creatable(path: "str | os.PathLike", name: str = "the output") -> None:
    """``ValueError`` (one line, starting with `name`) unless `path` can be created, as far as can be known before
    writing: its name one the file system takes (`MAX_COMPONENT_BYTES` at most, so the temporary file beside it
    fits too), and its nearest existing folder a folder (not a file, not a broken link) where this process may
    write. A full disk is only found when writing (`keep_records`)."""
    path = Path(path)
    for part in path.parts:
        if len(os.fsencode(part)) > MAX_COMPONENT_BYTES:
            raise ValueError(f"{name}: the name {part[:40]}... is {len(os.fsencode(part))} bytes long; file systems "
                             f"take names of at most {MAX_COMPONENT_BYTES} bytes: give a shorter one")
    above = Path(os.path.abspath(path)).parent
    while not os.path.lexists(above):
        above = above.parent
    if not above.is_dir():
        what = "a broken symbolic link" if above.is_symlink() and not above.exists() else "a file"
        raise ValueError(f"{name}: {above} is {what}, so {path} cannot be created in it; give a path in a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(above).f_flag & getattr(os, "ST_RDONLY", 1))
        why = "is on a read-only file system" if read_only else "is not writable by this user"
        raise ValueError(f"{name}: cannot write {path}: {above} {why}; give a path in a folder you can write to")


#: The longest name of one file or folder placement-gym writes (file systems take 255 bytes; what is left is for
#: the temporary name it is written under first).
MAX_COMPONENT_BYTES = 255


def umask() -> int:
    """This process's umask (read by setting it and putting it back: the OS offers no other way)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temporary_name(path: Path) -> str:
    """The prefix of the temporary files and folders written beside `path` before they are moved into place:
    hidden, and short whatever `path`'s name (a name of 250 bytes is legal; it with a suffix is not)."""
    return f".{path.name[:40]}."


def write_atomically(path: "str | os.PathLike", write: Callable[[Path], None], *, overwrite: bool = False) -> Path:
    """Create `path` by calling ``write(tmp)`` on a temporary file beside it, then moving that into place.

    A reader never sees a half-written file, and a write that fails leaves nothing behind. Without
    `overwrite` an existing file is refused before writing and again, atomically, when moving (a hard link
    cannot replace a file), so a file that appeared meanwhile is not replaced either.
    """
    path = refuse_existing(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path), suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp creates 0600; a results file is as readable as any other
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExistsError(f"{path} exists; choose another path or pass overwrite=True (--overwrite)")
            except OSError:  # a file system without hard links: check, then move (not atomic, but still checked)
                refuse_existing(path)
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


class OutputError(OSError):
    """An output a command could not write (a full disk, a folder gone read-only): the message says which, why,
    and where the finished work was kept instead (`keep_records`)."""


def os_error_text(exc: OSError) -> str:
    """An OS error in one line: ``PATH: reason`` (without Python's ``[Errno N]``)."""
    if isinstance(exc, OutputError) or not exc.strerror:
        return str(exc)
    return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror


def keep_records(document: Mapping[str, Any], command: str, near: "str | os.PathLike | None" = None) -> Path | None:
    """Write the results-file object `document` (`records_to_json`) where an output error left it unwritten: the
    first place that takes it of beside `near` (the file that could not be written), the current folder and the
    temp folder, under a new name (``placement-gym-COMMAND-records-DATE-PID.json``); None if none does."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"placement-gym-{safe_name(command)}-records-{stamp}-{os.getpid()}.json"
    places = ([Path(near).parent] if near is not None else []) + [Path.cwd(), Path(tempfile.gettempdir())]
    for folder in dict.fromkeys(places):
        try:
            return write_json(folder / name, document)
        except OSError:
            continue
    return None


def write_text(path: "str | os.PathLike", text: str, *, overwrite: bool = False) -> Path:
    """Write `text` (UTF-8) to `path` with `write_atomically`."""
    return write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), overwrite=overwrite)


def write_json(path: "str | os.PathLike", data: Any, *, overwrite: bool = False) -> Path:
    """Write `data` as strict JSON (numpy values as lists, non-finite floats as null) with `write_atomically`;
    gzip-compressed where `path` ends in ``.gz`` (``x.json.gz``: what `load_json` and `schema.read_text` read
    back, also when asked for ``x.json``)."""
    text = json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n"
    if Path(path).suffix != ".gz":
        return write_text(path, text, overwrite=overwrite)
    packed = gzip.compress(text.encode("utf-8"), mtime=0)  # no timestamp: the same data, the same bytes
    return write_atomically(path, lambda tmp: tmp.write_bytes(packed), overwrite=overwrite)


def beside(path: "str | os.PathLike", suffix: str) -> Path:
    """The file next to results file `path` with its name and `suffix`: ``x.json`` or ``x.json.gz`` and
    ``".csv"`` -> ``x.csv`` (a compare's CSV and pictures beside its JSON)."""
    path = Path(path)
    name = path.name.removesuffix(".gz") if path.name.endswith(".json.gz") else path.name
    return path.with_name(Path(name).stem + suffix)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None  # strict JSON has no inf/nan: a missing latency is null
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


# ------------------------------------------------------------------------------------- reading them back
#: The largest results or placement file read back (a compare of thousands of runs is tens of MB).
MAX_RESULTS_BYTES = 64 << 20


def load_json(path: "str | os.PathLike") -> Any:
    """The contents of results file `path`, or of its compressed twin ``path.gz`` where only that exists
    (`schema.read_json`: a regular file, its text and values bounded), unchecked beyond that: for the tables made
    of files this project wrote (`read_placements` checks what it builds from)."""
    return read_json(path, Anything(), max_bytes=MAX_RESULTS_BYTES, what="results file")


def save_figure(path, fig, *, overwrite: bool = False, dpi: float | None = 120) -> Path:
    """Write a matplotlib figure as PNG with `write_atomically` (never over a file unless `overwrite`), then
    close it."""
    import matplotlib.pyplot as plt

    try:
        return write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight"),
                                overwrite=overwrite)
    finally:
        plt.close(fig)


__all__ = [
    "LOCK_NAME", "MAX_COMPONENT_BYTES", "MAX_NAME_LEN", "MAX_RESULTS_BYTES", "FolderInUse", "OutputError", "beside",
    "check_creatable", "check_outputs", "cpu_model", "folder_lock", "keep_records", "load_json", "machine",
    "os_error_text", "refuse_existing", "safe_name", "save_figure", "temporary_name", "umask", "versions",
    "write_atomically", "write_json", "write_text",
]
