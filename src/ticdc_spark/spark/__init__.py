"""Spark side of ticdc-spark: the streaming query around the consumer.

:mod:`.sources` (Kafka through :mod:`.kafka`, or a capture directory through
:mod:`.capture_source`), :mod:`.decode` (the decode stage, ``mapInArrow``), :mod:`.pipeline`
(``foreachBatch`` applying each micro-batch with :mod:`ticdc_spark.pipeline`, in the
background: :mod:`.overlap`), :mod:`.session` and :mod:`.jars` (a local session and its JVM
libraries).  Only this package imports pyspark; the table formats are :mod:`ticdc_spark.sinks`.
"""
