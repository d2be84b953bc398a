"""Storage for the job's own files (checkpoint, dead letters, claim-check messages) on a local
disk or an object store, configured once for every engine.

* :mod:`~ticdc_spark.storage.options`: the standard environment plus ``--storage-option``,
  translated for delta-rs, pyiceberg, Spark's S3A connector and our stores;
* :mod:`~ticdc_spark.storage.store`: read, atomic write, put-if-absent, compare-and-swap,
  list, delete;
* :mod:`~ticdc_spark.storage.lease`: one job per checkpoint.
"""

from ticdc_spark.storage.factory import open_store
from ticdc_spark.storage.lease import Lease, LeaseHeld, LeaseLost
from ticdc_spark.storage.options import StorageOptions, parse_storage_options
from ticdc_spark.storage.store import Store, is_local, join

__all__ = [
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "StorageOptions",
    "Store",
    "is_local",
    "join",
    "open_store",
    "parse_storage_options",
]
