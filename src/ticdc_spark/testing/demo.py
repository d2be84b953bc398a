"""``ticdc-spark demo``: the whole pipeline on one machine, no broker, checked at the end.

Imports Spark: the CLI imports this module only to run the demo."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ticdc_spark.codec import get_codec
from ticdc_spark.pipeline.policy import Engine
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.console import console_settings, quiet, startup_hidden
from ticdc_spark.spark.pipeline import PipelineConfig, default_mode, run
from ticdc_spark.spark.session import local_session
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.registry_server import RegistryServer
from ticdc_spark.testing.verify import verify_sink

__all__ = ["DEMO_OPTIONS", "run_demo"]

# Codec options that make each protocol carry watermarks, as consistent mode needs.
DEMO_OPTIONS: dict[str, dict[str, str]] = {
    "canal-json": {"enable-tidb-extension": "true"},
    "open-protocol": {},
    # (TiCDC's Debezium always sends checkpoints; the extension's tidb_type types the columns)
    "debezium": {"enable-tidb-extension": "true"},
    "avro": {"enable-tidb-extension": "true"},
    # (TiCDC's Simple always sends watermarks; bootstraps as TiCDC's defaults)
    "simple": {},
}
# Protocols whose subjects follow the topic need one topic per table.
DEMO_TOPICS: dict[str, str] = {"avro": "ticdc_{schema}_{table}"}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_demo(
    protocol: str,
    workload: Any,
    workdir: str | None = None,
    registry: str | None = None,
    options: dict[str, str] | None = None,
    keep: bool = False,
) -> bool:
    """Produce, replicate into Delta, verify; print a summary. True when the tables match.
    ``options``: codec options on top of the demo's own (``DEMO_OPTIONS``).

    Without a ``workdir`` the run works in a new temporary directory, which it removes at
    the end (about 200 MB for the default workload: captures, tables, checkpoint) unless
    ``keep`` or the tables do not match (kept to look into); either way it says where.

    A protocol that needs a schema registry (avro) uses ``registry``, or else a small
    Confluent-compatible registry this process serves over HTTP for the run: Spark's Python
    workers are other processes, which confluent-kafka's ``mock://`` registry cannot reach.
    """
    if get_codec(protocol).options.__dataclass_fields__.get("schema_registry") and not registry:
        with RegistryServer() as server:
            _say(f"    schema registry: serving one for this run at {server.url}")
            return run_demo(protocol, workload, workdir, server.url, options, keep)
    if workdir is not None:
        return _run(protocol, workload, Path(workdir), registry, options or {})
    root = Path(tempfile.mkdtemp(prefix="ticdc-spark-demo-"))
    ok = False
    try:
        ok = _run(protocol, workload, root, registry, options or {})
    finally:
        _leave(root, keep or not ok)
    return ok


def _leave(root: Path, keep: bool) -> None:
    """Keep the temporary work directory, saying where things are, or remove it."""
    if keep:
        _say(
            f"kept {root}: tables in lake/, checkpoint in checkpoint/, captures in capture/, "
            "expected state in expected/"
        )
        return
    shutil.rmtree(root, ignore_errors=True)
    _say(f"removed the work directory {root} (--keep keeps it)")


def _run(
    protocol: str,
    workload: Any,
    root: Path,
    registry: str | None,
    extra: dict[str, str],
) -> bool:
    options = {**DEMO_OPTIONS.get(protocol, {}), **extra}
    if registry:
        options["schema-registry"] = registry
    started = time.perf_counter()
    _produce(protocol, workload, options, root)
    replicate_started = time.perf_counter()
    target, applied = _replicate(protocol, options, root)
    replicate_seconds = time.perf_counter() - replicate_started
    _say("3/3 verifying the tables against the generated state")
    reports = verify_sink(make_sink(target, engine=Engine.EMBEDDED), root / "expected")
    for report in reports:
        _say("    " + report.summary())
    ok = all(r.ok for r in reports)
    total = time.perf_counter() - started
    _say(
        f"{'PASSED' if ok else 'FAILED'}: {len(reports)} tables, {applied} rows applied in "
        f"{replicate_seconds:.1f}s of replication, {total:.1f}s in all"
    )
    return ok


def _produce(protocol: str, workload: Any, options: dict[str, str], root: Path) -> None:
    """Step 1: the workload as the protocol's capture files, and its expected state."""
    _say(
        f"1/3 generating {workload.rows} row changes over {workload.tables} tables as "
        f"{protocol} capture files in {root / 'capture'}"
    )
    produced = produce_workload(
        workload,
        protocol,
        options,
        str(root / "capture"),
        expected=root / "expected",
        partitions=3,
        topic=DEMO_TOPICS.get(protocol, "ticdc_{schema}"),
    )
    _say(f"    {produced.messages} messages, {produced.ddl} DDL")


def _session() -> Any:
    """The demo's local Spark session (the embedded engine needs no JVM libraries)."""
    with startup_hidden():  # (Ivy's report of Delta's jars, the JVM's notes)
        spark = local_session("ticdc-spark demo", settings=console_settings({}))
    quiet(spark)
    return spark


def _replicate(protocol: str, options: dict[str, str], root: Path) -> tuple[str, int]:
    """Step 2: the capture files replicated into Delta tables; (the target, rows applied)."""
    mode = default_mode(protocol, options)
    _say(f"2/3 replicating with Spark into Delta tables in {root / 'lake'} ({mode} mode)")
    spark = _session()
    config = PipelineConfig(
        source=str(root / "capture"),
        protocol=protocol,
        target=f"delta:{root / 'lake'}",
        checkpoint=str(root / "checkpoint"),
        options=options,
        source_options={"maxFilesPerTrigger": "2"},
        mode=mode,
        # (the embedded engine: on a laptop's small tables it is the faster one by far, see
        # docs/pipeline.md "Apply engines"; large tables want the spark engine)
        engine=Engine.EMBEDDED,
    )
    applied = [0]

    def progress(report: Any) -> None:
        applied[0] += report.rows_applied
        _say("    " + report.line())

    run(spark, config, on_batch=progress)
    return config.target, applied[0]
