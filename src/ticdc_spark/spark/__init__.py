"""Spark side of ticdc-spark: sources, the decode stage, sinks and the pipeline.

Only this package (and the sinks) import pyspark, pyarrow, deltalake or pyiceberg.
"""
