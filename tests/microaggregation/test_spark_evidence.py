"""A blocked Fair-MDAV / MDAV release validated in parts on Spark with the driver holding no
row (issue 46): ``check_parts_on_spark`` on the release ``protect_on_spark`` wrote gives the
per-part results the local validator (``_parts`` / ``_check_parts``) gives on the same tables,
row for row, and every composed verdict holds; so it does on the local component's releases
(MDAV grouping, one-hot, Adult) written as parts. On the release's parts corrupted (a lineage
group moved within its block, a published QI changed, a label swapped, the battery's
corruption of C11) the results are again the local ones, so the same guarantees fail;
a group moved to another block leaves the release uncut, as the local validator leaves it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.components.core.checks import compose
from privfair.components.core.descriptor import resolve
from privfair.components.core.engine import SparkFrame, using
from privfair.components.core.parts import PART
from privfair.components.core.registry import algorithm, kind_checks
from privfair.components.microaggregation.audit import evidence_parts
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.components.microaggregation.spark_evidence import (
    SplitInput,
    check_parts_on_spark,
    split_input,
)
from privfair.io.positions import with_positions
from privfair.validation.validate import _check_parts, _parts
from tests.microaggregation.test_blockwise import table
from tests.microaggregation.test_spark_release import _on_cluster, released  # noqa: I001

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

ROWS_PER_PART = 200
FAIRLETS = FairMDAVParams(k=4, tau=0.7, block_rows=60)


def _parts_frames(spark, folder: Path, names: list[str]) -> tuple[SparkFrame, SparkFrame]:
    """The data and lineage parts ``names`` of ``folder`` as frames on the cluster, each row's
    published position (the parts read in order) in ``__row``, their schemas the parts'."""
    out = []
    for kind in ("part-", "lineage-"):
        files = {n.replace("part-", kind): folder / n.replace("part-", kind) for n in names}
        df = spark.read.parquet(*("file://" + str(p) for p in files.values()))
        schema = pq.read_schema(next(iter(files.values())))
        out.append(SparkFrame(with_positions(df, folder, files), schema))
    return out[0], out[1]


def _write_parts(folder: Path, data: pa.Table, lineage: pa.Table) -> list[str]:
    """``data`` and ``lineage`` written as the release's parts (``ROWS_PER_PART`` rows each)."""
    folder.mkdir(parents=True)
    names = []
    for j, a in enumerate(range(0, max(data.num_rows, 1), ROWS_PER_PART)):
        name = f"part-{j:05d}.parquet"
        pq.write_table(data.slice(a, ROWS_PER_PART), folder / name)
        pq.write_table(lineage.slice(a, ROWS_PER_PART), folder / f"lineage-{j:05d}.parquet")
        names.append(name)
    return names


def _local(t, params, data, lineage, contract) -> pd.DataFrame | None:
    """The local validator's per-part results (None: it audits the whole table)."""
    algo = algorithm("fair_mdav")
    outputs, sidecars = {"data": data}, {"lineage": lineage}
    got = _parts(algo, params, t, outputs, sidecars, contract)
    if got is None:
        return None
    return _check_parts(algo, params, t, outputs, sidecars, *got, contract)


def _sorted(f: pd.DataFrame) -> pd.DataFrame:
    return f.sort_values([PART, "__guarantee"], kind="stable").reset_index(drop=True)


def _verdicts(contract, results: pd.DataFrame) -> dict[str, bool]:
    """{guarantee title: composed verdict} of the guarantees checked in parts."""
    assert not results["__raised"].notna().any(), results["__raised"].dropna().tolist()
    out = {}
    for g in contract:
        rows = results[results["__guarantee"] == g.model_dump_json()]
        if len(rows):
            parts = [
                {"part": int(p), "retained": int(n), "result": json.loads(r)}
                for p, n, r in zip(rows[PART], rows["__retained"], rows["__result"], strict=True)
            ]
            out[g.title] = compose(g, parts).passed
    return out


def _same(spark_engine, frame, t, params, data, lineage, contract, folder, **kw):
    """The Spark results of ``data``/``lineage`` written as parts under ``folder`` and the
    local validator's: equal (both None, or the same frame); the verdicts, or None."""
    names = _write_parts(folder, data, lineage)
    d, lin = _parts_frames(spark_engine.spark, folder, names)
    with using(spark_engine):
        got = check_parts_on_spark(frame, d, lin, params, contract, **kw)
    want = _local(t, params, data, lineage, contract)
    if want is None:
        assert got is None
        return None
    assert got is not None
    pd.testing.assert_frame_equal(_sorted(got), _sorted(want))
    assert _verdicts(contract, want) == _verdicts(contract, got)
    return _verdicts(contract, got)


@dataclass
class Release:
    table: pa.Table
    frame: SparkFrame
    contract: list
    data: pa.Table
    lineage: pa.Table
    split: SplitInput
    folder: Path
    names: list[str]


@pytest.fixture(scope="module")
def release(spark_engine, tmp_path_factory):
    """The fairlet release ``protect_on_spark`` wrote, its input on the cluster, and the
    input's split (reused by the corrupted releases)."""
    tmp = tmp_path_factory.mktemp("spark_evidence")
    t = table(700, 11)
    r, data, lineage = released(spark_engine, t, FAIRLETS, tmp, rows_per_part=ROWS_PER_PART)
    (tmp / "in").mkdir()
    frame = _on_cluster(spark_engine, t, tmp / "in")
    with using(spark_engine):
        split = split_input(frame, FAIRLETS, r.contract)
    yield Release(t, frame, r.contract, data, lineage, split, tmp / "release", r.parts)
    split.unpersist()


def test_the_spark_release_checked_on_spark_is_the_local_validators(spark_engine, release):
    """The parts as ``protect_on_spark`` wrote them, checked on the fixture's split of the
    input (the other tests' releases split their input in the call)."""
    d, lin = _parts_frames(spark_engine.spark, release.folder, [n for n, _ in release.names])
    with using(spark_engine):
        got = check_parts_on_spark(
            release.frame, d, lin, FAIRLETS, release.contract, split=release.split
        )
    assert got is not None and got[PART].nunique() > 1
    local = fair_mdav(release.table, FAIRLETS)  # the release the parts hold, made locally
    assert local.contract == release.contract
    want = _local(
        release.table,
        FAIRLETS,
        local.outputs["data"],
        local.sidecars["lineage"],
        local.contract,
    )
    pd.testing.assert_frame_equal(_sorted(got), _sorted(want))
    verdicts = _verdicts(release.contract, got)
    assert verdicts and all(verdicts.values()), verdicts


def _blocks_of_groups(r: Release) -> np.ndarray:
    """Each published row's block (the local validator's split)."""
    parts = evidence_parts(r.table, {"data": r.data}, {"lineage": r.lineage}, FAIRLETS, r.contract)
    return parts.rows.part_of_row[r.lineage.column("row_id").to_numpy()]


def _move_group(r: Release, same_block: bool) -> tuple[pa.Table, pa.Table]:
    """One published row moved to the next group (in its block, or the first group of the
    next block)."""
    group = r.lineage.column("group").to_numpy().copy()
    block = _blocks_of_groups(r)
    last = {int(g): int(b) for g, b in zip(group, block, strict=True)}
    if same_block:
        row = next(i for i, g in enumerate(group) if last.get(g + 1) == block[i])
        target = group[row] + 1
    else:
        row = 0
        target = min(g for g, b in last.items() if b != block[0])
    group[row] = target
    at = r.lineage.schema.get_field_index("group")
    return r.data, r.lineage.set_column(at, r.lineage.schema.field(at), pa.array(group))


def _changed_qi(r: Release) -> tuple[pa.Table, pa.Table]:
    x = r.data.column("x").to_numpy().copy()
    x[5] += 3.0
    at = r.data.schema.get_field_index("x")
    return r.data.set_column(at, r.data.schema.field(at), pa.array(x)), r.lineage


def _swapped_label(r: Release) -> tuple[pa.Table, pa.Table]:
    y = r.data.column("y").to_numpy(zero_copy_only=False).copy()
    y[7] = not y[7]
    at = r.data.schema.get_field_index("y")
    return r.data.set_column(at, r.data.schema.field(at), pa.array(y)), r.lineage


def _battery(kind: str):
    def corrupt(r: Release) -> tuple[pa.Table, pa.Table]:
        g = next(g for g in r.contract if g.kind == kind)
        outputs, sidecars = resolve(kind_checks()[kind].corrupt)(
            g, r.table, {"data": r.data}, {"lineage": r.lineage}, np.random.default_rng(3)
        )
        return outputs["data"], sidecars["lineage"]

    return corrupt


@pytest.mark.parametrize(
    ("corrupt", "fails"),
    [
        (lambda r: _move_group(r, True), "C1"),
        (_changed_qi, "C4"),
        (_swapped_label, None),
        (_battery("seed_nearest"), "C11"),
    ],
    ids=["group-moved", "qi-changed", "label-swapped", "battery-C11"],
)
def test_a_corrupted_release_fails_on_spark_as_locally(
    spark_engine, release, tmp_path, corrupt, fails
):
    data, lineage = corrupt(release)
    verdicts = _same(
        spark_engine,
        release.frame,
        release.table,
        FAIRLETS,
        data,
        lineage,
        release.contract,
        tmp_path / "parts",
        split=release.split,
    )
    assert verdicts is not None
    failed = sorted(t for t, ok in verdicts.items() if not ok)
    assert failed, verdicts
    if fails is not None:
        assert any(t.startswith(fails) for t in failed), failed


def test_a_group_moved_to_another_block_is_not_cut(spark_engine, release, tmp_path):
    data, lineage = _move_group(release, False)
    assert (
        _same(
            spark_engine,
            release.frame,
            release.table,
            FAIRLETS,
            data,
            lineage,
            release.contract,
            tmp_path / "parts",
            split=release.split,
        )
        is None
    )


@pytest.mark.parametrize(
    "case",
    [
        (
            "mdav",
            FairMDAVParams(k=5, tau=1.0, block_rows=90, grouping="mdav", correction="negative"),
        ),
        ("onehot", FairMDAVParams(k=4, tau=0.8, block_rows=70, publish="onehot")),
        ("adult", FairMDAVParams(k=5, tau=0.8, block_rows=600)),
    ],
    ids=lambda c: c[0],
)
def test_local_releases_checked_on_spark(spark_engine, tmp_path, builtin_table, case):
    """The component's own release (``protect_on_spark``'s, as test_spark_release shows)
    written as parts, its input on the cluster: the local validator's results."""
    name, params = case
    t = builtin_table("adult").slice(0, 3000) if name == "adult" else table(700, 11)
    r = fair_mdav(t, params)
    (tmp_path / "in").mkdir()
    frame = _on_cluster(spark_engine, t, tmp_path / "in")
    data = r.outputs["data"]
    verdicts = _same(
        spark_engine,
        frame,
        t,
        params,
        data,
        r.sidecars["lineage"],
        r.contract,
        tmp_path / "parts",
    )
    assert verdicts and all(verdicts.values()), verdicts


def test_a_zscore_scaling_is_refused(spark_engine, release):
    """A mean and a standard deviation summed on the cluster are not the local sum's bits."""
    from privfair.schemas.errors import InputError

    params = FAIRLETS.model_copy(update={"scaling": "zscore"})
    lin = SparkFrame(None, release.lineage.schema)
    with using(spark_engine), pytest.raises(InputError) as e:
        check_parts_on_spark(release.frame, lin, lin, params, release.contract)
    assert e.value.column == "scaling"
