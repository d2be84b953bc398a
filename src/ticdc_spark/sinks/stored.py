"""Sinks whose tables live on a store: a failed read or write of a table's files (delta-rs
and pyiceberg raise OSErrors, many lines long) becomes one line naming the table and its
store (:class:`~ticdc_spark.errors.StorageError`), never a credential."""

from __future__ import annotations

from ticdc_spark.pipeline.steps import DDLStep, TableChanges
from ticdc_spark.sinks.base import StepResult, TableSink
from ticdc_spark.storage.objects import io_errors

__all__ = ["StoredSink"]


class StoredSink(TableSink):
    """A :class:`TableSink` whose steps report I/O errors against :attr:`location`."""

    location = ""  # where the tables are (a directory, a URI or a warehouse)
    secrets: tuple[str, ...] = ()

    def apply_rows(self, step: TableChanges, version: int) -> StepResult:
        with io_errors(
            f"apply rows to {step.database}.{step.table} in", self.location, self.secrets
        ):
            return super().apply_rows(step, version)

    def apply_ddl(self, step: DDLStep, version: int) -> StepResult:
        with io_errors(
            f"apply a DDL to {step.database}.{step.table} in", self.location, self.secrets
        ):
            return super().apply_ddl(step, version)
