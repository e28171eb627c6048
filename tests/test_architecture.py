"""The module boundaries of docs/architecture.md, checked on the source: no
module imports a private (_name) name of another module, and no modules
import each other in a circle (imports inside functions count too)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "python" / "ccbench"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("ccbench")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod.startswith("ccbench"):
                continue
            names = [a.name for a in node.names]
            # `from m import x as _x` hides a public name behind a private one: counted as private
            names += [a.asname for a in node.names if a.asname and a.asname.startswith("_")]
            subs = [n for n in names if f"{mod}.{n}" in modules]  # `from pkg import module`
            out += [(f"{mod}.{n}", []) for n in subs]
            out.append((mod, [n for n in names if n not in subs]))
    return out


# Exceptions to the rule (none: keep it that way).
KNOWN: set[str] = set()


def test_no_module_imports_a_private_name_of_another():
    modules = _modules()
    bad = []
    for name, path in modules.items():
        for mod, names in _imports(name, path, modules):
            if mod == name:
                continue
            # a private module (`from pkg import _mod`, `import pkg._mod`) counts like a private name;
            # the Rust extension ccbench._core is loaded in one place, ccbench/core.py, by its name
            private_mod = [p for p in mod.split(".")[1:] if p.startswith("_") and not p.startswith("__")]
            if private_mod and not mod.startswith(name + "."):
                bad.append(f"{name} imports {mod}")
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    bad.append(f"{name} imports {mod}.{n}")
    assert not set(bad) - KNOWN, sorted(set(bad) - KNOWN)


def test_no_import_circles():
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for mod, _ in _imports(name, path, modules):
            # importing a.b.c runs a and a.b too, but those are package __init__s listing
            # their members; the edge that matters is to the module itself
            if mod in modules and mod != name:
                deps.add(mod)
        graph[name] = deps

    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cyc = stack[stack.index(d):] + [d]
                # a package's __init__ re-exporting its own modules is not a circle
                if not all(x == cyc[0] or x.startswith(cyc[0] + ".") for x in cyc) and \
                        not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(cyc, cyc[1:])):
                    cycles.append(" -> ".join(cyc))
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, cycles


def test_run_reaches_its_first_run_without_the_analysis_stack(tmp_path):
    """`ccbench run` loads what its first run needs and no more (issue 12: a 10,000-run
    study starts in under a second, bench/study_expand.py): numpy and pyarrow come with the
    first result and the analysis after the runs, multiprocessing only with --jobs.
    (concurrent.futures is not checked: pydantic's import of asyncio brings it.)"""
    study = tmp_path / "s.toml"
    study.write_text('[study]\nname = "s"\nduration = "1s"\n[topology]\nbottleneck = { rate = "10Mbit", delay = "5ms" }\n'
                     '[[flows]]\ncca = "cubic"\n')
    probe = (
        "import os, sys\n"
        "from ccbench.backends.sim import SimBackend\n"
        "def first(self, runspec, stop_flag=None):\n"
        "    heavy = ('numpy', 'pyarrow', 'multiprocessing')\n"
        "    print(' '.join(m for m in heavy if m in sys.modules), file=sys.__stdout__, flush=True)\n"
        "    os._exit(0)\n"
        "SimBackend.run = first\n"
        "from ccbench.cli import main\n"
        "sys.stdout = open(os.devnull, 'w')\n"
        f"main(['run', {str(study)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "sys.exit('no first run')\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(PKG.parent)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "", f"loaded before the first run: {p.stdout.strip()}"
