"""Checking what is read from a file against a schema, before anything is built from it.

Every file placement-gym reads back (a model cache's manifest, an agent checkpoint, a results file, a placement
file) is checked here first: its size, its types, its ranges and the lengths of its lists. A schema is a tree of
small specs::

    FINGERPRINT = Record({"size": Integer(0), "sampled_sha256": Text(pattern=HEX64, what="a SHA-256 in hex")})
    MANIFEST = Record({".xml": FINGERPRINT, ".bin": FINGERPRINT})
    manifest = read_json(path, MANIFEST, max_bytes=1 << 16)       # or check(data, MANIFEST, source=path)

    Integer(low, high), Number(low, high, positive=..., finite=...), Boolean(), Text(max_len, choices, pattern),
    Optional(spec), OneOf(*specs), ListOf(item, min_len, max_len), MapOf(value, max_len),
    Record(required, optional, others), Tagged(key, variants), InstanceOf(cls, what), Plain(max_depth, max_len),
    Anything(), Where(spec, test, expected)

Reading is bounded before anything is built: only a regular file is opened (a FIFO or a device would block or
never end), its text is capped (a compressed file's too, as it is unpacked), and so is what parsing it builds:
the values it holds (`MAX_ITEMS`, counted before parsing) and how deep they nest (`MAX_DEPTH`). Parsed JSON costs
up to ~100 bytes of Python per value, so a file of ``[{},{},...]`` would cost ~30 times its size; with the caps a
refused file costs at most its text, and an accepted one its text and ~100 bytes per value.

Numbers are bounded, so that nothing read overflows later (a JSON integer has no limit, and ``1e400`` parses as
infinity): an `Integer` without bounds is within int64, a `Number` is an integer within int64 or a finite float,
`Plain` data holds no integer beyond int64, and a JSON literal beyond a float's range is refused by every spec.

Every problem is one `SchemaError` (a ``ValueError``) on one line that names the file, the field and what is
accepted::

    run.json: field records[2].placement[7]: found 7; expected an integer from 0 to 1

A check that relates two fields (a device index below the length of ``devices``) is made by the reader after
the schema has passed, and reported the same way with `mismatch`.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Sequence

__all__ = [
    "HEX64", "INT64_MAX", "INT64_MIN", "MAX_DEPTH", "MAX_DEVICES", "MAX_ITEMS", "MAX_OPS", "NAME", "Anything",
    "Boolean", "Found", "InstanceOf", "Integer", "ListOf", "MapOf", "Number", "OneOf", "Optional", "Plain", "Record",
    "SchemaError", "Spec", "Tagged", "Text", "Where", "check", "describe", "is_regular_file", "join", "loads",
    "mismatch", "open_regular", "read_json", "read_text", "repeated", "stored",
]

#: The most ops a graph named in a file may have (``synthetic:N``, a placement's length): above the largest graphs
#: the peers place (GO's, tens of thousands of ops), far below what would take minutes to build.
MAX_OPS = 200_000
#: The most devices a placement or a checkpoint may name.
MAX_DEVICES = 64
#: A SHA-256 digest in hex (`Text`'s ``pattern``).
HEX64 = r"[0-9a-f]{64}"
#: The integers any file may hold where its spec sets no tighter bound: int64, what numpy and torch store. A
#: larger one (JSON integers have no limit) would pass the check and crash later, converted to an array or a float.
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
#: The most values a JSON text may hold unless its reader says otherwise (`loads`: counted as its commas, brackets
#: and braces, before it is parsed): what a placement of `MAX_OPS` ops with a few fields per op needs, ten times
#: the largest file shipped (a suite's reference results: 0.3 M). Parsed, that many values take at most ~400 MB.
MAX_ITEMS = 4_000_000
#: The deepest a JSON text's values may nest unless its reader says otherwise (the files here nest at most 9 deep).
MAX_DEPTH = 32


class SchemaError(ValueError):
    """A file whose content does not fit its schema (the message names the file, the field and what is accepted)."""


class _Mismatch(Exception):
    """Raised inside a spec's check; `check` turns it into the caller's one-line error."""

    def __init__(self, at: str, found: str, expected: str) -> None:
        super().__init__(at)
        self.at, self.found, self.expected = at, found, expected


_MISSING = object()  # a required field that is not there


class _Overflow(float):
    """A JSON number literal beyond the range of a float (``1e400``): infinite as a float, but kept apart so that
    every spec refuses it naming the field (JSON has no infinity, so a file never means one)."""

    literal: str

    def __new__(cls, literal: str) -> "_Overflow":
        value = super().__new__(cls, literal)
        value.literal = literal
        return value


def _parse_float(literal: str) -> float:
    """`json.loads`' ``parse_float``: the float, or an `_Overflow` where the literal is beyond a float's range."""
    value = float(literal)
    return _Overflow(literal) if math.isinf(value) else value


class Found(str):
    """What was found, said in words by the reader (`describe` returns it as it is): ``Found("shape (16, 67)")``."""


def describe(value: Any) -> str:
    """A short description of `value` for an error message: the value itself when it is short, else its kind."""
    if isinstance(value, Found):
        return str(value)
    if value is _MISSING:
        return "nothing (the file lacks it)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**18 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, _Overflow):
        return f"{value.literal[:40]} (beyond the range of a float)"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"text of {len(value)} characters ({value[:20]!r}...)"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"an object with {len(value)} field{'s' if len(value) != 1 else ''}"
    return f"a {type(value).__name__}"


def join(at: str, key: "str | int") -> str:
    """The path of field `key` inside the field at `at`: ``records[3]``, ``records[3].placement``,
    ``state_dict['encoder.0.weight']``."""
    if isinstance(key, int):
        return f"{at}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{at}.{key}" if at else key
    return f"{at}[{key[:60]!r}]"


def repeated(items: "Sequence[Any]") -> tuple[int, int] | None:
    """``(first, second)``: the positions of the first item of `items` that comes again, or None if none does
    (one pass: a file may list `MAX_OPS` items)."""
    first: dict[Any, int] = {}
    for i, item in enumerate(items):
        if item in first:
            return first[item], i
        first[item] = i
    return None


def mismatch(source: "str | os.PathLike", at: str, found: Any, expected: str,
             error: type[ValueError] = SchemaError) -> ValueError:
    """The one-line error for the field at `at` of the file `source`: `found` (a value, described) is not
    `expected`. For the checks a reader makes across fields, after `check`."""
    return error(_message(source, at, describe(found), expected))


def _message(source: "str | os.PathLike", at: str, found: str, expected: str) -> str:
    """The one format of every schema error."""
    return f"{source}: field {at or '(the whole file)'}: found {found}; expected {expected}"


def check(value: Any, spec: "Spec", source: "str | os.PathLike", *, at: str = "",
          error: type[ValueError] = SchemaError) -> Any:
    """`value` (read from the file `source`; at field `at` of it) if it fits `spec`, else an `error` naming the
    file, the first field that does not fit and what it accepts."""
    try:
        spec.check(value, at)
    except _Mismatch as bad:
        raise error(_message(source, bad.at, bad.found, bad.expected)) from None
    except RecursionError:  # a spec never recurses deeper than the data; data nested this deep is not ours
        raise error(f"{source}: field {at or '(the whole file)'}: nested too deeply") from None
    return value


def stored(path: "str | os.PathLike") -> Path:
    """Where the file `path` is stored: `path` itself, or its gzip-compressed twin ``path.gz`` where only that
    exists (large results files and label caches are kept compressed: ``x.json`` is read from ``x.json.gz``)."""
    path = Path(path)
    if path.suffix != ".gz" and not path.exists():
        packed = path.with_name(path.name + ".gz")
        if packed.exists():
            return packed
    return path


def is_regular_file(path: "str | os.PathLike") -> bool:
    """Whether `path` is a regular file (a symlink to one too): not a folder, a FIFO, a device or a socket, where
    opening or reading would block or never end."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def open_regular(path: "str | os.PathLike", *, what: str = "file",
                 error: type[ValueError] = SchemaError) -> Iterator[BinaryIO]:
    """`path` opened for reading in binary, refused (`error`, one line) unless it is a regular file.

    Checked on the opened file itself, and opened without blocking: a FIFO put at `path` after any earlier check
    cannot make the open wait for a writer. ``FileNotFoundError`` when nothing is at `path`."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"no {what} at {path}") from None
    except IsADirectoryError:
        raise error(f"{path} is a folder; expected a {what}") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        kind = "a folder" if path.is_dir() else "not a regular file (a FIFO, a device or a socket)"
        raise error(f"{path} is {kind}; expected a {what}")
    with os.fdopen(fd, "rb") as f:
        yield f


def read_text(path: "str | os.PathLike", *, max_bytes: int, what: str = "file",
              error: type[ValueError] = SchemaError) -> str:
    """The UTF-8 text of the file at `path` (or of its compressed twin, `stored`), read bounded (the file's own
    parser then reads it; nothing is run). A ``.gz`` file is decompressed (gzip, of the standard library).

    Only a regular file is opened (`open_regular`). The size is checked before the file is read, so an oversized
    file costs nothing, and again on what was read (the file may have grown since; a compressed file's bound is on
    its text, and it is unpacked no further than that). ``FileNotFoundError`` when nothing is at `path`; every
    other problem (a folder, a FIFO, too big, not UTF-8, not gzip, unreadable) is one `error` naming the file
    (`what` says what kind of file was expected).
    """
    path = stored(path)
    try:
        with open_regular(path, what=what, error=error) as raw:
            size = os.fstat(raw.fileno()).st_size
            if size <= max_bytes:
                unpacked = gzip.GzipFile(fileobj=raw, mode="rb") if path.suffix == ".gz" else raw
                data = unpacked.read(max_bytes + 1)
                size = len(data)
        if size > max_bytes:
            raise error(f"{path}: {size} bytes; expected a {what} of at most {max_bytes} bytes")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path} is not UTF-8 text; expected a {what}") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise error(f"{path} is not a whole gzip file ({exc}); expected a compressed {what}") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None


def loads(text: str, source: "str | os.PathLike", *, max_items: int = MAX_ITEMS, max_depth: int = MAX_DEPTH,
          what: str = "file", error: type[ValueError] = SchemaError) -> Any:
    """The value of the JSON `text` (from `source`, named in errors), parsed with bounded memory: strict JSON only
    (no ``NaN`` or ``Infinity``; a literal beyond a float's range is kept apart for the specs to refuse), at most
    `max_items` values and nested at most `max_depth` deep. Every problem is one `error` naming `source`.

    The values are counted before parsing, as the text's commas, brackets and braces (every value but the first
    of a list or object follows a comma; every list or object opens with one): an upper bound, since such
    characters inside strings count too, found in C at the speed of a memory scan, so that a text of millions of
    tiny values is refused before they are built. The depth is bounded while parsing by the parser's own
    recursion guard (about a thousand levels, which cost nothing), then checked against `max_depth`."""
    items = text.count(",") + text.count("[") + text.count("{") + 1
    if items > max_items:
        raise error(f"{source}: holds up to {items} values (counting its commas, brackets and braces); expected a "
                    f"{what} of at most {max_items} values")

    def refuse_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(text, parse_constant=refuse_constant, parse_float=_parse_float)
    except json.JSONDecodeError as exc:
        raise error(f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); expected a "
                    f"{what}") from None
    except ValueError as exc:
        raise error(f"{source} is not strict JSON ({exc}); expected a {what}") from None
    except RecursionError:
        raise error(f"{source} is nested too deeply; expected a {what} nested at most {max_depth} deep") from None
    if _depth(data, max_depth) > max_depth:
        raise error(f"{source} is nested too deeply; expected a {what} nested at most {max_depth} deep")
    return data


def _depth(data: Any, limit: int) -> int:
    """How deep the lists and objects of `data` nest (a scalar: 0, ``[]``: 1, ``[[]]``: 2), counted without
    recursion and no further than ``limit + 1``."""
    deepest, level = 0, [data]
    while level and deepest <= limit:
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            break
        deepest += 1
        level = [child for v in containers for child in (v.values() if isinstance(v, dict) else v)
                 if isinstance(child, (list, dict))]
    return deepest


def read_json(path: "str | os.PathLike", spec: "Spec", *, max_bytes: int, max_items: int = MAX_ITEMS,
              max_depth: int = MAX_DEPTH, what: str = "file", error: type[ValueError] = SchemaError) -> Any:
    """The JSON file at `path` (read by `read_text`, parsed by `loads`), checked against `spec`: the one way
    placement-gym reads a JSON file.

    A regular file only, at most `max_bytes` of text (unpacked), `max_items` values and `max_depth` levels, strict
    JSON (no ``NaN`` or ``Infinity``). ``FileNotFoundError`` when nothing is at `path`; every other problem (a
    folder, a FIFO, too big, too many values, not UTF-8, not JSON, not fitting `spec`) is one `error` naming the
    file (`what` says what kind of file was expected).
    """
    path = Path(path)
    text = read_text(path, max_bytes=max_bytes, what=what, error=error)
    data = loads(text, stored(path), max_items=max_items, max_depth=max_depth, what=what, error=error)
    del text  # the parsed value is all that is kept
    return check(data, spec, stored(path), error=error)


# ------------------------------------------------------------------------------------------------ specs
class Spec:
    """What a value read from a file must be: `expected` says it in words, `check` raises `_Mismatch`."""

    expected: str = "a value"

    def check(self, value: Any, at: str) -> None:
        """Raise `_Mismatch` (naming the field at `at`, or one inside it) unless `value` fits."""
        raise NotImplementedError

    def refuse(self, at: str, value: Any, expected: str | None = None) -> None:
        """Raise `_Mismatch`: `value`, at `at`, is not `expected` (default: what this spec accepts)."""
        raise _Mismatch(at, describe(value), expected or self.expected)


@dataclass(frozen=True)
class Anything(Spec):
    """Any value (a field whose content is not read)."""

    expected: str = "anything"

    def check(self, value: Any, at: str) -> None:
        return None


@dataclass(frozen=True)
class Integer(Spec):
    """An integer (not a boolean, not a float) from `low` to `high`, both included (None: the int64 bound,
    `INT64_MIN` or `INT64_MAX`: no file holds an integer that numpy and torch cannot)."""

    low: int | None = None
    high: int | None = None

    @property
    def expected(self) -> str:  # type: ignore[override]
        low = _int_text(INT64_MIN if self.low is None else self.low)
        high = _int_text(INT64_MAX if self.high is None else self.high)
        return f"an integer from {low} to {high}"

    def check(self, value: Any, at: str) -> None:
        low = INT64_MIN if self.low is None else self.low
        high = INT64_MAX if self.high is None else self.high
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            self.refuse(at, value)


def _int_text(value: int) -> str:
    """An integer bound as messages write it (the int64 bounds as powers of two)."""
    return {INT64_MAX: "2^63 - 1", INT64_MIN: "-2^63"}.get(value, str(value))


def _fits(value: "int | float", finite: bool) -> bool:
    """Whether the number `value` is one a file may hold: an integer within int64; a float, finite (not NaN
    either) where `finite`, and never a JSON literal beyond a float's range (`_Overflow`)."""
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    return not isinstance(value, _Overflow) and (not finite or math.isfinite(value))


@dataclass(frozen=True)
class Number(Spec):
    """A number (an integer within int64 or a float, not a boolean) from `low` to `high` (None: unbounded);
    `positive`: above 0; `finite`: not infinite (never NaN, never a JSON literal beyond a float's range)."""

    low: float | None = None
    high: float | None = None
    positive: bool = False
    finite: bool = True

    @property
    def expected(self) -> str:  # type: ignore[override]
        words = ["a positive number" if self.positive else "a number"]
        if self.low is not None and self.high is not None:
            words.append(f"from {self.low:g} to {self.high:g}")
        elif self.low is not None:
            words.append(f">= {self.low:g}")
        elif self.high is not None:
            words.append(f"<= {self.high:g}")
        bounded = self.low is not None and self.high is not None  # then finite and within int64 go unsaid
        return " ".join(words) + (" (finite; integers within int64)" if self.finite and not bounded else "")

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not _fits(value, self.finite) or \
                math.isnan(value):
            self.refuse(at, value)
        if (self.positive and value <= 0) or (self.low is not None and value < self.low) or \
                (self.high is not None and value > self.high):
            self.refuse(at, value)


@dataclass(frozen=True)
class Boolean(Spec):
    """``true`` or ``false``."""

    expected: str = "true or false"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, bool):
            self.refuse(at, value)


@dataclass(frozen=True)
class Text(Spec):
    """A string of at most `max_len` characters (at least `min_len`), one of `choices` if given, matching the
    regular expression `pattern` in full if given; `what` describes it in messages instead of the default."""

    max_len: int = 1000
    min_len: int = 0
    choices: tuple[str, ...] | None = None
    pattern: str | None = None
    what: str | None = None

    @property
    def expected(self) -> str:  # type: ignore[override]
        if self.what:
            return self.what
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return f"text of {self.min_len} to {self.max_len} characters"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, str) or not self.min_len <= len(value) <= self.max_len or \
                (self.choices is not None and value not in self.choices) or \
                (self.pattern is not None and re.fullmatch(self.pattern, value) is None):
            self.refuse(at, value)


@dataclass(frozen=True)
class Optional(Spec):
    """``null`` or a value fitting `spec`."""

    spec: Spec

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"null or {self.spec.expected}"

    def check(self, value: Any, at: str) -> None:
        if value is not None:
            try:
                self.spec.check(value, at)
            except _Mismatch as bad:  # say that null would do too, where the value itself is wrong
                if bad.at == at:
                    raise _Mismatch(at, bad.found, self.expected) from None
                raise


@dataclass(frozen=True)
class OneOf(Spec):
    """A value fitting the first of `specs` that it fits."""

    specs: tuple[Spec, ...]

    def __init__(self, *specs: Spec) -> None:
        object.__setattr__(self, "specs", specs)

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(s.expected for s in self.specs)

    def check(self, value: Any, at: str) -> None:
        inner = []
        for spec in self.specs:
            try:
                spec.check(value, at)
                return
            except _Mismatch as bad:
                inner.append(bad)
        deeper = [bad for bad in inner if bad.at != at]  # the value had the right kind for one spec: say where
        if len(deeper) == 1:
            raise deeper[0]
        self.refuse(at, value)


@dataclass(frozen=True)
class ListOf(Spec):
    """A list (or, from a torch file, a tuple) of `min_len` to `max_len` items, each fitting `item`."""

    item: Spec
    max_len: int
    min_len: int = 0

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"a list of {self.min_len} to {self.max_len} items, each {self.item.expected}"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, (list, tuple)) or not self.min_len <= len(value) <= self.max_len:
            self.refuse(at, value)
        if isinstance(self.item, _LEAVES):
            # A leaf names no field inside an item, so the item's path is only spelled out when it does not fit:
            # a placement of many ops is checked without building a path string per op.
            for i, item in enumerate(value):
                try:
                    self.item.check(item, at)
                except _Mismatch as bad:
                    raise _Mismatch(join(at, i), bad.found, bad.expected) from None
            return
        for i, item in enumerate(value):
            self.item.check(item, join(at, i))


@dataclass(frozen=True)
class MapOf(Spec):
    """An object of at most `max_len` fields with text names of at most `max_key` characters, each value
    fitting `value`."""

    value: Spec
    max_len: int
    max_key: int = 1000

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"an object of at most {self.max_len} named fields, each {self.value.expected}"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict) or len(value) > self.max_len:
            self.refuse(at, value)
        for key, item in value.items():
            if not isinstance(key, str) or len(key) > self.max_key:
                self.refuse(at, value, f"field names that are text of at most {self.max_key} characters")
            self.value.check(item, join(at, key))


@dataclass(frozen=True)
class Record(Spec):
    """An object with the `required` fields, maybe the `optional` ones, each fitting its spec; any other field
    must fit `others` (None: no other field is accepted)."""

    required: Mapping[str, Spec]
    optional: Mapping[str, Spec] = field(default_factory=dict)
    others: Spec | None = Anything()
    what: str | None = None

    @property
    def expected(self) -> str:  # type: ignore[override]
        if self.what:
            return self.what
        names = list(self.required) or list(self.optional)
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return f"an object with fields {shown}" if names else "an object"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict):
            self.refuse(at, value)
        for key, spec in self.required.items():
            if key not in value:
                self.refuse(join(at, key), _MISSING, spec.expected)
            spec.check(value[key], join(at, key))
        for key, item in value.items():
            if key in self.required:
                continue
            if not isinstance(key, str):
                self.refuse(at, value, "an object whose field names are text")
            spec = self.optional.get(key, self.others)
            if spec is None:
                known = ", ".join(list(self.required) + list(self.optional))
                self.refuse(join(at, key), item, f"no such field (the fields are {known})")
            spec.check(item, join(at, key))


@dataclass(frozen=True)
class Tagged(Spec):
    """An object whose field `key` names which of `variants` (tag -> spec of the whole object) it must fit."""

    key: str
    variants: Mapping[str, Spec]

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"an object whose {self.key} is one of " + ", ".join(repr(tag) for tag in self.variants)

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict):
            self.refuse(at, value)
        tag = value.get(self.key, _MISSING)
        if not isinstance(tag, str) or tag not in self.variants:
            self.refuse(join(at, self.key), tag, "one of " + ", ".join(repr(t) for t in self.variants))
        self.variants[tag].check(value, at)


@dataclass(frozen=True)
class InstanceOf(Spec):
    """An instance of `cls` (e.g. a tensor from a torch file), described as `what`."""

    cls: type
    what: str

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, self.cls):
            self.refuse(at, value)


@dataclass(frozen=True)
class Plain(Spec):
    """Plain data: null, booleans, numbers (integers within int64; any float but a JSON literal beyond a float's
    range, so that from a JSON file every float is finite, while a torch file's space keeps its infinite bounds),
    text of at most `max_len` characters, and lists and objects (text field names) of at most `max_len` items,
    nested at most `max_depth` deep."""

    max_depth: int = 6
    max_len: int = 10_000

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"plain data (null, true/false, numbers, text, lists, objects; at most {self.max_depth} deep)"

    def check(self, value: Any, at: str, depth: int = 0) -> None:
        if value is None or isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if not _fits(value, finite=False):
                self.refuse(at, value, "a number (integers within int64, floats within a float's range)")
            return
        if isinstance(value, str):
            if len(value) > self.max_len:
                self.refuse(at, value, f"text of at most {self.max_len} characters")
            return
        if not isinstance(value, (list, tuple, dict)):
            self.refuse(at, value)
        if depth >= self.max_depth:
            self.refuse(at, value, f"plain data nested at most {self.max_depth} deep")
        if len(value) > self.max_len:
            self.refuse(at, value, f"a list or object of at most {self.max_len} items")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict) and not isinstance(key, str):
                self.refuse(at, value, "an object whose field names are text")
            self.check(item, join(at, key), depth + 1)


@dataclass(frozen=True)
class Where(Spec):
    """A value fitting `spec` for which ``test(value)`` is true too; `expected` says what the test asks."""

    spec: Spec
    test: Callable[[Any], bool]
    expected: str = "a valid value"  # type: ignore[assignment]

    def check(self, value: Any, at: str) -> None:
        self.spec.check(value, at)
        if not self.test(value):
            self.refuse(at, value)


_LEAVES = (Integer, Number, Boolean, Text, InstanceOf, Anything)


#: A model's or an agent's name as records, placed folders and file names carry it: text without a path
#: separator (`show` names its pictures after them; `placement_gym.files.safe_name` makes file names).
NAME = Text(min_len=1, max_len=500, pattern=r"[^/\\\x00]+", what="a name of 1 to 500 characters without / or \\")
