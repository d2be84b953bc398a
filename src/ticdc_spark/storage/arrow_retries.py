"""Retries of pyarrow's S3 client (what pyiceberg reads and writes Iceberg files with) as
``MAX_RETRIES`` sets them for object_store (our stores, delta-rs).

pyiceberg takes a retry strategy only as a class to import and build without arguments
(FileIO property ``s3.retry-strategy-impl``), so the classes are made here on demand:
``Attempts11`` is pyarrow's ``AwsStandardS3RetryStrategy(max_attempts=11)``, exponential
backoff up to 20 s between attempts.  Measured against a closed port: 3 attempts (pyarrow's
default) give up after 1.7 s, 11 after about 90 s, 16 after about 190 s.  ``RETRY_TIMEOUT``
has no pyarrow equivalent.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["strategy_path"]

_NAME = re.compile(r"Attempts([1-9][0-9]{0,2})")


def strategy_path(retries: int) -> str:
    """The ``s3.retry-strategy-impl`` of ``retries`` retries (one more attempt)."""
    return f"{__name__}.Attempts{max(0, retries) + 1}"


def __getattr__(name: str) -> Any:
    """``AttemptsN``: the strategy class of N attempts (made once, then a module attribute)."""
    found = _NAME.fullmatch(name)
    if found is None:
        raise AttributeError(name)
    from pyarrow.fs import AwsStandardS3RetryStrategy

    attempts = int(found[1])

    def __init__(self: Any) -> None:
        AwsStandardS3RetryStrategy.__init__(self, max_attempts=attempts)

    made = type(name, (AwsStandardS3RetryStrategy,), {"__init__": __init__})
    globals()[name] = made
    return made
