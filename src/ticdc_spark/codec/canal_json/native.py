"""The compiled Canal-JSON scanner (``_canal_scan.c``), when the install built it.

Without a C compiler at install time the package installs without it and the Spark decode
stage takes the pure Python batch path (:mod:`.batch`); :func:`native_scanner` says which is
in use.  Kept apart from the scanner's Arrow glue (:mod:`.arrow`), which needs pyarrow: the
codec imports this without it.
"""

from __future__ import annotations

from types import ModuleType

try:
    import ticdc_spark._canal_scan as scanner  # type: ignore[import-not-found]
except ImportError:  # built without a C compiler: the pure Python path is used
    scanner: ModuleType | None = None  # type: ignore[no-redef]

__all__ = ["native_scanner", "scanner"]


def native_scanner() -> bool:
    """Whether the compiled scanner is installed."""
    return scanner is not None
