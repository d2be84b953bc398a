"""The JVM libraries the pipeline runs on Spark with, resolved from Maven Central.

Spark's table-format and Kafka integrations ship as Maven artifacts, not in PySpark's wheel.
Each must match Spark's minor version (and Scala's), so the versions are pinned here together
with PySpark's (``pyproject.toml``): Spark 4.1.1 is the newest line for which Maven Central
serves all of them on this project's registry (checked 2026-11-28: ``iceberg-spark-runtime``
stops at Spark 4.1, and ``spark-token-provider-kafka-0-10``, which ``spark-sql-kafka`` needs,
is served for 4.1.1 only; ``delta-spark`` 4.3.1 is built against Spark 4.1).

They are fetched by Spark itself (``spark.jars.packages``: Apache Ivy, the resolver
``spark-submit --packages`` uses) on a session's first start and cached per machine under
Ivy's directory (``~/.ivy2.5.2``, or ``TICDC_SPARK_IVY``); later starts resolve from the cache
(about 0.1 s).  Ivy does not lock its cache: a start that would download takes a lock file
beside it first (:func:`resolution_lock`), so that sessions starting together on a machine
without the jars (a test suite run by several workers) do not download the same files at once.
Air-gapped machines set ``spark.jars`` to local files instead (see
docs/pipeline.md), or ``spark.jars.repositories`` to a mirror.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ticdc_spark.errors import ConfigError

__all__ = [
    "FEATURES",
    "SPARK_VERSION",
    "check_session",
    "check_spark_version",
    "engine_features",
    "ivy_dir",
    "resolution_lock",
    "spark_settings",
    "start_lock",
]

SPARK_VERSION = "4.1.1"

DELTA = "io.delta:delta-spark_2.13:4.3.1"
ICEBERG = "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
# The driver of SQLite catalogs (pyiceberg's SqlCatalog, read by Iceberg's JDBC catalog).
SQLITE_JDBC = "org.xerial:sqlite-jdbc:3.53.4.0"
KAFKA = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"
# Spark 4.1's Hadoop client is 3.4.2: the S3A connector must be the same release.
S3A = "org.apache.hadoop:hadoop-aws:3.4.2"
# hadoop-aws depends on the AWS SDK's ``bundle``: every AWS service, shaded, 641.5 MB (a cold
# first start downloaded it in 12 s here and copied it twice more: 1.2 GB under Ivy's
# directory).  S3A uses three of its modules: S3, its transfer manager and STS; with their
# dependencies that is 36 jars and 12.7 MB.  Spark already ships what the SDK's HTTP clients
# need (Netty 4.2, Apache HttpClient 4.5, SLF4J), so those are excluded too.  What the
# unshaded modules cannot do (the bundle shades HttpClient): ``fs.s3a.ssl.channel.mode`` is
# ignored (the JDK's TLS is used) and ``AssumedRoleCredentialProvider`` cannot load; both
# work with the bundle (spark.jars.packages of S3A alone, without these exclusions).
# benchmarks/s3a_jars_bench.py (2 cores under load): jars 645.2 MB against 12.7 MB, Ivy's
# directory 1,291 MB against 28 MB, session start cold 37.1 s against 35.3 s, warm 27.8 s
# against 23.1 s; both list a SeaweedFS bucket.
AWS_SDK = "2.29.52"  # hadoop-project 3.4.2's aws-java-sdk-v2.version
S3A_SDK = tuple(
    f"software.amazon.awssdk:{module}:{AWS_SDK}" for module in ("s3", "s3-transfer-manager", "sts")
)

# What each feature needs on the JVM's class path.
FEATURES: dict[str, tuple[str, ...]] = {
    "delta": (DELTA,),
    "iceberg": (ICEBERG, SQLITE_JDBC),
    "kafka": (KAFKA,),
    "s3": (S3A, *S3A_SDK),
}
# What each feature keeps out of the resolution (group:artifact, * a wildcard).
EXCLUDES: dict[str, tuple[str, ...]] = {
    "s3": (
        "software.amazon.awssdk:bundle",
        "io.netty:*",
        "org.apache.httpcomponents:*",
        "commons-codec:commons-codec",
        "org.slf4j:*",
    ),
}
_EXTENSIONS = {
    "delta": "io.delta.sql.DeltaSparkSessionExtension",
    "iceberg": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
}


def check_spark_version() -> None:
    """Refuse a PySpark other than the one the pinned jars are built for: a mismatch fails
    deep inside the JVM (``NoSuchMethodError``) long after the job started."""
    import pyspark

    if pyspark.__version__ != SPARK_VERSION:
        raise ConfigError(
            f"PySpark {pyspark.__version__} is installed, but ticdc-spark's Spark libraries "
            f"(Delta, Iceberg, Kafka) are built for Spark {SPARK_VERSION}: "
            f'pip install "pyspark=={SPARK_VERSION}"'
        )


def spark_settings(features: Iterable[str]) -> dict[str, str]:
    """The Spark settings that put ``features`` (names of :data:`FEATURES`) on the session:
    the packages to resolve, the SQL extensions, and Delta's catalog as the session catalog
    (what ``delta.`PATH``` tables and Delta's DDL need)."""
    wanted = sorted(set(features))
    unknown = [f for f in wanted if f not in FEATURES]
    if unknown:
        raise ConfigError(f"unknown Spark features {unknown}: use {sorted(FEATURES)}")
    if not wanted:
        return {}
    settings = {
        "spark.jars.packages": ",".join(c for f in wanted for c in FEATURES[f]),
        "spark.jars.ivy": str(ivy_dir()),
    }
    excludes = [e for f in wanted for e in EXCLUDES.get(f, ())]
    if excludes:
        settings["spark.jars.excludes"] = ",".join(excludes)
    extensions = [_EXTENSIONS[f] for f in wanted if f in _EXTENSIONS]
    if extensions:
        settings["spark.sql.extensions"] = ",".join(extensions)
    if "delta" in wanted:
        settings["spark.sql.catalog.spark_catalog"] = (
            "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    return settings


def ivy_dir() -> Path:
    """Ivy's directory: its download cache and the jars a resolution retrieved.  (Not
    ``Path.home()``: it raises for a user without a home, where ``~`` stays ``~``.)"""
    home = Path(os.path.expanduser("~"))
    return Path(os.environ.get("TICDC_SPARK_IVY") or home / ".ivy2.5.2")


LOCK_NAME = "ticdc-spark-resolution.lock"


def start_lock(settings: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
    """What a session start with ``settings`` holds while its JVM starts: the lock on its
    Ivy directory when it names packages (:func:`resolution_lock`), else nothing."""
    packages = [p for p in str(settings.get("spark.jars.packages") or "").split(",") if p.strip()]
    if not packages:
        return contextlib.nullcontext()
    return resolution_lock(packages, Path(str(settings.get("spark.jars.ivy") or ivy_dir())))


@contextlib.contextmanager
def resolution_lock(packages: Iterable[str] = (), ivy: Path | None = None) -> Iterator[None]:
    """Hold the machine's lock on Ivy's directory ``ivy`` (default :func:`ivy_dir`) while a
    resolution may download: unless every package of ``packages`` (Spark's coordinates,
    ``group:artifact:version``) is among the jars a resolution retrieved, which means its
    files are in the cache and a start only reads them (no lock: the starts of a warm machine
    stay concurrent).  With no packages, or one this cannot read, always.  A start that
    must wait says so on stderr, once."""
    ivy = ivy or ivy_dir()
    if _retrieved(packages, ivy / "jars"):
        yield
        return
    ivy.mkdir(parents=True, exist_ok=True)
    with open(ivy / LOCK_NAME, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"waiting for {ivy / LOCK_NAME}: another process is downloading Spark's jars",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _retrieved(packages: Iterable[str], jars: Path) -> bool:
    """Whether every package is among ``jars`` as Spark's retrieve names them
    (``group_artifact-version.jar``)."""
    wanted = [p.strip().replace("/", ":").split(":") for p in packages]
    if not wanted or any(len(parts) != 3 for parts in wanted):
        return False
    return all((jars / f"{g}_{a}-{v}.jar").is_file() for g, a, v in wanted)


def engine_features(target: str, engine: str) -> tuple[str, ...]:
    """The features a pipeline's session needs for its target: under the Spark engine the
    format's Spark integration, and S3A for tables on ``s3://``; nothing under the embedded
    one.  A ConfigError for a store the session has no connector for."""
    from ticdc_spark.pipeline.policy import Engine
    from ticdc_spark.sinks import table_root, target_scheme
    from ticdc_spark.storage.hadoop import table_features

    scheme, _ = target_scheme(target)
    if Engine.parse(engine) != Engine.SPARK:
        return ()
    return (scheme, *table_features(table_root(target)))


def check_session(spark: Any, features: Iterable[str]) -> None:
    """Refuse a session without the SQL extension a feature needs (a session of one's own,
    on a cluster), saying how to add it, before anything is applied."""
    configured = spark.conf.get("spark.sql.extensions", "") or ""
    for feature in features:
        extension = _EXTENSIONS.get(feature)
        if extension is not None and extension not in configured:
            raise ConfigError(
                f"the spark engine writes {feature} tables through {extension}, which this "
                f"Spark session does not load: start it with the settings of "
                f"ticdc_spark.spark.jars.spark_settings([{feature!r}]) (spark.jars.packages "
                f"{','.join(FEATURES[feature])}), or use --engine embedded"
            )
