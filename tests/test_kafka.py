"""Kafka: client configuration, and our Spark source against Apache Kafka."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ticdc_spark.codec import Message
from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.io.kafka import KafkaProducerSink, client_config, parse_kafka_uri, redact


def test_client_config_translates_java_settings() -> None:
    config = client_config(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "subscribe": "t",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="alice" password="s3cret";',
        }
    )
    assert config == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
    }
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        client_config({"kafka.ssl.truststore.location": "/x.jks"})


def test_secrets_are_redacted() -> None:
    config = {
        "sasl.password": "s3cret",
        "sasl.jaas.config": 'password="s3cret"',
        "url": "https://bob:s3cret@registry:8081",
        "bootstrap.servers": "b:9092",
    }
    assert "s3cret" not in str(redact(config))
    assert redact(config)["bootstrap.servers"] == "b:9092"


@pytest.mark.parametrize(
    "text",
    [
        "kafka://alice:p@ss@h:9092/t",  # an "@" in the password
        "kafka:///t?sasl.password=S3cr3t&acks=all",
        "kafka://h/t?kafka.ssl.key.password=S3cr3t",
        "file://k:S3cr3t@host/x?access-key=S3cr3t",
        "'iceberg:postgresql://bob:S3cr3t@db/cat#wh'",
    ],
)
def test_redact_masks_user_info_and_secret_query_values(text: str) -> None:
    masked = redact(text)
    assert "S3cr3t" not in masked and "p@ss" not in masked and "alice" not in masked
    assert "acks=all" in masked or "acks" not in text  # what is not secret stays


def test_a_password_holding_url_delimiters_must_be_encoded() -> None:
    for uri in ("kafka://alice:Pa/ss#w0rd@h:9/t", "kafka://alice:Pa?ss@h:9/t"):
        with pytest.raises(ConfigError, match="percent-encode") as info:
            parse_kafka_uri(uri)
        assert "Pa" not in str(info.value).replace("Parse", "")
    assert parse_kafka_uri("kafka://alice:Pa%2Fss%23w0rd@h:9/t")[2]["kafka.sasl.password"] == (
        "Pa/ss#w0rd"
    )
    assert parse_kafka_uri("kafka://[::1]/t")[0] == "[::1]"


def test_kafka_uri() -> None:
    servers, topics, extra = parse_kafka_uri("kafka://alice:p%40ss@h1:9092,h2:9092/a,b?acks=all")
    assert (servers, topics) == ("h1:9092,h2:9092", ["a", "b"])
    assert extra["kafka.sasl.password"] == "p@ss" and extra["kafka.acks"] == "all"
    with pytest.raises(ConfigError) as info:
        parse_kafka_uri("http://alice:secret@h/t")
    assert "secret" not in str(info.value)


def _topic(kafka_broker: str, partitions: int, records: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    sink = KafkaProducerSink(kafka_broker)
    sink.create_topics([name], partitions)
    sink.write(
        [
            Message(b"k%d" % i, b"v%d" % i, topic=name, partition=i % partitions)
            for i in range(records)
        ]
    )
    sink.close()
    return name


@pytest.mark.kafka
def test_producer_delivery_errors_are_raised(kafka_broker: str) -> None:
    sink = KafkaProducerSink(kafka_broker, config={"message.max.bytes": 1000})
    with pytest.raises(TiCDCSparkError):
        sink.write([Message(None, b"x" * 5000, topic="nope", partition=0)])
        sink.close(10)


@pytest.mark.kafka
@pytest.mark.spark
def test_batch_read(spark, kafka_broker: str) -> None:
    from ticdc_spark.spark.kafka.source import register

    register(spark)
    topic = _topic(kafka_broker, 3, 30)
    frame = (
        spark.read.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", kafka_broker)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert [f.name for f in frame.schema] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]  # Spark's columns; headers only with includeHeaders=true
    rows = frame.collect()
    assert sorted(r.value for r in rows) == sorted(b"v%d" % i for i in range(30))
    assert {(r.partition, r.offset) for r in rows} == {(p, o) for p in range(3) for o in range(10)}
    ranged = (
        spark.read.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", kafka_broker)
        .option("assign", f'{{"{topic}": [1]}}')
        .option("startingOffsets", f'{{"{topic}": {{"1": 3}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"1": 6}}}}')
        .load()
    )
    assert sorted(r.offset for r in ranged.collect()) == [3, 4, 5]
    pattern = (
        spark.read.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", kafka_broker)
        .option("subscribePattern", topic[:6] + ".*")
        .option("startingOffsets", "earliest")
        .load()
    )
    assert pattern.where(f"topic = '{topic}'").count() == 30


@pytest.mark.kafka
@pytest.mark.spark
def test_stream_reads_every_record_once_across_restarts(
    spark, kafka_broker: str, tmp_path: Path
) -> None:
    from ticdc_spark.spark.kafka.source import register
    from ticdc_spark.spark.trigger import start_query

    register(spark)
    topic = _topic(kafka_broker, 3, 60)
    seen: list[tuple[int, int]] = []
    batches: list[int] = []

    def run() -> None:
        frame = (
            spark.readStream.format("ticdc-kafka")
            .option("kafka.bootstrap.servers", kafka_broker)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 25)
            .option("availableNow", "true")
            .load()
        )

        def collect(df, batch_id):  # type: ignore[no-untyped-def]
            rows = df.select("partition", "offset").collect()
            seen.extend((r.partition, r.offset) for r in rows)
            batches.append(len(rows))

        writer = frame.writeStream.foreachBatch(collect)
        writer = writer.option("checkpointLocation", str(tmp_path / "ckpt"))
        assert start_query(writer, "once").awaitTermination(300)

    run()
    assert len(batches) >= 3 and max(batches) <= 25
    sink = KafkaProducerSink(kafka_broker)
    sink.write([Message(None, b"late", topic=topic, partition=2)])
    sink.close()
    run()  # restarted from the checkpoint: only the new record
    assert sorted(seen) == sorted([(p, o) for p in range(3) for o in range(20)] + [(2, 20)])


@pytest.mark.spark
def test_query_plans_mask_secret_source_options(spark) -> None:
    """Spark masks option values in plans by its own patterns, which miss a PEM key and the
    SASL user name; read_source widens them to what redact() masks."""
    import contextlib
    import io

    from ticdc_spark.spark.sources import read_source

    pem = "-----BEGIN KEY-----PemMaterial-----END KEY-----"
    options = {"kafka.ssl.key.pem": pem, "kafka.sasl.oauthbearer.config": "scope=OauthMaterial"}
    frame = read_source(spark, "kafka://alice:S3cr3t@127.0.0.1:9/t", options)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        frame.explain(True)
    plan = shown.getvalue()
    assert "ticdc-kafka" in plan and "127.0.0.1:9" in plan  # the plan shows the options
    for secret in ("PemMaterial", "OauthMaterial", "alice", "S3cr3t"):
        assert secret not in plan


def test_configs_print_without_credentials() -> None:
    from ticdc_spark.spark.kafka.options import SourceConfig
    from ticdc_spark.spark.pipeline import PipelineConfig

    config = PipelineConfig(
        "kafka://alice:S3cr3t@h:9/t",
        "canal-json",
        "iceberg:postgresql://bob:S3cr3t@db/cat#wh",
        "/ckpt",
        engine="embedded",
        source_options={"kafka.sasl.jaas.config": 'password="S3cr3t"'},
    )
    source = SourceConfig.parse(
        {"kafka.bootstrap.servers": "h:9", "kafka.sasl.password": "S3cr3t", "subscribe": "t"}
    )
    for text in (repr(config), str(config), repr(source)):
        assert "S3cr3t" not in text and "alice" not in text
    assert "h:9" in repr(config) and "'/ckpt'" in repr(config)
