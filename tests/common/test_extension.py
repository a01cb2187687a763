"""The design's test: a new family is one package plus one spec file. A throw-away family,
defined only here and installed the way a user's own would be (a distribution on the path with
a ``privfair.families`` entry point), appears in the CLI, Dagster and Airflow, with its own
guarantee kind checked by Great Expectations, and nothing outside the test suite is edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _rounding_family import family_source

REPO = Path(__file__).resolve().parents[2]

FAMILY_CODE = family_source("toy", "toy_round", "rounded_to", "Toy rounding", "R")

SPEC = """\
name: toy_release
description: A throw-away family's release.
dataset:
  path: {csv}
  columns:
    x: {{role: quasi_identifier}}
    note: {{role: sensitive, kind: nominal}}
component:
  name: toy_round
  params: {{step: 25}}
schedule: "@daily"
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """A distribution ``privfair-toy`` on a private path, with the family and its spec."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "privfair_toy_family.py").write_text(textwrap.dedent(FAMILY_CODE))
    dist = root / "privfair_toy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: privfair-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[privfair.families]\ntoy = privfair_toy_family:FAMILY\n"
    )
    csv = root / "toy.csv"
    csv.write_text("x,note\n" + "".join(f"{(i * 37) % 1000},n{i % 4}\n" for i in range(60)))
    specs = root / "specs"
    specs.mkdir()
    (specs / "toy_release.yaml").write_text(SPEC.format(csv=csv))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]),
        "PRIVFAIR_SPECS_DIR": str(specs),
    }
    return root, specs, env


def _run(args, env, cwd, timeout=600):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_toy_family_is_not_in_the_repository():
    tracked = subprocess.run(
        ["git", "grep", "-l", "toy_round"], cwd=REPO, capture_output=True, text=True
    )
    assert [f for f in tracked.stdout.split() if not f.startswith("tests/")] == []


def test_cli_runs_and_validates_the_new_family(plugin, tmp_path):
    root, specs, env = plugin
    store = tmp_path / "store"
    out = _run(
        [
            sys.executable,
            "-m",
            "privfair.cli",
            "run",
            str(specs / "toy_release.yaml"),
            "--store",
            str(store),
        ],
        env,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "published: toy_release" in out.stdout
    assert "guarantees: 4/4 hold" in out.stdout  # R1-R3 + the declared-contract check
    (release,) = [
        p
        for p in (store / "toy_release").iterdir()
        if not p.name.startswith(".") and p.is_dir() and not p.is_symlink()
    ]
    man = json.loads((release / "manifest.json").read_text())
    assert man["family"] == "toy"
    assert {r["kind"] for r in man["validation"]["results"]} >= {
        "rounded_to",
        "partition",
        "attributes_preserved",
    }
    ge = json.loads((release / "validation" / "ge_results.json").read_text())
    types = {r["expectation_config"]["type"] for s in ge["suites"].values() for r in s["results"]}
    assert "expect_rounded_to" in types  # generated from the family's own guarantee model
    check = _run([sys.executable, "-m", "privfair.cli", "validate", str(release)], env, tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "FAIL" not in check.stdout


def test_dagster_builds_and_materialises_the_new_family(plugin, tmp_path):
    root, specs, env = plugin
    code = textwrap.dedent(f"""
        import json, dagster as dg
        from privfair.dagster.definitions import build_defs
        defs = build_defs(store={str(tmp_path / "store")!r})
        keys = sorted(k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys())
        checks = sorted(c.name for c in defs.resolve_asset_graph().asset_check_keys)
        job = defs.resolve_job_def("privfair_releases")
        fields = sorted(job.run_config_schema.config_type.fields["ops"].config_type.fields["toy_release__protected_table"].config_type.fields["config"].config_type.fields)
        res = job.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
        print(json.dumps({{"keys": keys, "checks": checks, "config": fields, "ok": res.success}}))
    """)
    out = _run([sys.executable, "-c", code], env, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["keys"] == [
        "toy_release/evaluation",
        "toy_release/protected_table",
        "toy_release/raw_table",
        "toy_release/release",
        "toy_release/source",
    ]
    assert set(got["checks"]) == {
        "R1_partition",
        "R2_rounded_to",
        "R3_attributes_preserved",
        "contract",
    }
    assert got["config"] == ["step"]  # run config generated from the family's Params
    assert got["ok"]


@pytest.mark.slow
def test_airflow_parses_and_runs_the_new_family(plugin, tmp_path):
    root, specs, env = plugin
    env = {
        **env,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "PRIVFAIR_STORE": str(tmp_path / "store"),
    }
    orchestrate = [sys.executable, "-m", "privfair.orchestrate", "airflow"]
    errors = _run([*orchestrate, "dags", "list-import-errors"], env, REPO)
    assert errors.returncode == 0 and "No data found" in errors.stdout, errors.stdout[-3000:]
    listed = _run([*orchestrate, "dags", "list", "--local", "-o", "json"], env, REPO)
    assert listed.returncode == 0, listed.stderr[-3000:]
    (line,) = [x for x in listed.stdout.splitlines() if x.startswith("[{")]
    assert [d["dag_id"] for d in json.loads(line)] == ["toy_release"]
    ran = _run([*orchestrate, "dags", "test", "toy_release"], env, REPO, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    published = [
        p
        for p in (tmp_path / "store" / "toy_release").iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    ]
    assert len(published) == 1 and (published[0] / "manifest.json").exists()
