"""Builds the optional compiled modules; everything else is in pyproject.toml.

``_canal_scan`` is the Spark decode stage's Canal-JSON scanner, ``_values`` the codecs'
per-column loops.  Both are optional: without a C compiler the package installs and runs on
its pure Python paths (``ticdc_spark.codec.canal_json.native_scanner()`` and
``ticdc_spark.codec.compiled.native()`` say what is in use).
"""

import ast
from pathlib import Path

from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
HERE = Path(__file__).resolve().parent


def kind_macros() -> list[tuple[str, str]]:
    """``ticdc_spark.codec.compiled.Kind`` as ``K_<NAME>`` macros (and ``K_COUNT``) for
    ``_values.c``: the enum is the kinds' one definition, as the pure Python install needs it.
    Read from the source, not imported: the package's dependencies may be absent here."""
    source = HERE / "src/ticdc_spark/codec/compiled.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    kind = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Kind")
    members = {
        target.id: ast.literal_eval(node.value)
        for node in kind.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    if sorted(members.values()) != list(range(len(members))):  # _values.c indexes by kind
        raise SystemExit(f"{source}: Kind's numbers must be 0..{len(members) - 1}: {members}")
    return [(f"K_{name}", str(number)) for name, number in members.items()] + [
        ("K_COUNT", str(len(members)))
    ]


setup(
    ext_modules=[
        Extension(
            f"ticdc_spark.{name}",
            [f"src/ticdc_spark/{name}.c"],
            extra_compile_args=FLAGS,
            define_macros=kind_macros() if name == "_values" else [],
            optional=True,
        )
        for name in ("_canal_scan", "_values")
    ]
)
