"""What Spark's S3A connector costs to put on a session: the AWS SDK's bundle against the three
SDK modules S3A uses (the ``s3`` feature of ``ticdc_spark.spark.jars``).

For each contender this starts a local Spark session in a fresh process with an empty Ivy
directory (a cold start: everything downloaded from Maven Central), then again with the same
directory (a warm start), and prints the jars, their bytes, the bytes under Ivy's directory
and the session start times side by side.  With ``--bucket``, each session also lists that
bucket through S3A, configured from the ``AWS_*`` environment (e.g. the exports that
``python tests/s3_server.py`` prints), so both contenders are shown to work, not only to load.

    python benchmarks/s3a_jars_bench.py
    python benchmarks/s3a_jars_bench.py --bucket lake

The bundle's cold start downloads 641.5 MB; run it where that is acceptable.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ticdc_spark.spark.jars import EXCLUDES, FEATURES, S3A

SESSION = """
import json, sys, time
started = time.perf_counter()
from ticdc_spark.spark.session import local_session
from ticdc_spark.storage import StorageOptions
settings, bucket = json.loads(sys.argv[1]), sys.argv[2]
if bucket:
    settings |= StorageOptions.from_environment().spark_s3a()
spark = local_session("s3a-bench", settings=settings)
listed = -1
if bucket:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    listed = len(fs.listStatus(path))
print(json.dumps({"seconds": time.perf_counter() - started, "listed": listed}))
spark.stop()
"""


def contenders(ivy: Path) -> dict[str, dict[str, str]]:
    return {
        "bundle (hadoop-aws alone)": {"spark.jars.packages": S3A, "spark.jars.ivy": str(ivy)},
        "s3 feature (3 SDK modules)": {
            "spark.jars.packages": ",".join(FEATURES["s3"]),
            "spark.jars.excludes": ",".join(EXCLUDES["s3"]),
            "spark.jars.ivy": str(ivy),
        },
    }


def start(settings: dict[str, str], bucket: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SESSION, json.dumps(settings), bucket],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bucket", default="", help="a bucket to list through S3A")
    args = parser.parse_args()
    rows = []
    for name in contenders(Path()):
        with tempfile.TemporaryDirectory(prefix="s3a-bench-") as directory:
            ivy = Path(directory)
            settings = contenders(ivy)[name]
            wall = time.perf_counter()
            cold = start(settings, args.bucket)
            cold_wall = time.perf_counter() - wall
            warm = start(settings, args.bucket)
            jars = list((ivy / "jars").glob("*.jar"))
            rows.append(
                (
                    name,
                    len(jars),
                    sum(j.stat().st_size for j in jars),
                    size(ivy),
                    cold_wall,
                    warm["seconds"],
                    cold["listed"],
                )
            )
    print(f"{'contender':28} {'jars':>5} {'jar MB':>8} {'Ivy MB':>8} {'cold s':>7} {'warm s':>7}")
    for name, count, jar_bytes, ivy_bytes, cold_s, warm_s, listed in rows:
        print(
            f"{name:28} {count:5d} {jar_bytes / 1e6:8.1f} {ivy_bytes / 1e6:8.1f} "
            f"{cold_s:7.1f} {warm_s:7.1f}" + (f"  listed {listed:.0f}" if listed >= 0 else "")
        )
    print(f"ratio of jar bytes: {rows[0][2] / rows[1][2]:.0f}x")


if __name__ == "__main__":
    main()
