"""Opening a store by its URI: a local directory (:mod:`.local`) or an object store
(:mod:`.objects`), each loaded only when a URI names it."""

from __future__ import annotations

from ticdc_spark.storage.options import StorageOptions
from ticdc_spark.storage.store import Store, is_local, local_path

__all__ = ["open_store"]


def open_store(uri: str, options: StorageOptions | None = None) -> Store:
    """The store rooted at ``uri``: a local path, ``file://...``, ``s3://bucket/prefix``,
    ``gs://...``, ``az://...`` or ``abfss://...``, configured by ``options`` (by default the
    environment's)."""
    if is_local(uri):
        from ticdc_spark.storage.local import LocalStore

        return LocalStore(local_path(uri))
    from ticdc_spark.storage.objects import ObjectStore

    return ObjectStore(uri, options or StorageOptions.from_environment())
