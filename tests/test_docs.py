"""The docs site and what the README and the docs pages quote: the site builds with no warning, every quoted
``placement-gym`` command parses with today's CLI, every repository path and relative link they cite exists, and
the API reference covers every public module.

The pages are read as Markdown (markdown-it, MyST's own parser): commands and paths are taken from fenced code
blocks, inline code spans and link targets, not from a guess at the raw text.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest
from markdown_it import MarkdownIt

from placement_gym.cli import _Checked

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def markdown_files() -> list[Path]:
    """README.md and every Markdown page of docs/ (the build folder left out)."""
    pages = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.relative_to(DOCS).parts)
    return [ROOT / "README.md", *pages]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


# ------------------------------------------------------------------------------------------------ the build
@pytest.mark.slow
def test_docs_site_builds_without_warnings(tmp_path):
    """The Sphinx build of docs/ (MyST pages, autodoc API reference) with warnings as errors: a broken link or
    cross-reference, a page missing from the toctree or a toctree entry without its page, and a docstring that
    is not valid reStructuredText all fail it."""
    out = tmp_path / "html"
    result = subprocess.run(
        # -j auto: the pages are read on every core (the rest of the suite runs on one)
        [sys.executable, "-m", "sphinx", "-j", "auto", "-W", "--keep-going", "-b", "html", "-q", "-d",
         str(tmp_path / "doctrees"), str(DOCS), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, f"sphinx-build -W failed (exit {result.returncode}):\n{result.stderr}"
    assert (out / "index.html").is_file() and (out / "api.html").is_file()


# ------------------------------------------------------------------------------------------------ reading pages
class Snippet(NamedTuple):
    """Text quoted in a page: a code block's content (``info``: its language) or an inline code span, with the
    line it starts on."""

    path: Path
    line: int
    text: str
    fenced: bool
    info: str


_MD = MarkdownIt("commonmark")
#: MyST directives whose body is code (``{code-block} bash``) and ones whose body is neither code nor Markdown
CODE_DIRECTIVES = {"{code-block}", "{code}", "{sourcecode}"}
OPAQUE_DIRECTIVES = {"{toctree}", "{eval-rst}", "{automodule}", "{autoclass}", "{autofunction}", "{include}",
                     "{literalinclude}", "{image}", "{figure}", "{math}", "{list-table}", "{csv-table}"}


class Block(NamedTuple):
    """A Markdown token of a page with its lines in the page (0-based, end excluded) and, for code, its language."""

    token: object
    start: int
    end: int
    language: str


def blocks(path: Path) -> Iterator[Block]:
    """The tokens of a page, the Markdown inside a MyST directive (``{note}``, ``{admonition}``) included."""
    yield from _walk(path.read_text(encoding="utf-8"), 0)


def _walk(text: str, offset: int) -> Iterator[Block]:
    for token in _MD.parse(text):
        if token.map is None:
            continue
        start, end = offset + token.map[0], offset + token.map[1]
        info = token.info.strip().split() if token.type == "fence" else []
        if info and info[0].startswith("{"):
            if info[0] in CODE_DIRECTIVES:
                yield Block(token, start, end, (info[1:] or [""])[0].lower())
            elif info[0] not in OPAQUE_DIRECTIVES:
                yield from _walk(token.content, start + 1)
            continue
        yield Block(token, start, end, (info or [""])[0].lower())


def _shown(path: Path, inline: tuple[str, ...], html: bool = False) -> Iterator[tuple[Block, int, str, bool]]:
    """``(block, line, text, code block)`` of a page: every fenced / indented code block (its content, from the line
    it starts on), every child of an inline token whose type is in `inline` (``"code_inline"``, ``"text"``) and,
    if `html`, every HTML block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in blocks(path):
        token = block.token
        if token.type in ("fence", "code_block"):
            # a fence's content starts on the line after its opening line
            yield block, block.start + (2 if token.type == "fence" else 1), token.content, True
        elif token.type == "inline":
            for child in token.children or []:
                if child.type in inline:
                    yield block, _line_of(lines, block, child.content), child.content, False
        elif html and token.type == "html_block":
            yield block, block.start + 1, token.content, False


def snippets(path: Path) -> Iterator[Snippet]:
    """Every fenced / indented code block and every inline code span of a page."""
    for block, line, text, code in _shown(path, ("code_inline",)):
        yield Snippet(path, line, text, code, block.language if code else "")


def _line_of(lines: list[str], block: Block, content: str) -> int:
    """The line (1-based) where an inline code span starts in its block (found by its first two words), else the
    block's first line."""
    head = " ".join(content.split()[:2])
    for i in range(block.start, block.end):
        if head in " ".join(" ".join(lines[i:i + 2]).split()):
            return i + 1
    return block.start + 1


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every Markdown link and image of a page."""
    for block in blocks(path):
        if block.token.type != "inline":
            continue
        for child in block.token.children or []:
            if child.type == "link_open":
                yield block.start + 1, child.attrs.get("href", "")
            elif child.type == "image":
                yield block.start + 1, child.attrs.get("src", "")


# ------------------------------------------------------------------------------------------------ CLI commands
#: fenced blocks in these languages hold no shell commands (a ``"placement-gym"`` in Python code is a string)
NOT_SHELL = {"python", "py", "python3", "pycon", "ipython", "json", "yaml", "yml", "toml", "ini", "cfg", "csv", "diff"}
#: tokens that end a command: another command follows, or its output is redirected
COMMAND_ENDS = {"&&", "||", ";", "|", "&", ">", ">>", "2>", "2>&1", "&>", "<"}
#: a redirection written against its target (``>out.txt``, ``2>/dev/null``, ``&>log``)
_REDIRECTION = re.compile(r"^(\d?>|&>|<)")
#: words that may stand before the command itself
PREFIXES = {"nice", "time", "nohup", "env", "exec", "sudo"}


class Command(NamedTuple):
    path: Path
    line: int
    text: str
    argv: list[str]


def _logical_lines(text: str, line: int) -> Iterator[tuple[int, str]]:
    """The lines of a block with backslash continuations joined, each with its first line number."""
    start, parts = line, []
    for i, raw in enumerate(text.splitlines()):
        if not parts:
            start = line + i
        if raw.rstrip().endswith("\\"):
            parts.append(raw.rstrip()[:-1])
            continue
        parts.append(raw)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def _words(text: str) -> list[str]:
    """Shell words of a line, ``#`` comments dropped; a line that is not valid shell (an odd quote) is split on
    spaces."""
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split("#")[0].split()


def commands_in(snippet: Snippet) -> Iterator[Command]:
    """Every ``placement-gym ...`` command of a snippet, as argv for the parser (see
    `test_quoted_commands_parse_with_todays_cli` for the conventions)."""
    if snippet.fenced and snippet.info in NOT_SHELL:
        return
    for line, text in _logical_lines(snippet.text, snippet.line):
        stripped = text.strip()
        if stripped.startswith(("$ ", "> ", "% ")):  # a shell prompt
            stripped = stripped[2:]
        if not stripped.startswith("placement-gym") and " placement-gym" not in stripped:
            continue
        # in a fenced listing, a run of three or more spaces before a word starts a note in the margin
        words = _words(re.split(r"\s{3,}(?=[^\s-])", stripped)[0] if snippet.fenced else stripped)
        while words:
            # one command: up to the next word that ends it
            end = next((i for i, w in enumerate(words) if w in COMMAND_ENDS or _REDIRECTION.match(w)), len(words))
            command, words = words[:end], words[end + 1:]
            # environment assignments and wrappers before the program (OMP_NUM_THREADS=1, nice -n 19)
            while command and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", command[0]) or command[0] in PREFIXES
                               or (command[0].startswith("-") and command[0] != "placement-gym")
                               or re.fullmatch(r"\d+", command[0])):
                command = command[1:]
            if not command or command[0] != "placement-gym":
                continue
            argv = command[1:]
            # a word that opens a parenthesis starts a note in the margin, not an argument
            cut = next((i for i, w in enumerate(argv) if w.startswith("(")), len(argv))
            argv = argv[:cut]
            if argv:
                yield Command(snippet.path, line, "placement-gym " + " ".join(command[1:]), argv)


def _parser_argv(argv: list[str]) -> list[str] | None:
    """argv as the parser gets it, or None for a command written with a placeholder in angle brackets."""
    if any("<" in w and ">" in w for w in argv):
        return None
    out = []
    for word in argv:
        if word in ("...", "\u2026"):
            continue  # an elision: what is written around it must parse
        # [--json], [--agent A --model M]: optional parts are parsed as if given (CPU[...] is a device spec)
        if word.startswith("["):
            word = word[1:]
        if word.endswith("]") and "[" not in word:
            word = word[:-1]
        if word:
            out.append(word)
    return out


def _fill_placeholders(parser, argv: list[str]) -> list[str]:
    """A placeholder in capitals given to an option that takes a number or one of fixed choices (``--seed S``,
    ``--objective O``, ``--budget K``: one the parser checks, `placement_gym.cli._Checked`) replaced by a value of
    that kind; any other word is left as written (``--profile P``, ``--devices CPU GPU``, ``show FILE``)."""
    sub = next((a.choices.get(argv[0]) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None:
        return argv
    out, option = list(argv), None
    for i, word in enumerate(argv[1:], 1):
        if word.startswith("-"):
            option = word.split("=")[0]
            continue
        if option is None or not re.fullmatch(r"[A-Z][A-Z0-9_]*", word):
            continue
        names = [name for name in sub._option_string_actions if name == option] or \
            [name for name in sub._option_string_actions if name.startswith(option)]
        if len(names) != 1:
            continue
        action = sub._option_string_actions[names[0]]
        if action.choices:
            out[i] = str(list(action.choices)[0])
        elif action.type in (int, float):
            out[i] = "0"
        elif isinstance(action, _Checked):  # a number checked as it is parsed (--budget K, --seeds N)
            out[i] = next((value for value in ("0", "1") if _accepts(action.check, value)), word)
    return out


def _accepts(check, value: str) -> bool:
    try:
        check(value)
    except ValueError:
        return False
    return True


def quoted_commands() -> list[Command]:
    return [command for path in markdown_files() for snippet in snippets(path) for command in commands_in(snippet)]


def test_quoted_commands_parse_with_todays_cli():
    """Every ``placement-gym ...`` command quoted in README.md and the docs pages (fenced shell blocks and inline
    code spans) parses with today's CLI (`placement_gym.cli.build_parser`).

    How a command is read:

    - backslash continuations are joined; shell prompts (``$ ``), ``#`` comments, ``VAR=value`` and ``nice -n 19``
      prefixes are dropped; a command ends at ``&&``, ``||``, ``;``, ``|``, ``&`` or a redirection (``>``), and a
      command after ``&&`` is checked too (``pip install -e . && placement-gym compare ...``);
    - a word that starts with ``(`` begins a note after the command (``... --budget 0   (zero-shot)``);
    - ``[--json]``: an optional part in square brackets is parsed as if given; ``...`` is an elision and is
      dropped, so what is written around it must still parse;
    - in a fenced listing, three or more spaces before a word start a note in the margin (aligned descriptions);
    - a command with a placeholder in angle brackets (``placement-gym show <file>``) is not checked; a
      placeholder in capitals is parsed as written (``show FILE``, ``--profile P``), or, given to an option
      that takes a number or one of fixed choices (``--seed S``, ``--objective O``), as a value of that kind.
    """
    from placement_gym.cli import build_parser

    commands = quoted_commands()
    assert commands, "no placement-gym command found in README.md and docs/ (is the extraction broken?)"
    failures = []
    for command in commands:
        argv = _parser_argv(command.argv)
        if argv is None:
            continue
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                parser = build_parser()
                parser.parse_args(_fill_placeholders(parser, argv))
        except SystemExit as exc:
            if exc.code not in (0, None):
                message = stderr.getvalue().strip().splitlines()[-1:] or ["(no message)"]
                failures.append(f"{where(command.path, command.line)}: {command.text}\n    {message[0]}")
    assert not failures, "quoted commands that today's CLI refuses:\n" + "\n".join(failures)


# ------------------------------------------------------------------------------------------------ cited paths
#: repository folders whose paths the pages cite as text (``benchmarks/results/x.json``, ``agents/hsdag/``)
CITED_ROOTS = ("benchmarks", "examples", "docs", "tests", "placement_gym", "agents")
_CITED = re.compile(r"(?<![\w./:~\[-])(?:" + "|".join(CITED_ROOTS) + r")/[\w./*<>{}\[\]\-]*")
#: a word in capitals in a path stands for a name (``benchmarks/results/transfer_P_go.json``, ``NAME.json``)
_PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9]*(?![a-z0-9])")


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of everything a page shows: prose, inline code and code blocks, link targets left out (the
    link test checks them) and MyST directives that name pages or modules (a toctree: the build checks it)."""
    for _, line, text, code in _shown(path, ("text", "code_inline"), html=True):
        if code:
            yield from ((line + i, row) for i, row in enumerate(text.splitlines()))
        else:
            yield line, text


def cited_paths(path: Path) -> Iterator[tuple[int, str]]:
    """(line, path) of every repository path written out in a page, in prose, inline code or a code block."""
    for line, text in _texts(path):
        for match in _CITED.finditer(text):
            yield line, match.group(0).rstrip(".,:;")


def _variants(cited: str) -> list[str]:
    """A path with optional parts in square brackets (``x[_two_cores].json``): the path without them and with
    them."""
    if "[" not in cited:
        return [cited]
    return [re.sub(r"\[[^\]]*\]", "", cited), re.sub(r"\[([^\]]*)\]", r"\1", cited)]


def path_exists(cited: str, page: Path) -> bool:
    """Whether a cited path exists: from the repository root, or (pages name each other so) from the page's
    folder. A path whose name has a placeholder (``NAME``, ``<name>``, ``*``, ``{a,b}``, ``...``) is a pattern,
    not a file: the folder it is in must exist."""
    for variant in _variants(cited):
        if any(c in variant for c in "*<>{}") or "..." in variant or _PLACEHOLDER.search(variant):
            folder = variant
            while folder and (any(c in folder for c in "*<>{}") or "..." in folder or _PLACEHOLDER.search(folder)):
                folder = folder.rpartition("/")[0]
            if not folder or not any((base / folder).is_dir() for base in (ROOT, page.parent)):
                return False
        elif not any((base / variant).exists() for base in (ROOT, page.parent)):
            return False
    return True


def test_cited_repository_paths_exist():
    """Every repository path that README.md and the docs pages cite (``benchmarks/...``, ``examples/...``,
    ``docs/...``, ``tests/...``, ``placement_gym/...``, ``agents/...``, in prose, code or a command) exists.

    Conventions: ``[...]`` in a path marks an optional part (both forms must exist); a path with a placeholder
    (a word in capitals such as ``NAME`` or ``P``, ``<name>``, a wildcard ``*`` or ``{a,b}``, or ``...``) names
    files by a pattern, and the folder before the placeholder must exist."""
    missing = [f"{where(page, line)}: {cited}"
               for page in markdown_files() for line, cited in cited_paths(page)
               if not path_exists(cited, page)]
    assert not missing, "cited paths that do not exist in the repository:\n" + "\n".join(missing)


def _slug(title: str) -> str:
    """A heading's anchor as GitHub and MyST (``myst_heading_anchors``) make it."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def heading_anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub and MyST number repeated titles (``title``, ``title-1``)."""
    anchors: set[str] = set()
    tokens = _MD.parse(path.read_text(encoding="utf-8"))
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[i + 1]
            title = "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))
            slug, n = _slug(title), 0
            while (slug if n == 0 else f"{slug}-{n}") in anchors:
                n += 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_relative_links_resolve():
    """Every relative link and image of README.md and the docs pages points at a file or folder of the
    repository, and a ``#section`` into a Markdown page names one of its headings (the Sphinx build checks the
    docs pages' links too; this covers README.md, which the site does not include)."""
    broken = []
    for page in markdown_files():
        for line, target in links(page):
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            file_part = file_part.split("?")[0]
            resolved = (page.parent / file_part).resolve() if file_part else page
            if not resolved.exists():
                broken.append(f"{where(page, line)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved):
                broken.append(f"{where(page, line)}: {target} (no heading with that anchor)")
    assert not broken, "links that do not resolve:\n" + "\n".join(broken)


# ------------------------------------------------------------------------------------------------ API reference
def test_api_reference_covers_every_public_module():
    """docs/api.md documents every public module of `placement_gym` and `agents` (a module whose name has no
    leading underscore); `placement_gym.cli` and the modules of its `placement_gym.commands` are the command,
    documented on the command-line page."""
    documented = set(re.findall(r"automodule::\s+(\S+)", (DOCS / "api.md").read_text(encoding="utf-8")))
    modules = set()
    for package in ("placement_gym", "agents"):
        for file in (ROOT / package).rglob("*.py"):
            parts = file.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not any(part.startswith("_") for part in parts):
                modules.add(".".join(parts))
    command = {m for m in modules if m == "placement_gym.cli" or m.startswith("placement_gym.commands")}
    missing = sorted(modules - documented - command)
    assert not missing, f"public modules missing from docs/api.md: {missing}"
    stale = sorted(documented - modules)
    assert not stale, f"docs/api.md documents modules that do not exist: {stale}"
