"""The test bench, shipped with the package but apart from the product.

What the tests, the benchmarks, ``ticdc-spark produce``/``verify`` and ``ticdc-spark demo``
use to exercise the product as a TiDB cluster and TiCDC would, and to check what it wrote:

* :mod:`.workload`: a deterministic change stream (sysbench-like and all-types tables) and
  the final state it leads to;
* :mod:`.produce`: a workload sent as TiCDC would send it, to Kafka or capture files, with
  its expected final state (:mod:`.expected`);
* :mod:`.verify`: target tables compared with an expected state;
* :mod:`.registry_server`: a small Confluent Schema Registry over HTTP, in a thread;
* :mod:`.demo`: the whole pipeline on one machine, checked at the end.

Nothing in the product imports this package (``tests/test_layout.py`` checks it): only the
CLI's bench commands, the demo, the tests and the benchmarks do.  Importing it imports none
of its modules.
"""
