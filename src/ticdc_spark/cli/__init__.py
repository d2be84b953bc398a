"""The ``ticdc-spark`` command line.

    ticdc-spark decode --protocol canal-json --values messages.jsonl
    ticdc-spark decode --protocol open-protocol capture.jsonl
    ticdc-spark encode --protocol canal-json --option enable-tidb-extension=true events.jsonl
    ticdc-spark decode -p canal-json --filter 'shop.*' --filter '!shop.tmp_*' capture.jsonl

Exit status: 0 on success, 2 on bad input or bad usage (the message names the line and the
reason), 1 on any other failure.

One module per command group: :mod:`.codec` (``decode``, ``encode``, ``sample``),
:mod:`.pipeline` (``replicate``, ``verify``), :mod:`.bench` (``produce``, ``demo``: the test
bench, :mod:`ticdc_spark.testing`); :mod:`.main` builds the parser and maps errors to exit
statuses, :mod:`.args` holds what the groups share.
"""

from ticdc_spark.cli.main import main

__all__ = ["main"]
