"""The consumer: changelog rows in, table changes applied exactly once.

    changelog rows --Planner--> Plan (steps) --Applier--> sink, step by step, versioned

Layers, each importing only those above it:

* policy (``Mode``, ``OnError``), steps (the plan's step types: the seam the sinks import),
  changelog (the rows decode writes), arrow (shared Arrow helpers), dead_letters;
* state (the consumer state and its JSON), capabilities (what a protocol carries);
* planning, pure Arrow and tested without Spark: ordering (watermarks, replays, release
  bound, rows placed by position), catalog (DDLs on the table catalog), schemas (the schemas
  rows carry), barriers (release order, DDL barriers), wire_rows (rows waiting for their
  schema), last_change (the last change per key), and planner, which composes them;
* checkpoint (state store, changelog log, durable files, repair), failpoints (kill points
  for the restart tests), apply (``Applier``: plan, apply each step, save the state).

The Spark shell around it is :mod:`ticdc_spark.spark`; the table formats are
:mod:`ticdc_spark.sinks`.  (Nothing is imported here: the command line reads ``policy``
without loading pyarrow.)
"""
