"""No module imports from a layer above its own: demos (the engine) < pages/ui < pages/shell < page scripts, and
harness < bench and tests. Read from the source (every import, at the top or inside a function), not by running it."""

import ast

import pytest

from demos.registry import ROOT

# folder -> module prefixes its files must never import
FORBIDDEN = {
    "demos": ("streamlit", "pages", "tests", "bench", "harness"),
    "pages/ui": ("pages.shell", "tests", "bench", "harness"),
    "pages/shell": ("tests", "bench", "harness"),
    "harness": ("tests", "bench", "pages"),
    "bench": ("tests",),
}


def imported_modules(path) -> set[str]:
    """Every module a file imports by absolute name (`from x import y` counts as x and x.y)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def breaks_layer(module: str, forbidden: tuple[str, ...]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in forbidden)


@pytest.mark.parametrize("folder", FORBIDDEN)
def test_no_module_imports_from_a_layer_above(folder):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, folder
    wrong = [f"{path.relative_to(ROOT)} imports {module}" for path in files
             for module in sorted(imported_modules(path)) if breaks_layer(module, FORBIDDEN[folder])]
    assert not wrong, wrong


def test_the_check_sees_imports_inside_functions(tmp_path):
    script = tmp_path / "lazy.py"
    script.write_text("def f():\n    from pages.shell import entry\n    import streamlit as st\n")
    assert {"pages.shell", "pages.shell.entry", "streamlit"} <= imported_modules(script)
    assert breaks_layer("pages.shell.entry", FORBIDDEN["pages/ui"])
    assert not breaks_layer("pagesx", ("pages",))


def test_every_browser_module_has_a_measured_time():
    """The browser modules are handed out first, the longest first (tests/conftest.py): a new module gets its time
    measured and written down, not left to the default."""
    from tests.conftest import BROWSER_SECONDS

    modules = {p.name for p in (ROOT / "tests" / "browser").glob("test_*.py")}
    assert modules == set(BROWSER_SECONDS)
