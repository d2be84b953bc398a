"""Builds the optional compiled modules; everything else is in pyproject.toml.

``_canal_scan`` is the Spark decode stage's Canal-JSON scanner, ``_values`` the codecs'
per-column loops.  Both are optional: without a C compiler the package installs and runs on
its pure Python paths (``ticdc_spark.codec.canal_json.native_scanner()`` and
``ticdc_spark.codec.compiled.native()`` say what is in use).
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(
    ext_modules=[
        Extension(
            f"ticdc_spark.{name}",
            [f"src/ticdc_spark/{name}.c"],
            extra_compile_args=FLAGS,
            optional=True,
        )
        for name in ("_canal_scan", "_values")
    ]
)
