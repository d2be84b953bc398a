"""``verify``'s counts (issue 24 item 7): every missing, extra and different row counted, a
few shown; and a target table that cannot be read named in one line (item 14)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ticdc_spark.cli import main
from ticdc_spark.normalized import image_to_text
from ticdc_spark.sinks.convert import convert_column
from ticdc_spark.testing.verify import compare_tables
from ticdc_spark.testing.workload import Workload


def _expected(rows: int) -> tuple:
    workload = Workload(seed=2, rows=rows, tables=1)
    for _ in workload.events():  # (the final state is that of the events generated)
        pass
    schema = next(iter(workload.final_schemas().values()))
    state = next(iter(workload.final_state().values()))
    return schema, [image_to_text(schema, r) for r in state.values()]


def _table(schema, rows: list[dict]) -> pa.Table:  # type: ignore[no-untyped-def]
    columns = {}
    for column in schema.columns:
        text = pa.array([r.get(column.name) for r in rows], pa.string())
        columns[column.name], _ = convert_column(column.type, text)
    return pa.table(columns)


def test_every_missing_row_is_counted_not_the_sample() -> None:
    schema, rows = _expected(3000)
    assert len(rows) > 100
    report = compare_tables((schema, rows), None)
    assert len(report.missing) == len(rows) and not report.ok
    summary = report.summary()
    assert f"0/{len(rows)} rows; missing {len(rows)}, extra 0, different 0" in summary
    assert summary.count("(") < 10  # (a sample, not every key)


def test_every_different_row_is_counted() -> None:
    schema, rows = _expected(3000)
    changed = [dict(r, c="changed") if i % 2 else r for i, r in enumerate(rows)]
    extra = dict(rows[0], id="999999")
    report = compare_tables((schema, rows[1:]), _table(schema, [*changed, extra]))
    differ = len(rows) // 2
    assert report.different_rows == differ
    assert f"missing 0, extra 2, different {differ} ({differ} values)" in report.summary()


def test_verify_names_a_delta_table_whose_log_does_not_read(tmp_path: Path, capsys) -> None:
    from ticdc_spark.sinks.delta import DeltaSink
    from ticdc_spark.testing.expected import write_expected

    workload = Workload(seed=2, rows=40, tables=1)
    for _ in workload.events():
        pass
    schema = next(iter(workload.final_schemas().values()))
    sink = DeltaSink(tmp_path / "lake")
    sink.create(schema)
    write_expected(tmp_path / "expected", workload.final_schemas(), workload.final_state())
    log = sorted((Path(sink.path((schema.database, schema.table))) / "_delta_log").glob("*.json"))
    log[-1].write_bytes(b"#" + log[-1].read_bytes())
    target = f"delta:{tmp_path / 'lake'}"
    code = main(["verify", "--target", target, "--expected", str(tmp_path / "expected")])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    table = tmp_path / "lake" / schema.database / schema.table
    assert f"the Delta table {table} cannot be read: its log file _delta_log/{log[-1].name}" in err
    assert "is not JSON (delta-rs: Kernel error: Json error" in err
