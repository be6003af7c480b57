"""The package's floor plan: layers that import only downwards, no import cycle, few lazy imports, lint-clean code,
and no committed file that holds a machine's absolute path."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp
from repo import REPO

PACKAGE = REPO / "patterncnn"
LAZY_LIMIT = 15  # function-level imports of the package's own modules outside cli/, each with a comment


def test_import_linter_contract_is_kept():
    lint = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    done = subprocess.run([sys.executable, "-c", lint, "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_no_module_imports_itself_through_a_cycle():
    graph = grimp.build_graph("patterncnn")
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    assert cycles == []


def lazy_own_imports() -> list[tuple[Path, int, str]]:
    """Function-level imports of patterncnn's own modules outside cli/: (file, line, the line's text)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "cli" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text())
        top = {n for stmt in tree.body for n in ast.walk(stmt) if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.If,
                                                                                     ast.Try))}
        lines = path.read_text().splitlines()
        for node in ast.walk(tree):
            own = (isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("patterncnn"))
                   or isinstance(node, ast.Import) and any(a.name.startswith("patterncnn") for a in node.names))
            if own and node not in top:
                found.append((path, node.lineno, lines[node.lineno - 1]))
    return found


def test_few_lazy_imports_of_our_own_modules_each_saying_why():
    lazy = lazy_own_imports()
    assert len(lazy) <= LAZY_LIMIT, lazy
    for path, line, text in lazy:
        assert "#" in text, f"{path}:{line}: a lazy import of our own module needs a comment saying why"


def test_lazy_import_check_sees_a_function_level_import(tmp_path, monkeypatch):
    # the check above must be able to fail: a module with one function-level import of ours is counted
    fake = tmp_path / "patterncnn" / "core"
    fake.mkdir(parents=True)
    (fake / "x.py").write_text("def f():\n    from .labels import LABELS\n    return LABELS\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "patterncnn")
    assert [(p.name, n) for p, n, _ in lazy_own_imports()] == [("x.py", 2)]


def test_the_code_is_lint_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "patterncnn", "tests", "benchmarks"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|tmp|Users|private/var)/[\w.-]+")


def test_no_committed_file_holds_a_machine_path():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    hits = []
    for name in filter(None, files):
        path = REPO / name.decode()
        if not path.is_file() or path.suffix in (".png", ".gz", ".npz", ".onnx", ".pt", ".npy"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        hits += [f"{name.decode()}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    allowed = [h for h in hits if "tests/test_layout.py" in h]  # the pattern above names them
    assert sorted(set(hits) - set(allowed)) == []
