"""``ticdc-kafka``: a Spark data source with the columns and options of Spark's Kafka source.

:mod:`.source` (the batch and streaming readers, ``register``), :mod:`.options` (the options,
checked), :mod:`.offsets` (offsets and ranges planned on the driver), :mod:`.reader` (a range
read in a task), :mod:`.schema` (the Kafka columns as Arrow).  See docs/kafka-source.md.
"""
