"""The storage layer on a local directory and on a real S3 server (SeaweedFS, signed
requests): atomic writes, put-if-absent and compare-and-swap (also raced between processes),
listing, deleting, and errors that name the object and never a credential."""

from __future__ import annotations

import logging
import multiprocessing

import pytest

from s3_server import SECRET_KEY
from ticdc_spark.errors import ConfigError, ObjectNotFound, StorageError
from ticdc_spark.storage import StorageOptions, open_store, parse_storage_options


def test_write_read_and_replace_whole(store_root: tuple[str, StorageOptions]) -> None:
    store = open_store(*store_root)
    store.write("a/b.json", b"one")
    store.write("a/b.json", b"two")
    assert store.read("a/b.json") == b"two"
    assert store.exists("a/b.json") and not store.exists("a/c.json")
    with pytest.raises(ObjectNotFound, match=r"a/c\.json does not exist"):
        store.read("a/c.json")


def test_put_if_absent_never_overwrites(store_root: tuple[str, StorageOptions]) -> None:
    store = open_store(*store_root)
    assert store.create("lease", b"first")
    assert not store.create("lease", b"second")
    assert store.read("lease") == b"first"


def test_compare_and_swap_refuses_a_stale_version(store_root: tuple[str, StorageOptions]) -> None:
    store = open_store(*store_root)
    store.write("k", b"v1")
    _, version = store.read_versioned("k")
    assert store.replace("k", b"v2", version)
    assert not store.replace("k", b"v3", version)  # v2 replaced the version read
    assert store.read("k") == b"v2"
    assert not store.replace("missing", b"x", version)
    assert not store.exists("missing")


def test_list_children_copy_and_delete(store_root: tuple[str, StorageOptions]) -> None:
    store = open_store(*store_root)
    for key in ("db/t1/_delta_log/0.json", "db/t1/part-0.parquet", "db/t2/x", "other/y"):
        store.write(key, key.encode())
    assert store.list_keys("db/t1/") == ["db/t1/_delta_log/0.json", "db/t1/part-0.parquet"]
    assert store.list_keys("db/t") == ["db/t1/_delta_log/0.json", "db/t1/part-0.parquet", "db/t2/x"]
    assert store.children() == ["db", "other"]
    assert store.children("db/") == ["t1", "t2"]
    store.copy("db/t2/x", "db/t3/x")
    assert store.read("db/t3/x") == b"db/t2/x"
    store.delete(["db/t1/_delta_log/0.json", "db/t1/part-0.parquet", "db/never-there"])
    store.delete("other/y")
    assert store.list_keys() == ["db/t2/x", "db/t3/x"]


def _race(spec: tuple[str, dict[str, str], str, int]) -> bool:
    root, values, key, me = spec
    return open_store(root, StorageOptions(values)).create(key, str(me).encode())


def test_put_if_absent_has_one_winner_among_processes(
    store_root: tuple[str, StorageOptions],
) -> None:
    """Four processes create the same object at once, ten times: one wins each time, and
    the object holds the winner's bytes."""
    store_root, options = store_root
    store = open_store(store_root, options)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        for round_ in range(10):
            key = f"race/{round_}"
            wins = pool.map(_race, [(store_root, dict(options.values), key, i) for i in range(4)])
            assert wins.count(True) == 1, wins
            assert store.read(key) == str(wins.index(True)).encode()


def test_storage_options_come_from_the_environment_and_the_command_line() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_DEFAULT_REGION": "eu-west-1"}
    env |= {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TK"}
    given = parse_storage_options(["aws_region=us-east-2", "max_retries=3"])
    options = StorageOptions.from_environment(given, environ=env)
    assert options.delta("s3") == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "us-east-2",  # the option wins over the environment
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_SESSION_TOKEN": "TK",
        "AWS_ALLOW_HTTP": "true",  # an http:// endpoint
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "max_retries": "3",
    }
    assert options.iceberg() == {
        "s3.endpoint": "http://127.0.0.1:9",
        "s3.access-key-id": "AK",
        "s3.secret-access-key": "SK",
        "s3.session-token": "TK",
        "s3.region": "us-east-2",
        "s3.force-virtual-addressing": "false",
    }
    s3a = options.spark_s3a()
    assert s3a["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9"
    assert s3a["spark.hadoop.fs.s3a.secret.key"] == "SK"
    assert s3a["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert s3a["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert s3a["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider"
    )
    assert s3a["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert options.for_scheme("gs") == {}


def test_an_unknown_storage_option_is_refused_with_the_valid_names() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown storage option 'aws_endpiont'.*AWS_ENDPOINT_URL"
    ):
        parse_storage_options(["aws_endpiont=http://x"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_storage_options(["AWS_REGION"])


def test_secrets_never_show_in_reprs(s3_options: StorageOptions) -> None:
    text = repr(s3_options) + str(s3_options)
    assert SECRET_KEY not in text
    assert "AWS_SECRET_ACCESS_KEY': '***'" in text
    assert "AWS_ACCESS_KEY_ID" in text  # the rest is shown


def test_wrong_credentials_give_one_line_naming_the_object(
    s3_root: str, s3_options: StorageOptions, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = StorageOptions({**s3_options.values, "AWS_SECRET_ACCESS_KEY": "not-" + SECRET_KEY})
    store = open_store(s3_root, wrong)
    caplog.set_level(logging.DEBUG)
    for action in (lambda: store.read("state.json"), lambda: store.write("state.json", b"{}")):
        with pytest.raises(StorageError) as caught:
            action()
        message = str(caught.value)
        assert message.startswith(f"cannot {'read' if 'read' in message else 'write'} ")
        assert f"{s3_root}/state.json" in message
        assert "access denied (403 Forbidden SignatureDoesNotMatch)" in message
        assert "\n" not in message
        assert SECRET_KEY not in message and "not-" + SECRET_KEY not in message
    assert SECRET_KEY not in caplog.text


def test_credentials_in_a_storage_uri_are_refused_without_echoing_them() -> None:
    with pytest.raises(StorageError) as caught:
        open_store("s3://AKIA:hunter2@lake/ckpt", StorageOptions({}))
    assert "hunter2" not in str(caught.value) and "s3://lake/ckpt" in str(caught.value)
