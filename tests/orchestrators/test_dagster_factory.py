"""A privfair release as one step of a user's own Dagster project (``privfair.dagster``, issue 45).

* ``release_assets`` merges with the user's ``Definitions`` (no executor, one resource key), twice
  over; the release asset is downstream of the user's asset; importing the face builds nothing;
* materialised in process, the release reads the user's asset through their IO manager, is
  published with the version ``privfair.api.run`` gives the same rows, reports one passed check
  per guarantee, carries ``dagster/column_schema`` and its version as data version, and a
  downstream asset reads the published table through the ``privfair`` IO manager;
* a demand that cannot hold fails its check and the step: nothing is published, the downstream
  asset does not run;
* ``build_privfair_checks`` fails on a table that is not k-anonymous (metadata: class sizes, no
  values) and passes on one that is; bad demands and inputs are refused when the project loads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from privfair import api
from privfair.dagster import PrivfairTranslator, build_privfair_checks, release_assets
from privfair.schemas.errors import SpecError

pytestmark = pytest.mark.slow

COLUMNS = {
    "age": {"role": "quasi_identifier", "kind": "numeric"},
    "hours": {"role": "quasi_identifier", "kind": "numeric"},
    "sex": {"role": "protected", "kind": "nominal", "favoured": "M"},
    "income": {"role": "label", "kind": "binary", "positive": 1},
}
RARE = "Zanzibar-7731"  # a distinctive value the checks' metadata must never show


def people_frame(n: int = 240) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "hours": rng.integers(10, 60, n),
            "sex": np.tile(["F", "M"], n // 2),
            "income": np.tile([0, 0, 1, 1], n // 4),
        }
    )


@dg.asset
def people() -> pd.DataFrame:
    return people_frame()


def spec_k(k: int = 5, demands=()):
    return api.spec(
        "people_k",
        component="mdav",
        params={"k": k},
        columns=COLUMNS,
        demands=list(demands),
    )


@dg.asset(ins={"released": dg.AssetIn(["published", "people_k"])})
def report(released: pd.DataFrame) -> dict:
    return {"rows": len(released), "smallest": int(released.groupby(["age", "hours"]).size().min())}


def _materialise(defs: dg.Definitions, tmp_path: Path):
    (tmp_path / "dagster").mkdir(exist_ok=True)
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        graph = defs.resolve_asset_graph()
        result = dg.materialize(
            [*defs.assets, *(defs.asset_checks or [])],
            resources=defs.resources,
            instance=instance,
            raise_on_error=False,
        )
        checks = {
            (
                e.asset_check_evaluation_data.asset_key.to_user_string(),
                e.asset_check_evaluation_data.check_name,
            ): e.asset_check_evaluation_data
            for e in result.all_events
            if e.event_type_value == "ASSET_CHECK_EVALUATION"
        }
        materialised = {
            e.asset_key.to_user_string(): e.event_specific_data.materialization
            for e in result.all_events
            if e.event_type_value == "ASSET_MATERIALIZATION"
        }
        outputs = {}
        if "report" in materialised:
            outputs["report"] = result.output_for_node("report")
    return result, graph, checks, materialised, outputs


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "releases"
    monkeypatch.setenv("PRIVFAIR_STORE", str(path))
    return path


def test_the_face_builds_nothing_on_import():
    code = (
        "import sys, privfair.dagster as f; "
        "print(sorted(m for m in sys.modules if m.startswith('privfair.dagster.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout  # no module of the face, no definitions


def test_release_definitions_merge_with_the_users_and_with_each_other():
    mine = dg.Definitions(assets=[people], executor=dg.multiprocess_executor)
    one = release_assets(spec_k(5), input=people, key_prefix="published")
    other = release_assets(
        api.spec("people_k9", component="mdav", params={"k": 9}, columns=COLUMNS),
        input="people",
        key_prefix="published",
    )
    merged = dg.Definitions.merge(mine, one, other)
    assert set(merged.resources) == {"privfair"}
    assert one.executor is None
    graph = merged.resolve_asset_graph()
    node = graph.get(dg.AssetKey(["published", "people_k"]))
    assert node.parent_keys == {dg.AssetKey("people")}
    names = {c.name for c in node.check_keys}
    assert {"C4_k_anonymity", "contract"} <= names
    assert all(graph.get_check_spec(c).blocking for c in node.check_keys)
    dg.Definitions.validate_loadable(merged)


def test_a_spec_handing_rows_over_needs_its_input():
    with pytest.raises(SpecError) as e:
        release_assets(spec_k(5))
    assert e.value.key == "input"
    with pytest.raises(SpecError) as e:
        release_assets(spec_k(5), input=42)
    assert e.value.key == "input"


def test_a_translator_names_and_describes_the_release():
    class Mine(PrivfairTranslator):
        def get_asset_key(self, spec):
            return dg.AssetKey(["gold", spec.name])

        def get_group_name(self, spec):
            return "releases"

        def get_owners(self, spec):
            return ["team:privacy"]

    defs = release_assets(spec_k(5), input=people, translator=Mine())
    (asset,) = defs.assets
    key = dg.AssetKey(["gold", "people_k"])
    spec = asset.specs_by_key[key]
    assert spec.group_name == "releases"
    assert spec.owners == ["team:privacy"]
    assert "privfair" in spec.kinds


def test_a_release_of_the_users_asset_is_published_checked_and_read_downstream(tmp_path, store):
    defs = dg.Definitions.merge(
        dg.Definitions(assets=[people, report]),
        release_assets(spec_k(5), input=people, key_prefix="published"),
    )
    result, _, checks, materialised, outputs = _materialise(defs, tmp_path)
    assert result.success
    release = materialised["published/people_k"]
    version = release.metadata["privfair/version"].value
    assert release.metadata["privfair/status"].value == "published"
    assert "dagster/column_schema" in release.metadata
    assert release.tags.get("dagster/data_version") == version
    mine = {name: c for (asset, name), c in checks.items() if asset == "published/people_k"}
    assert "contract" in mine and all(c.passed for c in mine.values()), mine
    assert outputs["report"] == {"rows": 240, "smallest": outputs["report"]["smallest"]}
    assert outputs["report"]["smallest"] >= 5
    # the same rows through the Python API: the same version, already published
    again = api.run(spec_k(5), people_frame(), store=store, dataset="dagster-asset:people")
    assert (again.version, again.status) == (version, "exists")


def test_a_demand_that_cannot_hold_blocks_the_release_and_what_is_downstream(tmp_path, store):
    impossible = [{"kind": "parity_gap", "max": 0.0}]  # the input's own gap is not 0
    frame = people_frame()
    frame.loc[:60, "income"] = 1  # a gap between the groups

    @dg.asset(name="people")
    def skewed() -> pd.DataFrame:
        return frame

    defs = dg.Definitions.merge(
        dg.Definitions(assets=[skewed, report]),
        release_assets(spec_k(5, impossible), input=skewed, key_prefix="published"),
    )
    result, _, checks, materialised, _ = _materialise(defs, tmp_path)
    assert not result.success
    assert "published/people_k" not in materialised and "report" not in materialised
    failed = [n for (a, n), c in checks.items() if a == "published/people_k" and not c.passed]
    assert "contract" in failed and any("parity_gap" in n for n in failed), checks
    # the candidate is quarantined; no version folder, no latest
    assert [p.name for p in (store / "people_k").iterdir()] == [".quarantine"]


def test_checks_on_the_users_asset_fail_on_a_table_that_is_not_k_anonymous(tmp_path, store):
    frame = people_frame()
    frame.loc[0, "age"] = 99  # one row alone in its class
    frame["city"] = "Leeds"
    frame.loc[0, "city"] = RARE

    @dg.asset(name="people")
    def mine() -> pd.DataFrame:
        return frame

    demands = [
        {"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["age", "city"]},
        {"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["sex"]},
    ]

    @dg.asset(deps=["people"])
    def downstream() -> int:
        return 1

    defs = dg.Definitions(
        assets=[mine, downstream], asset_checks=build_privfair_checks(mine, demands)
    )
    result, _, checks, materialised, _ = _materialise(defs, tmp_path)
    assert not result.success and "downstream" not in materialised
    broken, fine = checks[("people", "k_anonymity")], checks[("people", "k_anonymity_2")]
    assert not broken.passed and fine.passed
    md = {k: v.value for k, v in broken.metadata.items()}
    assert md["n_offending"] >= 1 and md["offending_class_sizes"][0] == 1
    assert RARE not in repr(broken) and "99" not in repr(md["offending_class_sizes"])


def test_bad_demands_are_refused_when_the_project_loads():
    with pytest.raises(SpecError) as e:
        build_privfair_checks("people", [{"kind": "retention", "min_share": 0.5}])
    assert e.value.key == "demands.0.kind"
    with pytest.raises(SpecError) as e:
        build_privfair_checks("people", [{"kind": "k_anonymity", "k": 2}])
    assert e.value.key == "demands.0.quasi_identifiers"
