"""Moved to :mod:`ticdc_spark.sql` (its :mod:`~ticdc_spark.sql.classification`).

Kept while the pipeline modules (``consume``, being split on another branch) still import
this name; the lead removes it at the merge, once they import ``ticdc_spark.sql``.
"""

from ticdc_spark.sql.classification import classify, split_top_level

__all__ = ["classify", "split_top_level"]
