"""A session's cluster, checked: the master's URL before the driver starts, then executors
granted that run this ticdc-spark.

Unchecked, a job on a cluster fails late and obscurely: a malformed URL is a JVM stack
trace; an unreachable master is retried for a minute before the session fails; a cluster
without a free worker (or whose workers offer less than ``spark.executor.memory``) makes the
first job wait for ever, its warnings hidden at the pipeline's log level; executors whose
Python lacks ticdc_spark fail the first decode task with an ImportError inside a Python
traceback inside a Java one.  Each of these is one line here instead.
"""

from __future__ import annotations

import re
import socket
import time
from typing import Any

from ticdc_spark.errors import ClusterUnreachable, ConfigError

__all__ = ["check_executors", "check_master", "is_local"]

_LOCAL = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?")
_STANDALONE = re.compile(r"spark://([^/,\s]+:\d+)(,[^/,\s]+:\d+)*")
# Masters Spark runs a client-mode driver with that are not checked here (their clients
# find the cluster their own way).
_OTHER = ("yarn", "k8s://")
CONNECT_TIMEOUT_S = 5.0
EXECUTORS_TIMEOUT_S = 120.0


def is_local(master: str) -> bool:
    return _LOCAL.fullmatch(master) is not None


def check_master(master: str) -> None:
    """Refuse a master URL Spark cannot parse, and a standalone master none of whose
    addresses accepts a connection."""
    if is_local(master) or master.startswith(_OTHER):
        return
    if _STANDALONE.fullmatch(master) is None:
        raise ConfigError(
            f"--master {master!r}: use spark://HOST:PORT (a standalone cluster's master, "
            f"HOST:PORT,HOST:PORT with standby masters) or local[N]"
        )
    addresses = master.removeprefix("spark://").split(",")
    if not any(_answers(address) for address in addresses):
        raise ClusterUnreachable(
            f"no Spark master answers at {master} (within {CONNECT_TIMEOUT_S:.0f} s): is it "
            f"running, and is the port its --port (not its web UI's)?"
        )


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def check_executors(spark: Any, timeout_s: float = EXECUTORS_TIMEOUT_S) -> None:
    """Wait for the cluster to grant an executor, then check that its Python imports the
    driver's ticdc_spark (one task)."""
    context = spark.sparkContext
    deadline = time.monotonic() + timeout_s
    while context._jsc.sc().getExecutorMemoryStatus().size() < 2:  # (the driver counts)
        if time.monotonic() > deadline:
            memory = context.getConf().get("spark.executor.memory", "1g")
            raise ClusterUnreachable(
                f"the cluster at {context.master} granted no executor within {timeout_s:.0f} s:"
                f" it needs a worker with a free core and {memory} of memory free "
                f"(spark.executor.memory)"
            )
        time.sleep(0.2)
    _check_python(context)


def _check_python(context: Any) -> None:
    import ticdc_spark

    def probe(_: Any) -> str:  # (nested: shipped by value, so that it runs without us)
        import sys

        try:
            import ticdc_spark as there
        except ImportError as exc:
            return f"{sys.executable}: {exc}"
        return str(there.__version__)

    try:
        found = context.parallelize([0], 1).map(probe).collect()[0]
    except Exception as exc:  # (py4j's error: Python cannot start there at all)
        found = str(exc).strip().splitlines()[0]
    if found != ticdc_spark.__version__:
        raise ClusterUnreachable(
            f"the executors of {context.master} do not run ticdc-spark "
            f"{ticdc_spark.__version__} ({found}): install it on every worker, for the Python "
            f"PYSPARK_PYTHON names (docs/pipeline.md, On a cluster)"
        )
