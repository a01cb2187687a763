"""Recurring releases in Dagster (``privfair.dagster.definitions`` on a partitioned spec).

* a real backfill (``dagster job backfill`` on a real instance, runs launched by Dagster's run
  launcher) of the toy daily spec over 5 days publishes 5 releases, one per partition, each
  with its partition in the manifest and every blocking check passed for that partition;
* re-running a partition publishes nothing new (status ``exists``, same version, no folder);
* the release's materialisation carries ``dagster/table_name`` and ``dagster/column_schema``
  (roles and the guarantees naming each column);
* the observable source's data version is the input fingerprint, per partition: appending a
  day adds a version and changing a day's rows changes that day's only; the raw table of a
  changed day shows as stale, the others stay fresh;
* the source sensor requests a run only on a change (partition + fingerprint as run key),
  and adds new keys under ``keys: dynamic``;
* the partitions Dagster generates are the keys ``privfair.spec.partitions`` computes (weeks
  start on Monday, months on the 1st), the schedule comes from the partitioned job;
* ``dagster-webserver`` on the backfilled instance shows the 5 materialised partitions and a
  partition's catalogue metadata (screenshot ``artifacts/dagster_ui_partitions.png``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest
from _partitioned import day_keys, write_days, write_spec

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAYS = day_keys(5)
# runs launched at once by the CLI (no daemon needed); telemetry off
INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
"""


def observe(assets, **kw):
    """An observation run of ``assets`` (what the UI's "Observe sources" launches)."""
    from dagster._core.definitions.observe import observe as run_observation

    return run_observation(assets, **kw)


def _key(*path: str):
    import dagster as dg

    return dg.AssetKey(list(path))


def _versions(store: Path, name: str = "toy_daily") -> set[str]:
    root = store / name
    return {
        p.name
        for p in root.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    }


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory):
    """The toy daily spec (5 days), its source observed, then a backfill of its job over the 5
    days through the Dagster CLI, on a real instance; waits for the 5 runs to end."""
    import dagster as dg

    from privfair.dagster.definitions import build_defs

    tmp = tmp_path_factory.mktemp("dagster_partitions")
    specs, store, home = tmp / "specs", tmp / "store", tmp / "dagster_home"
    write_days(specs, 5)
    write_spec(specs)
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    defs = build_defs(specs, store=str(store))
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PRIVFAIR_SPECS_DIR": str(specs),
        "PRIVFAIR_STORE": str(store),
        "PRIVFAIR_CACHE_DIR": str(tmp / "cache"),
    }
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # observed before: the raw tables record the source versions they were built from
        obs = observe(
            [defs.resolve_assets_def(_key("toy_daily", "source"))],
            instance=instance,
        )
        assert obs.success
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "dagster"), "job", "backfill", "-m", "privfair.dagster.definitions"]
        + ["-j", "toy_daily_job", "--from", DAYS[0], "--to", DAYS[-1], "--noprompt"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    instance = dg.DagsterInstance.from_config(str(home))
    deadline = time.monotonic() + 300
    while True:
        runs = [r for r in instance.get_runs() if "dagster/backfill" in r.tags]
        if len(runs) == len(DAYS) and all(r.is_finished for r in runs):
            break
        assert time.monotonic() < deadline, [(r.run_id, r.status) for r in runs]
        time.sleep(2)
    seconds = time.monotonic() - t0
    yield {
        "defs": defs,
        "env": env,
        "instance": instance,
        "runs": runs,
        "store": store,
        "specs": specs,
        "seconds": seconds,
        "cli": proc.stdout,
    }
    instance.dispose()


def test_backfill_publishes_one_validated_release_per_partition(backfilled):
    import dagster as dg
    from dagster._core.storage.asset_check_execution_record import (
        AssetCheckExecutionRecordStatus,
    )

    instance, store = backfilled["instance"], backfilled["store"]
    print(f"backfill of {len(DAYS)} partitions: {backfilled['seconds']:.1f} s")
    (backfill,) = instance.get_backfills()
    assert sorted(backfill.partition_names) == DAYS
    runs = backfilled["runs"]
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), [r.status for r in runs]
    assert {r.tags["dagster/backfill"] for r in runs} == {backfill.backfill_id}
    assert sorted(r.tags["dagster/partition"] for r in runs) == DAYS
    versions = _versions(store)
    assert len(versions) == len(DAYS)
    by_partition = {}
    for v in versions:
        man = json.loads((store / "toy_daily" / v / "manifest.json").read_text())
        assert man["validation"]["status"] == "passed" and not man["validation"]["failed"]
        assert man["input"]["blocks"] == [man["partition"]]
        assert man["input"]["rows"] == 60
        by_partition[man["partition"]] = v
    assert sorted(by_partition) == DAYS
    # every blocking check of the candidate ran and passed, once per partition
    graph = backfilled["defs"].resolve_asset_graph()
    checks = [
        k for k in graph.asset_check_keys if k.asset_key == _key("toy_daily", "protected_table")
    ]
    assert len(checks) >= 4 and all(graph.get_check_spec(k).blocking for k in checks)
    for check in checks:
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=50)
        passed = {
            r.event.dagster_event.event_specific_data.partition
            for r in history
            if r.status == AssetCheckExecutionRecordStatus.SUCCEEDED
        }
        assert passed == set(DAYS), (check.name, passed)
    # the release materialisation of each partition names its version
    for day in DAYS:
        ev = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=_key("toy_daily", "release"), asset_partitions=[day]),
            limit=1,
        ).records[0]
        md = ev.asset_materialization.metadata
        assert md["partition"].value == day
        assert md["version"].value == by_partition[day]
        assert md["status"].value == "published"


def test_rerunning_a_partition_publishes_nothing_new(backfilled):
    instance, store, defs = backfilled["instance"], backfilled["store"], backfilled["defs"]
    before = _versions(store)
    day = DAYS[2]
    t0 = time.monotonic()
    result = defs.resolve_job_def("toy_daily_job").execute_in_process(
        partition_key=day, instance=instance
    )
    print(f"re-run of one partition: {time.monotonic() - t0:.1f} s")
    assert result.success
    out = result.asset_value(_key("toy_daily", "release"))
    assert out["status"] == "exists"
    assert _versions(store) == before
    man = json.loads((Path(out["path"]) / "manifest.json").read_text())
    assert man["partition"] == day and out["version"] in before


def test_release_carries_catalogue_metadata(backfilled):
    import dagster as dg

    ev = (
        backfilled["instance"]
        .fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=_key("toy_daily", "release"), asset_partitions=[DAYS[0]]
            ),
            limit=1,
        )
        .records[0]
    )
    md = ev.asset_materialization.metadata
    assert md["dagster/table_name"].value == "privfair.toy_daily.data"
    schema = md["dagster/column_schema"].value
    cols = {c.name: c for c in schema.columns}
    assert list(cols) == ["x", "c", "PA", "y"]  # the published columns, not 'submitted'
    assert cols["x"].type == "int64" and cols["c"].type == "string"
    assert cols["x"].description.startswith("privfair role: quasi_identifier (numeric);")
    assert cols["PA"].description.startswith("privfair role: protected (binary);")
    assert cols["y"].tags == {"privfair/role": "label"}
    for qi in ("x", "c"):
        assert "C4 k_anonymity" in cols[qi].description
    assert "C13 mean_preservation" in cols["x"].description  # numeric QI only
    assert "C13" not in cols["c"].description
    assert "k_anonymity" not in cols["PA"].description
    assert "C6 attributes_preserved" in cols["PA"].description
    assert "privfair/budget_spent" not in md  # MDAV spends no privacy budget
    assert md["privfair/republish"].value == "refuse"


def test_ledger_section_becomes_budget_metadata():
    from privfair.dagster.definitions import ledger_metadata

    assert ledger_metadata({"pipeline": "p"}) == {}
    md = ledger_metadata(
        {
            "ledger": {
                "dataset": "subs",
                "unit": "record",
                "blocks": ["2026-11-02"],
                "policy": "refuse",
                "charge": {"rho": 0.1, "epsilon": 1.0, "delta": 1e-6},
                "budget": {"rho": 0.5, "per": "partition"},
                "spent": {"rho": 0.1, "epsilon": None},
                "remaining": {"rho": 0.4, "epsilon": None},
                "entry": 3,
            }
        }
    )
    assert md["privfair/budget_spent"].value == {"rho": 0.1, "epsilon": None}
    assert md["privfair/budget_remaining"].value == {"rho": 0.4, "epsilon": None}
    assert md["privfair/ledger_dataset"].value == "subs"


# --- the source, its data versions and its sensor ----------------------------------------------
def _rewrite_day(path: Path, day: str) -> None:
    """Change one value of ``day``'s rows in the source CSV (x + 1 on its first row)."""
    t = pacsv.read_csv(path)
    mask = pc.equal(pc.cast(t["submitted"], pa.string()), day)
    first = pc.index(mask, True).as_py()
    x = t["x"].to_pylist()
    x[first] += 1
    pacsv.write_csv(t.set_column(t.column_names.index("x"), "x", pa.array(x)), path)


def _observe(defs, instance) -> dict[str | None, str]:

    res = observe(
        [defs.resolve_assets_def(_key("toy_daily", "source"))],
        instance=instance,
    )
    assert res.success
    return {
        e.event_specific_data.asset_observation.partition: e.event_specific_data.asset_observation.tags[
            "dagster/data_version"
        ]
        for e in res.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    }


def test_source_versions_are_partition_fingerprints_and_staleness_follows(tmp_path: Path):
    import dagster as dg
    from dagster._core.definitions.data_version import StaleStatus
    from dagster._utils.test.data_versions import get_stale_status_resolver

    from privfair.dagster.definitions import build_defs

    specs = tmp_path / "specs"
    csv = write_days(specs, 5)
    write_spec(specs)
    defs = build_defs(specs, store=str(tmp_path / "store"))
    src, raw = _key("toy_daily", "source"), _key("toy_daily", "raw_table")
    with dg.DagsterInstance.ephemeral() as instance:
        v1 = _observe(defs, instance)
        assert sorted(v1) == DAYS
        # the version of a partition is what its release records as input fingerprint
        for day in (DAYS[1], DAYS[3]):
            res = dg.materialize(
                [defs.resolve_assets_def(src), defs.resolve_assets_def(raw)],
                selection=[raw],
                partition_key=day,
                instance=instance,
            )
            assert res.success
            assert res.asset_value(raw)["fingerprint"] == v1[day]
        assets = [defs.resolve_assets_def(src), defs.resolve_assets_def(raw)]
        fresh = get_stale_status_resolver(instance, assets)
        assert fresh.get_status(raw, DAYS[1]) == StaleStatus.FRESH
        assert fresh.get_status(raw, DAYS[3]) == StaleStatus.FRESH

        write_days(specs, 6)  # a new day: the earlier days' rows are unchanged
        v2 = _observe(defs, instance)
        assert sorted(v2) == day_keys(6)
        assert {k: v2[k] for k in DAYS} == v1

        _rewrite_day(csv, DAYS[3])
        v3 = _observe(defs, instance)
        assert {k for k in v3 if v3[k] != v2[k]} == {DAYS[3]}
        after = get_stale_status_resolver(instance, assets)
        assert after.get_status(raw, DAYS[3]) == StaleStatus.STALE
        assert after.get_status(raw, DAYS[1]) == StaleStatus.FRESH


def _tick(sensor, instance, cursor, defs):
    import dagster as dg
    from dagster._core.definitions.partitions.context import partition_loading_context

    ctx = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={k: defs.resources[k] for k in ("privfair_data", "connections")},
        definitions=defs,
    )
    # the daemon evaluates a tick with the instance as the dynamic partitions store
    with partition_loading_context(dynamic_partitions_store=instance):
        return sensor.evaluate_tick(ctx)


def test_the_sensor_requests_a_run_only_when_a_partition_changes(tmp_path: Path):
    import dagster as dg

    from privfair.dagster.definitions import build_defs
    from privfair.run.flow import ReleasePlan
    from privfair.spec.catalogue import load_spec

    specs = tmp_path / "specs"
    csv = write_days(specs, 5)
    spec_file = write_spec(specs)
    defs = build_defs(specs, store=str(tmp_path / "store"))
    sensor = defs.resolve_sensor_def("toy_daily_source_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert sensor.job_name == "toy_daily_job"
    with dg.DagsterInstance.ephemeral() as instance:
        first = _tick(sensor, instance, None, defs)
        assert not first.run_requests and first.skip_message.startswith("first look")
        assert sorted(e.partition for e in first.asset_events) == DAYS
        same = _tick(sensor, instance, first.cursor, defs)
        assert not same.run_requests and not same.asset_events
        assert same.skip_message == "the source has not changed"

        write_days(specs, 6)
        _rewrite_day(csv, DAYS[0])
        changed = _tick(sensor, instance, same.cursor, defs)
        _, parts = ReleasePlan.of(load_spec(spec_file)).observe()
        want = {DAYS[0], day_keys(6)[5]}
        assert {r.partition_key for r in changed.run_requests} == want
        assert {r.run_key for r in changed.run_requests} == {f"{k}:{parts[k]}" for k in want}
        assert {e.partition: e.tags["dagster/data_version"] for e in changed.asset_events} == {
            k: parts[k] for k in want
        }
        again = _tick(sensor, instance, changed.cursor, defs)
        assert not again.run_requests


def test_the_sensor_of_an_unpartitioned_and_of_a_dynamic_spec(tmp_path: Path):
    import dagster as dg

    from privfair.dagster.definitions import build_defs

    specs = tmp_path / "specs"
    csv = write_days(specs, 3)
    write_spec(specs, name="toy_whole", partitions=None, schedule="@weekly")
    write_spec(specs, name="toy_keys", partitions={"column": "c", "keys": "dynamic"})
    defs = build_defs(specs, store=str(tmp_path / "store"))
    whole = defs.resolve_sensor_def("toy_whole_source_sensor")
    keys = defs.resolve_sensor_def("toy_keys_source_sensor")
    # the unpartitioned spec keeps its cron schedule and joins the all-specs job
    assert defs.resolve_schedule_def("toy_whole_schedule").cron_schedule == "0 0 * * 0"
    releases = defs.resolve_job_def("privfair_releases").asset_layer.selected_asset_keys
    assert _key("toy_whole", "release") in releases
    assert _key("toy_keys", "release") not in releases
    # a key partitioning has no calendar: no schedule
    assert {s.name for s in defs.schedules or []} == {"toy_whole_schedule"}
    with dg.DagsterInstance.ephemeral() as instance:
        w1 = _tick(whole, instance, None, defs)
        k1 = _tick(keys, instance, None, defs)
        (add,) = k1.dynamic_partitions_requests
        assert add.partitions_def_name == "toy_keys" and sorted(add.partition_keys) == [
            "a",
            "b",
            "c",
        ]
        instance.add_dynamic_partitions("toy_keys", list(add.partition_keys))
        write_days(specs, 4)
        w2 = _tick(whole, instance, w1.cursor, defs)
        (req,) = w2.run_requests
        assert req.partition_key is None and req.run_key == json.loads(w2.cursor)["*"]
        assert req.run_key != json.loads(w1.cursor)["*"]
        k2 = _tick(keys, instance, k1.cursor, defs)  # every key's rows grew
        assert sorted(r.partition_key for r in k2.run_requests) == ["a", "b", "c"]
        assert not k2.dynamic_partitions_requests
    assert csv.is_file()


def test_partition_keys_match_the_partitions_module():
    import dagster as dg

    from privfair.dagster.definitions import partitions_def_of
    from privfair.schemas.spec import PipelineSpec
    from privfair.spec.partitions import check_key, key_for

    def spec(**part):
        return PipelineSpec.model_validate(
            {
                "name": "p",
                "dataset": {"path": "x.csv", "columns": {"x": {"role": "quasi_identifier"}}},
                "component": {"name": "mdav", "params": {"k": 5}},
                "partitions": {"column": "d", **part},
            }
        )

    for gran, start in (("day", "2026-11-05"), ("week", "2026-11-02"), ("month", "2025-01-01")):
        s = spec(granularity=gran, start=start, end="2025-06-01" if gran == "month" else None)
        pdef = partitions_def_of(s)
        assert isinstance(pdef, dg.TimeWindowPartitionsDefinition)
        keys = pdef.get_partition_keys()[:20]
        assert keys[0] == start
        for k in keys:
            assert check_key(s.partitions, k) == k
            w = pdef.time_window_for_partition_key(k)
            mid = w.start + (w.end - w.start) / 2  # any moment of the period has this key
            assert key_for(s.partitions, mid) == k
            if gran != "month":
                assert w.end - w.start == timedelta(days=1 if gran == "day" else 7)
        if gran == "week":
            assert all(date.fromisoformat(k).weekday() == 0 for k in keys)
        if gran == "month":
            assert pdef.get_partition_keys()[-1] == "2025-05-01"  # end excluded
    assert partitions_def_of(spec(keys=["north", "south"])).get_partition_keys() == [
        "north",
        "south",
    ]
    assert partitions_def_of(spec(keys="dynamic")).name == "p"
    unpartitioned = PipelineSpec.model_validate(
        {
            "name": "q",
            "dataset": {"path": "x.csv", "columns": {"x": {"role": "quasi_identifier"}}},
            "component": {"name": "mdav"},
        }
    )
    assert partitions_def_of(unpartitioned) is None


# --- the UI ------------------------------------------------------------------------------------
PARTITIONS_SHOT = REPO / "artifacts" / "dagster_ui_partitions.png"


def test_the_ui_shows_the_backfilled_partitions(backfilled, browser, tmp_path: Path):
    """``dagster-webserver`` on the backfilled instance: the release's partitions page counts
    the 5 materialised days; screenshot in ``artifacts/dagster_ui_partitions.png``."""
    import contextlib
    import signal
    import socket
    import urllib.request

    from _shared import pixel_stats
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "webserver.log"
    PARTITIONS_SHOT.parent.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "privfair.orchestrate", "sigdfl", str(BIN / "dagster-webserver")]
    cmd += ["-m", "privfair.dagster.definitions", "-h", "127.0.0.1", "-p", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=backfilled["env"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/assets/toy_daily/release?view=partitions")
            with contextlib.suppress(PlaywrightTimeout):  # the first visit's community dialog
                page.get_by_role("button", name="Skip").click(timeout=4000)
            page.get_by_text("Materialized (5)").first.wait_for(timeout=60_000)
            page.get_by_text(DAYS[2], exact=True).first.click()
            page.get_by_text("privfair.toy_daily.data").first.wait_for(timeout=60_000)
            time.sleep(1)
            text = page.locator("body").inner_text()
            for shown in ("Materialized (5)", "privfair.toy_daily.data", "dagster/column_schema"):
                assert shown in text, (shown, text[:3000])
            assert "privfair role: quasi_identifier (numeric); guarantees: C4 k_anonymity" in text
            stats = pixel_stats(browser, page.screenshot(path=str(PARTITIONS_SHOT)))
            assert stats["colours"] >= 100 and stats["background_share"] < 0.985, stats
        finally:
            page.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
