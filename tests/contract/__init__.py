"""The codec contract suite: what every registered protocol must do, tested generically.

Every protocol in :func:`ticdc_spark.codec.protocols` is run through the same cases
(golden files, round trips over every MySQL type, fuzzing, compiled/Python parity, events
and changelog agreeing).  A protocol joins by registering itself and adding one
:class:`~contract.profiles.Profile` to :data:`contract.profiles.PROFILES`: the option sets
to exercise, what each one carries, and its golden files.  A registered protocol without a
profile fails the suite (``test_registry.py``).

Only the public API is used (``ticdc_spark.codec``, ``codec.base``, ``model``, ``types``,
``normalized``, ``errors``, ``changelog``), plus the apply stage's text reader
(``sinks.convert.convert_column``) as the judge of changelog text.
"""
