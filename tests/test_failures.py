"""Our typed error recovered from Spark's wrapping (``ticdc_spark.spark.failures``), and never
a crash passed off as one of ours."""

from __future__ import annotations

import pytest

from ticdc_spark.codec.avro.registry import UnknownSchemaId
from ticdc_spark.errors import CaptureError, DecodeError, TiCDCSparkError
from ticdc_spark.spark.failures import Failure, ours

# What PySpark 4 raised from awaitTermination for a bad capture line read by a task (a real
# run's text, its paths shortened and the plan cut): foreachBatch's traceback, then the
# worker's, whose last line is the error.
WRAPPED = """\
[STREAM_FAILED] Query [id = 59, runId = b2] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in \
foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: \
Traceback (most recent call last):
  File "py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "ticdc_spark/spark/pipeline.py", line 166, in __call__
    changes = batch_df.toArrow()  # runs the read and decode stages of this micro-batch
  File "pyspark/errors/exceptions/captured.py", line 285, in unwrap_spark_exception
    raise converted from None
  File "ticdc_spark/io/capture.py", line 53, in read_json_lines
    raise CaptureError(f"not JSON ({exc})", line=number, source=source) from None
pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python \
worker:
Traceback (most recent call last):
  File "ticdc_spark/spark/capture_source.py", line 153, in _read_file
    raise
  File "ticdc_spark/io/capture.py", line 53, in read_json_lines
    raise CaptureError(f"not JSON ({exc})", line=number, source=source) from None
ticdc_spark.errors.CaptureError: capture-000000.jsonl line 2198: not JSON (unexpected \
character)
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: ticdc-spark [id = 59, runId = b2]
Current State: ACTIVE
"""


class Wrapped(Exception):
    """Stands for a py4j or PySpark exception: only its text carries the error."""


def test_an_error_of_ours_is_recovered_from_the_text_spark_wraps_it_in() -> None:
    found = ours(Wrapped(WRAPPED))
    assert type(found) is CaptureError
    assert str(found) == "capture-000000.jsonl line 2198: not JSON (unexpected character)"


def test_a_subclass_defined_beside_its_codec_is_recovered_too() -> None:
    text = WRAPPED.replace(
        "ticdc_spark.errors.CaptureError: capture-000000.jsonl line 2198: not JSON (unexpected "
        "character)",
        "ticdc_spark.codec.avro.registry.UnknownSchemaId: no schema 7 in http://r:8081",
    )
    found = ours(Wrapped(text))
    assert type(found) is UnknownSchemaId and str(found) == "no schema 7 in http://r:8081"


@pytest.mark.parametrize(
    "ending",
    [
        # a crash while handling an error of ours: the crash is what ended the task
        "ticdc_spark.errors.DecodeError: cannot decode message: x\n\nDuring handling of the "
        "above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
        "  File \"ticdc_spark/spark/decode.py\", line 3, in run\nKeyError: 'partition'",
        "KeyError: 'partition'",  # a bug of ours
        "ticdc_spark.errors.NoSuchError: looks like ours",  # no such class
        "ticdc_spark.model.RowChange: not an exception class",
        "ticdc_sparkle.errors.DecodeError: another package's",
    ],
)
def test_a_crash_is_never_passed_off_as_one_of_ours(ending: str) -> None:
    text = WRAPPED.replace(
        "ticdc_spark.errors.CaptureError: capture-000000.jsonl line 2198: not JSON (unexpected "
        "character)",
        ending,
    )
    assert ours(Wrapped(text)) is None
    assert ours(Wrapped("java.lang.OutOfMemoryError: Java heap space")) is None


def test_an_error_noted_on_the_driver_is_raised_whole_in_place_of_sparks() -> None:
    failure = Failure()
    original = DecodeError("bad", protocol="avro", position="t/0@4")
    failure.note(original)
    failure.note(DecodeError("a later one"))  # (the first is what stopped the query)
    spark_error = Wrapped("[STREAM_FAILED] ... Traceback (most recent call last):\n  ...")
    with pytest.raises(DecodeError) as raised:
        failure.reraise(spark_error)
    assert raised.value is original and raised.value.__cause__ is spark_error
    assert raised.value.position == "t/0@4"


def test_a_failure_with_nothing_of_ours_leaves_sparks_error_alone() -> None:
    failure = Failure()
    failure.note(KeyError("x"))
    failure.reraise(Wrapped("KeyError: 'x'"))  # (returns: the caller raises Spark's own)
    assert failure.error is None
    assert isinstance(ours(TiCDCSparkError("ours")), TiCDCSparkError)
