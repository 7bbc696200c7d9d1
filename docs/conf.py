"""Sphinx configuration of the placement-gym docs site: MyST Markdown pages, the furo theme, and an API reference
read from the docstrings (Google style, ``Args:`` / ``Attributes:`` / ``Returns:``) by autodoc and napoleon.

Build it (the ``docs`` extra installs the tools; tests/test_docs.py runs the same build with warnings as errors)::

    python -m pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html

Nothing here reaches the network: no intersphinx inventories, no remote images.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the repository root first, so that autodoc reads this checkout's `placement_gym` and `agents` (an editable
# install points there too)
sys.path.insert(0, str(ROOT))

from placement_gym._version import __version__  # noqa: E402

# -- Project --------------------------------------------------------------------------------------------------------
project = "placement-gym"
author = "the placement-gym authors"
copyright = "the placement-gym authors"  # noqa: A001  (Sphinx's name)
release = __version__
version = ".".join(__version__.split(".")[:2])

# -- General --------------------------------------------------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
# `name` in a docstring is a cross-reference where Sphinx knows the name, and code text where it does not
default_role = "py:obj"
nitpicky = False

# -- MyST -----------------------------------------------------------------------------------------------------------
# anchors for headings down to level 3, so that [text](page.md#a-section) links resolve (and are checked)
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]

# -- autodoc / napoleon ---------------------------------------------------------------------------------------------
# docs/api.md says per module which members to show (a package's re-exports are documented where they are defined)
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autoclass_content = "class"
# an override without a docstring of its own shows none (not Gymnasium's or SB3's, written for their own sites)
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# `Args:` and `Attributes:` entries as one field list each: several names may share an entry (``seed, device:``),
# which Sphinx's per-name :param:/:ivar: fields would read as a type and a name
napoleon_use_param = False
napoleon_custom_sections = [("Attributes", "params_style")]
napoleon_use_rtype = False
napoleon_attr_annotations = False

# the page's table of contents names an object without its module and class (``reset()``, not the full path)
toc_object_entries_show_parents = "hide"

# -- HTML -----------------------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"placement-gym {release}"
html_static_path: list[str] = []
html_show_sourcelink = False


# -- the project's docstring habits, read as napoleon's Google style ------------------------------------------------
#: ``Attributes (N ops):``, ``Args (besides SB3's ones):``: a section header with a note in parentheses
_NOTED_HEADER = re.compile(r"^(\s*)(Args|Arguments|Attributes|Returns)\s+\((.+)\):\s*$")
#: ``a, b,``: the first line of an entry whose names go on on the next line
_NAMES_CONTINUED = re.compile(r"^\s+[A-Za-z_][\w]*(?:,\s*[A-Za-z_][\w]*)*,\s*$")
#: ``name: description`` (or ``a, b: ...``): an entry of a section that names what it describes
_NAMED_ENTRY = re.compile(r"^([A-Za-z_*][\w*]*(?:,\s*[A-Za-z_*][\w*]*)*):(?:\s+(.*))?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _named_returns(block: list[str]) -> list[tuple[str, list[str]]] | None:
    """The entries of a ``Returns:`` block that names two or more values (``placement: ...`` / ``info: ...``,
    descriptions continued on more-indented lines), or None for a block that describes one value."""
    body = [line for line in block if line.strip()]
    if not body:
        return None
    entry_indent = min(_indent(line) for line in body)
    entries: list[tuple[str, list[str]]] = []
    for line in body:
        if _indent(line) == entry_indent:
            match = _NAMED_ENTRY.match(line.strip())
            if match is None:
                return None
            entries.append((match.group(1), [match.group(2) or ""]))
        else:
            entries[-1][1].append(line.strip())
    return entries if len(entries) >= 2 else None


def _docstring_habits(app, what, name, obj, options, lines: list[str]) -> None:
    """Before napoleon reads a docstring (``autodoc-process-docstring``, edits ``lines`` in place): an entry whose
    names are broken over two lines is joined, and the stars of ``a, **options`` escaped; a section header with a
    note in parentheses becomes the note, then the plain header; a ``Returns:`` section that names several values
    becomes a field list with one item per value (napoleon reads a ``Returns:`` as one value)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        # an entry's names broken over two lines: "learning_rate, baseline," + "max_grad_norm: REINFORCE settings"
        while (i + 1 < len(lines) and _NAMES_CONTINUED.match(lines[i]) and _indent(lines[i + 1]) == _indent(line)
               and _NAMED_ENTRY.match(lines[i + 1].strip())):
            line = f"{line.rstrip()} {lines[i + 1].strip()}"
            i += 1
        entry = _NAMED_ENTRY.match(line.strip())
        if entry and "," in entry.group(1) and "*" in entry.group(1):
            # "backend, devices, **options:": napoleon escapes the stars of a lone *args / **kwargs only
            line = line.replace(entry.group(1), entry.group(1).replace("*", "\\*"), 1)
        noted = _NOTED_HEADER.match(line)
        if noted:
            indent, header, note = noted.groups()
            out += [f"{indent}{note[0].upper()}{note[1:]}.", "", f"{indent}{header}:"]
            i += 1
            continue
        if line.strip() in ("Returns:", "Return:"):
            indent = _indent(line)
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > indent):
                j += 1
            entries = _named_returns(lines[i + 1:j])
            if entries:
                pad = " " * indent
                out.append(f"{pad}:Returns:")
                for names, description in entries:
                    escaped = names.replace("*", r"\*")
                    out.append(f"{pad}    * **{escaped}** -- {description[0]}".rstrip())
                    out += [f"{pad}      {more}" for more in description[1:]]
                out.append("")
                i = j
                continue
        out.append(line)
        i += 1
    lines[:] = out


#: the docstrings of attributes, data and properties as written, by the id of autodoc's list of lines
_AS_WRITTEN: dict[int, list[str]] = {}


def _keep_attribute_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    """Before napoleon: remember an attribute's, data's or property's docstring. Napoleon reads the text before
    a first colon as the type (``#: The hybrid form's search: ...``), which is not how they are written here."""
    if what in ("attribute", "data", "property"):
        _AS_WRITTEN[id(lines)] = list(lines)


def _restore_attribute_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    """After napoleon: give an attribute, data or property its docstring back as written."""
    written = _AS_WRITTEN.pop(id(lines), None)
    if written is not None:
        lines[:] = written


#: pages the HTML builder writes itself: a source page with one of these names is silently replaced by it
_BUILDER_PAGES = ("search", "genindex", "py-modindex")


def _no_shadowed_pages(app, env) -> None:
    """Warn about a page named like a page Sphinx generates (``docs/search.md`` would become the search box's
    results page and its content would be lost)."""
    from sphinx.util import logging

    for page in _BUILDER_PAGES:
        if page in env.found_docs:
            logging.getLogger(__name__).warning(
                "docs/%s.md has the name of the page Sphinx generates as %s.html, which replaces it: rename the "
                "page (and the links to it)", page, page, location=page, type="docs", subtype="shadowed_page")


def setup(app):
    app.connect("env-check-consistency", _no_shadowed_pages)
    # napoleon reads docstrings at priority 500: these run before it and after it
    app.connect("autodoc-process-docstring", _docstring_habits, priority=400)
    app.connect("autodoc-process-docstring", _keep_attribute_docstring, priority=410)
    app.connect("autodoc-process-docstring", _restore_attribute_docstring, priority=600)
