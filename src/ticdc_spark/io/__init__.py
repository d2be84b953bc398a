"""Where messages come from and go to: capture files (:mod:`.capture`), Kafka through
confluent-kafka (:mod:`.kafka`), and the producing side that places encoded events on
topics and partitions as TiCDC does (:mod:`.producer`)."""
