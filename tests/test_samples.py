"""The bundled sample captures: one per protocol, each what tests/sample_captures.py makes
(so they can be made again), each decoding by the README's one line ``ticdc-spark sample -p
P | ticdc-spark decode -p P`` (no options: Avro learns its schemas from the registry records
the capture starts with) and through the decode stage's batch path without a dead letter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import orjson
import pytest

from contract.helpers import kafka_batch
from sample_captures import PROTOCOLS, make
from ticdc_spark.codec import protocols
from ticdc_spark.io.capture import read_capture
from ticdc_spark.spark.decode import decode_batches

# The workload's 40 row changes, per kind, as every sample carries them.
ROWS = {"INSERT": 22, "UPDATE": 8, "DELETE": 10}


def _bundled(protocol: str) -> bytes:
    name = f"{protocol}.capture.jsonl"
    return resources.files("ticdc_spark").joinpath("samples").joinpath(name).read_bytes()


def test_every_protocol_has_a_sample() -> None:
    assert set(PROTOCOLS) == set(protocols())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_bundled_sample_is_what_the_script_makes(protocol: str) -> None:
    assert _bundled(protocol) == make(protocol), "run: python tests/sample_captures.py"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sample_pipes_into_decode_in_one_line(protocol: str) -> None:
    command = shutil.which("ticdc-spark", path=str(Path(sys.executable).parent))
    assert command, "the ticdc-spark console script is not installed beside this Python"
    line = f"{command} sample -p {protocol} | {command} decode -p {protocol}"
    done = subprocess.run(line, shell=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert not done.stderr, done.stderr.decode()
    kinds = Counter(orjson.loads(event)["type"] for event in done.stdout.splitlines())
    assert {kind: kinds[kind] for kind in ROWS} == ROWS


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sample_decodes_on_the_batch_path_without_dead_letters(protocol: str) -> None:
    messages = list(read_capture(_bundled(protocol).splitlines()))
    changelog = [
        row
        for part in decode_batches(iter([kafka_batch(messages)]), protocol, {})
        for row in part.to_pylist()
    ]
    assert [row for row in changelog if row["kind"] == "ERROR"] == []
    assert Counter(row["op"] for row in changelog if row["kind"] == "ROW") == ROWS
