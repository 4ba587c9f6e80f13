"""A Griffe extension: Falkirk's docstrings, written for Sphinx, as Markdown.

The docstrings use Sphinx's Python roles (``:class:`~falkirk.io.FileSource```,
``:meth:`Engine.stop <falkirk.runtime.Engine.stop>```, ``:mod:``, ``:func:``,
``:attr:``, ``:data:``, ``:exc:``...), RST literal blocks (a paragraph ending in
``::``) and RST simple tables (``=====  =====``). mkdocstrings renders docstrings
as Markdown, so this extension rewrites each docstring's text before it is rendered:

* a role becomes an optional cross-reference, ``<autoref identifier="full.path"
  optional>`title`</autoref>`` (mkdocs-autorefs): a link when the target is on a
  page of the site, the title as inline code otherwise - never a broken link, so
  ``mkdocs build --strict`` stays clean. Sphinx's display rules hold: ``~a.b.c``
  shows ``c``, ``Title <a.b.c>`` shows ``Title``, ``!a.b`` links nowhere, and a
  function or method gets ``()``. A short target (``:class:`Pipeline```,
  ``:meth:`run```) is resolved in the docstring's scope as Python would (the
  object's members, its module's names and imports, its parents').
* a literal block becomes a fenced code block, and ``text::`` becomes ``text:``.
* a simple table becomes a Markdown table.
* ``<`` outside inline code is escaped, so ``<sink>`` in prose is text, not HTML.

Names are resolved only once the whole package is loaded, so :meth:`on_instance`
collects the objects and :meth:`on_package` rewrites them.

mkdocs.yml enables it under ``plugins: mkdocstrings: handlers: python: options:
extensions: [docs/griffe_roles.py]``; it imports only Griffe.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

#: A Sphinx role of the Python domain: ``:class:`target``` (``py:`` prefix allowed).
ROLE = re.compile(r":(?:py:)?(?P<role>class|meth|func|mod|attr|data|exc|obj|const|type):`(?P<body>[^`]+)`")
#: ``Title <target>`` inside a role.
TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", re.DOTALL)
#: Inline code in Markdown (and RST literals): ````x```` or ```x```.
CODE = re.compile(r"``.+?``|`[^`\n]+`", re.DOTALL)
#: The border of an RST simple table.
BORDER = re.compile(r"^(?P<indent> *)=+(?: +=+)+ *$")
#: Roles whose Sphinx rendering ends in ``()``.
CALLABLE_ROLES = {"func", "meth"}
#: Placeholders for converted roles while the rest of the text is escaped.
_HOLE = "\x00{}\x00"
_HOLES = re.compile("\x00(\\d+)\x00")


class SphinxRoles(griffe.Extension):
    """Rewrites Sphinx roles, literal blocks and simple tables in docstrings."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[griffe.Object] = []

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Remember ``obj``: its names resolve once its package is loaded."""
        if obj.docstring is not None:
            self._pending.append(obj)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of every object of ``pkg`` collected so far."""
        mine = [o for o in self._pending if o.path == pkg.path or o.path.startswith(pkg.path + ".")]
        self._pending = [o for o in self._pending if o not in mine]
        for obj in mine:
            assert obj.docstring is not None
            obj.docstring.value = markdown(obj.docstring.value, lambda name, o=obj: resolve(o, name))


def resolve(obj: griffe.Object, name: str) -> str | None:
    """The full path of ``name`` as seen from ``obj``'s scope (None: unknown)."""
    if name.startswith("falkirk."):
        return name
    head, _, rest = name.partition(".")
    try:
        path = obj.resolve(head)
    except (griffe.NameResolutionError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return f"{path}.{rest}" if rest else path


def markdown(text: str, resolver: Any) -> str:
    """``text`` (a docstring in Sphinx's dialect) as Markdown; ``resolver(name)``
    gives a role target's full path, or None."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    prose: list[str] = []
    while i < len(lines):
        line = lines[i]
        if BORDER.match(line):
            end = table_end(lines, i)
            if end is not None:
                out.append(inline("\n".join(prose), resolver))
                prose = []
                out.append(table(lines[i : end + 1], resolver))
                i = end + 1
                continue
        if line.rstrip().endswith("::") and not line.rstrip().endswith(":::"):
            block, after = literal_block(lines, i)
            if block is not None:
                prose.append(literal_intro(line))
                out.append(inline("\n".join(prose), resolver))
                prose = []
                out.append(block)
                i = after
                continue
        prose.append(line)
        i += 1
    out.append(inline("\n".join(prose), resolver))
    return "\n".join(part for part in out if part is not None)


def literal_intro(line: str) -> str:
    """The paragraph line that opens a literal block, as Sphinx shows it."""
    stripped = line.rstrip()
    if stripped.strip() == "::":
        return ""
    if stripped.endswith(" ::"):
        return stripped[:-3]
    return stripped[:-1]


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def literal_block(lines: list[str], at: int) -> tuple[str | None, int]:
    """The literal block after line ``at`` (which ends in ``::``) as a fenced code
    block, and the index of the first line after it; (None, at) if none follows."""
    base = indent_of(lines[at])
    j = at + 1
    body: list[str] = []
    while j < len(lines) and (not lines[j].strip() or indent_of(lines[j]) > base):
        body.append(lines[j])
        j += 1
    while body and not body[-1].strip():
        body.pop()
        j -= 1
    content = [b for b in body if b.strip()]
    if not content:
        return None, at
    cut = min(indent_of(b) for b in content)
    pad = " " * base
    plain = "\n".join(b[cut:] for b in body).strip("\n")
    code = "\n".join(pad + b if b.strip() else "" for b in plain.splitlines())
    return f"\n{pad}```{language(plain)}\n{code}\n{pad}```\n", j


def language(code: str) -> str:
    """``python`` for a block that parses as Python, else ``text``."""
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"


def table_end(lines: list[str], at: int) -> int | None:
    """The index of the border that closes the simple table opening at ``at``."""
    borders = [j for j in range(at + 1, len(lines)) if BORDER.match(lines[j]) and lines[j].strip() == lines[at].strip()]
    if not borders:
        return None
    # A header (three borders) when the second border comes right after a row or two
    # and a third follows; otherwise a table without a header (two borders).
    if len(borders) >= 2 and borders[0] - at <= 3:
        return borders[1]
    return borders[0]


def table(lines: list[str], resolver: Any) -> str:
    """An RST simple table (its lines, borders included) as a Markdown table."""
    border = lines[0]
    starts = [m.start() for m in re.finditer(r"=+", border)]
    inner = [j for j, line in enumerate(lines) if BORDER.match(line)]
    header_rows: list[list[str]] = []
    body = lines[1:-1]
    if len(inner) == 3:
        header_rows = rows(lines[1 : inner[1]], starts)
        body = lines[inner[1] + 1 : -1]
    data = rows(body, starts)
    width = len(starts)
    head = header_rows[0] if header_rows else [" "] * width

    def render(cells: list[str]) -> str:
        return "| " + " | ".join(inline(c, resolver).replace("|", "\\|") or " " for c in cells) + " |"

    lines_out = [render(head), "|" + "---|" * width, *(render(r) for r in data)]
    return "\n" + "\n".join(lines_out) + "\n"


def rows(lines: list[str], starts: list[int]) -> list[list[str]]:
    """Table rows from their lines: a line whose first column is empty continues
    the row above (a cell's text then joins with a space, or without the hyphen of
    a word broken inside an unfinished literal)."""
    result: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        cells = [""] * len(starts)
        for m in re.finditer(r"\S+(?: \S+)*", line):
            column = max(k for k, s in enumerate(starts) if s <= m.start() + 2) if m.start() + 2 >= starts[0] else 0
            cells[column] = (cells[column] + " " + m.group()).strip()
        if result and not cells[0]:
            for k, cell in enumerate(cells):
                if cell:
                    result[-1][k] = join(result[-1][k], cell)
        elif result and unfinished(result[-1][0]):
            for k, cell in enumerate(cells):
                result[-1][k] = join(result[-1][k], cell)
        else:
            result.append(cells)
    return result


def unfinished(cell: str) -> bool:
    """Whether a cell's text stops inside a literal or a parenthesis (so the next
    line goes on with it, whatever its first column holds)."""
    return cell.count("`") % 2 == 1 or cell.count("(") > cell.count(")")


def join(before: str, after: str) -> str:
    if not before:
        return after
    if not after:
        return before
    if before.endswith("-") and before.count("`") % 2 == 1:
        return before[:-1] + after
    return before + " " + after


def inline(text: str, resolver: Any) -> str:
    """Roles as cross-references, ``<`` outside code escaped."""
    holes: list[str] = []

    def role(match: re.Match[str]) -> str:
        holes.append(reference(match["role"], match["body"], resolver))
        return _HOLE.format(len(holes) - 1)

    text = ROLE.sub(role, text)
    parts: list[str] = []
    last = 0
    for m in CODE.finditer(text):
        parts.append(text[last : m.start()].replace("<", "&lt;"))
        parts.append(m.group())
        last = m.end()
    parts.append(text[last:].replace("<", "&lt;"))
    return _HOLES.sub(lambda m: holes[int(m[1])], "".join(parts))


def reference(role: str, body: str, resolver: Any) -> str:
    """One role, ``:role:`body```, as Markdown."""
    body = " ".join(body.split())
    titled = TITLED.fullmatch(body)
    target = (titled["target"] if titled else body).strip()
    link = not target.startswith("!")
    target = target.lstrip("!")
    short = target.startswith("~")
    target = target.lstrip("~").lstrip(".")
    if titled and titled["title"]:
        title = titled["title"]
        shown = title.replace("<", "&lt;")
    else:
        title = target.rsplit(".", 1)[-1] if short else target
        if role in CALLABLE_ROLES:
            title += "()"
        shown = f"`{title}`"
    path = resolver(target) if link else None
    if path is None:
        return shown
    return f'<autoref identifier="{path}" optional>{shown}</autoref>'
