"""MkDocs hook: a reference page lists a namespace's public names, read from the package at build time.

A line ``<!-- public-names: blobstate.spark -->`` in a page becomes one mkdocstrings block per name of that
namespace's ``__all__``, grouped into functions, classes, errors and other objects, each rendered from the object
where it is defined (``blobstate.spark.partitioned.driver.state.partitioned``) under the name users import it by
(``blobstate.spark.partitioned``). No module path is written by hand: a module moved inside the package changes
only where each block reads from. (Rendering the namespace module itself would show a submodule instead of a
function of the same name, ``blobstate.spark.partitioned`` and ``rescale``.) A name whose module another page
renders whole (``::: blobstate.plugin.interfaces``) is linked to it rather than rendered twice.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Any

PLACEHOLDER = re.compile(r"^<!-- public-names: ([\w.]+) -->$", re.M)
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.M)
GROUPS = ("Functions", "Classes", "Errors", "Other objects")
#: modules some page renders whole with a ``::: module`` block (``on_files`` reads them)
rendered_modules: set[str] = set()


def defined_at(namespace: str, name: str, obj: object) -> str:
    """The dotted path of the definition of ``namespace.name`` (``obj``): a function's or class's own module and
    qualified name; for any other object, the module of the package below ``namespace`` that binds it."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if (inspect.isfunction(obj) or inspect.isclass(obj)) and module and qualname:
        return f"{module}.{qualname}"
    top = namespace.split(".")[0] + "."
    for module_name, loaded in sorted(sys.modules.items()):
        if module_name.startswith(top) and module_name != namespace and vars(loaded).get(name) is obj:
            return f"{module_name}.{name}"
    raise LookupError(f"{namespace}.{name}: no module of the package defines it")


def group_of(obj: object) -> str:
    """Which section of the page ``obj`` goes into."""
    if inspect.isclass(obj):
        return "Errors" if issubclass(obj, BaseException) else "Classes"
    return "Functions" if callable(obj) and inspect.isroutine(obj) else "Other objects"


def public_names(namespace: str) -> dict[str, list[tuple[str, str]]]:
    """``{group: [(public name, definition path), ...]}`` of ``namespace.__all__``, in ``__all__``'s order."""
    module = importlib.import_module(namespace)
    groups: dict[str, list[tuple[str, str]]] = {group: [] for group in GROUPS}
    for name in module.__all__:
        obj = getattr(module, name)
        groups[group_of(obj)].append((f"{namespace}.{name}", defined_at(namespace, name, obj)))
    return groups


def blocks(namespace: str) -> str:
    """The Markdown of ``namespace``'s reference: a section per group, a mkdocstrings block per name (a link for a
    name rendered on another page)."""
    out = []
    for group, names in public_names(namespace).items():
        if not names:
            continue
        out.append(f"## {group}\n")
        elsewhere = [(public, path) for public, path in names if path.rsplit(".", 1)[0] in rendered_modules]
        if elsewhere:
            out.append("Documented with their module: " + ", ".join(
                f"[`{public}`][{path}]" for public, path in elsewhere) + ".\n")
        for public, path in names:
            if (public, path) in elsewhere:
                continue
            out.append(f"::: {path}\n    options:\n      heading: \"{public}\"\n      toc_label: \"{public}\"\n"
                       "      heading_level: 3\n      show_root_heading: true\n")
    return "\n".join(out)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs event: note the modules the pages render whole, before any page is expanded."""
    rendered_modules.clear()
    for file in files.documentation_pages():
        rendered_modules.update(DIRECTIVE.findall(file.content_string))
    return files


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand every placeholder of the page (before mkdocstrings reads the blocks)."""
    return PLACEHOLDER.sub(lambda found: blocks(found.group(1)), markdown)
