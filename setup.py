"""Builds the optional compiled Canal-JSON scanner; everything else is in pyproject.toml.

The extension is optional: without a C compiler the package installs and runs on its pure
Python decode path (``ticdc_spark.codec.canal_arrow.native_scanner()`` says which is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ticdc_spark._canal_scan",
            ["src/ticdc_spark/_canal_scan.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
