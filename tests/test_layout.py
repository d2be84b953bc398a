"""The package's shape (issue 25): short functions, modules under 600 lines, no import cycle
(imports inside functions counted), the test bench imported only by the CLI and itself, and
``import ticdc_spark`` cheap: neither pyarrow nor pyspark, and the codecs decode without them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ticdc_spark"
MAX_FUNCTION, MAX_MODULE = 40, 600
BENCH = "ticdc_spark.testing"
BENCH_USERS = ("ticdc_spark.cli", "ticdc_spark.testing")


@cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


@cache
def _tree(name: str) -> ast.Module:
    return ast.parse(_modules()[name].read_text(encoding="utf-8"))


def _imports(name: str) -> set[str]:
    """The package's modules ``name`` imports, anywhere in it (a package: its __init__)."""
    modules = _modules()
    package = name if modules[name].name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_function_over_40_lines() -> None:
    long = []
    for name, path in _modules().items():
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {length}")
    assert long == []


def test_no_module_over_600_lines() -> None:
    long = [
        f"{path.relative_to(SRC)}: {lines}"
        for path in _modules().values()
        if (lines := path.read_text(encoding="utf-8").count("\n")) > MAX_MODULE
    ]
    assert long == []


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for name in _modules():
        graph[name] = _imports(name)
    assert _cycles(graph) == []


def test_the_cycle_check_sees_imports_inside_functions() -> None:
    """(the check itself: two modules that import each other, one of them lazily)"""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert _cycles(graph) == [["a", "b"]]
    assert "ticdc_spark.codec.avro.batch" in _imports("ticdc_spark.codec.avro.decoder")


def test_only_the_cli_and_the_bench_import_the_test_bench() -> None:
    users = [
        name
        for name in _modules()
        if not name.startswith(BENCH_USERS) and any(m.startswith(BENCH) for m in _imports(name))
    ]
    assert users == []


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_importing_the_package_imports_neither_pyarrow_nor_pyspark() -> None:
    out = _run(
        """
        import sys
        import ticdc_spark, ticdc_spark.codec, ticdc_spark.sql, ticdc_spark.cli
        heavy = ("pyarrow", "numpy", "pyspark", "pandas")
        print(sorted(m for m in sys.modules if m.partition(".")[0] in heavy))
        print(ticdc_spark.__version__)
        """
    )
    loaded, version = out.splitlines()
    assert loaded == "[]"
    assert version and version[0].isdigit()


@pytest.mark.parametrize(
    ("protocol", "options"),
    [
        ("open-protocol", {}),
        ("canal-json", {"enable-tidb-extension": "true"}),
        ("debezium", {}),
        ("simple", {}),
        ("simple", {"encoding-format": "avro"}),
    ],
)
def test_the_codecs_decode_without_pyarrow(protocol: str, options: dict[str, str]) -> None:
    """As an install without the spark extra: importing pyarrow, numpy or pyspark fails."""
    out = _run(
        f"""
        import sys

        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in ("pyarrow", "numpy", "pyspark", "pandas"):
                    raise ModuleNotFoundError(name)

        sys.meta_path.insert(0, Absent())
        from ticdc_spark import RowChange, make_decoder, make_encoder
        from ticdc_spark.testing.workload import Workload

        events = list(Workload(seed=3, rows=40, tables=2).events())
        messages = make_encoder({protocol!r}, {options!r}).encode(events)
        decoder = make_decoder({protocol!r}, {options!r})
        rows = [e for m in messages for e in decoder.decode(m) if isinstance(e, RowChange)]
        print(len(rows), sum(isinstance(e, RowChange) for e in events))
        """
    )
    decoded, sent = out.split()
    assert decoded == sent != "0"
