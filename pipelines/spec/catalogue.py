"""The spec catalogue: specs resolved against the algorithm registry.

``privfair.schemas.spec`` validates a spec's envelope; here the component name is looked up among the
discovered algorithms, its params typed by the algorithm's ``Params`` model and the demanded
guarantees by the registered kinds, every mistake a ``SpecError`` naming the key
(``component.params.tau``, ``guarantees.0.kk``). Import-light: the Airflow DAG file uses it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from privfair.components.core.descriptor import Algorithm
from privfair.components.core.registry import algorithm, known_names
from privfair.schemas import spec as envelope
from privfair.schemas.contracts import GuaranteeError, parse_guarantee
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec

__all__ = [
    "resolve",
    "parse_spec",
    "load_spec",
    "load_specs",
    "with_params",
    "algorithm_of",
    "outline",
    "check_keys",
]


def algorithm_of(spec: PipelineSpec) -> Algorithm:
    try:
        return algorithm(spec.component.name)
    except KeyError:
        raise SpecError(
            "component.name",
            f"unknown component '{spec.component.name}'; known: {', '.join(sorted(known_names()))}",
        ) from None


def _params_error(e: ValidationError, algo: Algorithm, source: str | None) -> SpecError:
    errs = e.errors()
    err = next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])
    loc = ".".join(str(p) for p in ("component", "params", *err["loc"]))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        known = ", ".join(sorted(algo.params.model_fields))
        msg = f"unknown parameter of component '{algo.name}' (parameters: {known})"
    return SpecError(loc, msg, source)


def resolve(spec: PipelineSpec, source: str | None = None) -> PipelineSpec:
    """Type ``spec``'s params and demanded guarantees (in place) and return it."""
    if spec.resolved:
        return spec
    algo = algorithm_of(spec)
    try:
        params = algo.params.model_validate(spec.component.params)
    except ValidationError as e:
        raise _params_error(e, algo, source) from None
    demands = []
    for i, raw in enumerate(spec.guarantees):
        try:
            g = parse_guarantee(raw)
        except GuaranteeError as e:
            raise SpecError(".".join(map(str, ("guarantees", i, *e.loc))), e.rule, source) from None
        demands.append(g if g.id else g.model_copy(update={"id": f"spec.{i}"}))
    return spec.attach(params, demands)


def parse_spec(raw: Any, source: str | None = None) -> PipelineSpec:
    """A resolved spec from plain data (``SpecError`` naming the first bad key)."""
    return resolve(envelope.parse_spec(raw, source), source)


def load_spec(path: str | Path) -> PipelineSpec:
    """A resolved spec from a YAML file (it keeps the file's folder, ``spec.spec_dir``)."""
    return resolve(envelope.load_spec(path), str(path))


def with_params(spec: PipelineSpec, overrides: dict[str, Any]) -> PipelineSpec:
    """A copy of ``spec`` whose component params are updated by ``overrides`` (validated); it
    keeps the spec file's folder."""
    if not overrides:
        return spec
    out = parse_spec(spec.with_params(overrides), source=f"{spec.name} (overrides)")
    return out.located(spec.spec_dir)


def with_execution(spec: PipelineSpec, **execution: Any) -> PipelineSpec:
    """A copy of ``spec`` whose ``execution`` keys (``engine``, ``master``, ``workers``) are
    updated by the given non-None values (validated); same version, same folder."""
    given = {k: v for k, v in execution.items() if v is not None}
    if not given:
        return spec
    raw = spec.model_dump(mode="json")
    raw["execution"] = {**raw.get("execution", {}), **given}
    if given.get("engine") == "local" and "master" not in given:
        raw["execution"]["master"] = None
    out = parse_spec(raw, source=f"{spec.name} (execution)")
    return out.located(spec.spec_dir)


def load_specs(specs: str | Path | None = None) -> list[tuple[Path, PipelineSpec]]:
    """Every ``*.yaml`` / ``*.yml`` spec of the folder (``privfair.spec.settings.specs_dir``),
    sorted by file name, resolved.

    A malformed spec raises ``SpecError`` naming the file and key (an orchestrator shows it as a
    load / import error) rather than silently dropping a release. Two specs with the same
    ``name`` are an error too (they would publish into the same pipeline folder), and so is a
    spec whose input is a table in memory (no orchestrator has one to pass)."""
    from privfair.spec.settings import specs_dir

    folder = specs_dir(specs)
    if not folder.is_dir():
        raise SpecError("<dir>", "spec folder does not exist", str(folder))
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    out: list[tuple[Path, PipelineSpec]] = []
    seen: dict[str, Path] = {}
    for path in files:
        spec = load_spec(path)
        if spec.dataset.source is not None and spec.dataset.source.kind == "memory":
            raise SpecError(
                "dataset.source.kind",
                "'memory' is the input of the Python API (privfair.api.run(spec, table)); an "
                "orchestrated spec reads a built-in dataset, a file or a source",
                str(path),
            )
        if spec.name in seen:
            raise SpecError(
                "name", f"'{spec.name}' is also the name of {seen[spec.name]}", str(path)
            )
        seen[spec.name] = path
        out.append((path, spec))
    return out


def outline(spec: PipelineSpec) -> list:
    """The guarantees a spec's release will be checked against, known without data: the
    algorithm's outline for the spec's params, then the spec's demands (the order the validator
    uses, so ``check_keys`` of both agree)."""
    return algorithm_of(spec).outline(spec.params) + spec.demands


def _key(g: Any) -> str:
    gid = str(getattr(g, "id", "") or "").replace("'", "_prime")
    name = re.sub(r"[^A-Za-z0-9]+", "_", f"{gid}_{g.kind}").strip("_")
    return name if name and not name[0].isdigit() else f"g_{name}"


def check_keys(contract: list) -> list[str]:
    """One check name per guarantee, in order: ``<id>_<kind>`` made identifier-safe
    (``C4'`` -> ``C4_prime``), ``_2``, ``_3``... on repeats. The same contract always gives
    the same names."""
    names: list[str] = []
    counts: dict[str, int] = {}
    for g in contract:
        base = _key(g)
        counts[base] = counts.get(base, 0) + 1
        names.append(base if counts[base] == 1 else f"{base}_{counts[base]}")
    return names
