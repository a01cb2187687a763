"""The evidence frames the synthesis checkers read, rebuilt from the published table, the
sidecars and the input (never from the manifest or the run's own metrics):

- ``ledger``: the ledger sidecar, one row per OpenDP step;
- ``compression``: per attribute and declared value, the compressed code the release used,
  the noisy 1-way count it measured and the noise std of that query (its ledger scale);
- ``structure``: the edges of the tree sidecar (``source`` tree), of the 2-way queries the
  ledger paid for (``two_way``) and of the fitted model's cliques (``model``);
- ``model``: the model sidecar (edge marginals over compressed codes);
- ``synthetic``: the published table as codes of the public domain rebuilt from the params and
  the INPUT's roles (-1 for a value outside it), plus, per outcome o and protected p,
  ``__s__<o>__<p>``: the codes of the admissible attribute nearest o on the tree path from o
  to p (roles read from the input; all 0 when the path has none);
- ``schema``: per published column its name, Arrow type, out-of-domain count and null count,
  the published row count and the model's noisy total recomputed from the noisy measurements.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.components.synthesis.domain import declared_domains
from privfair.components.synthesis.inputs import index_roles
from privfair.components.synthesis.model import Measurement, noisy_total
from privfair.components.synthesis.params import MSTParams
from privfair.components.synthesis.selection import tree_path
from privfair.schemas.errors import InputError
from privfair.schemas.roles import read_roles

__all__ = ["evidence", "aim_evidence", "published_codes"]


def published_codes(input_table: pa.Table, data: pa.Table, params: MSTParams) -> pd.DataFrame:
    """The published columns as codes of the public domain rebuilt from the input (-1: outside
    the domain, or a column the input does not have / cannot be read in the input's type)."""
    roles = read_roles(input_table)
    domains = declared_domains(input_table, roles, params)
    out = {}
    for name in data.column_names:
        d = domains.get(name)
        col = data.column(name)
        if d is None:
            out[name] = np.full(data.num_rows, -1, dtype=np.int64)
            continue
        try:
            if col.type != d.arrow_type:
                col = col.cast(d.arrow_type)
            out[name] = d.encode(col)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, InputError):
            out[name] = np.full(data.num_rows, -1, dtype=np.int64)
    return pd.DataFrame(out, index=pd.RangeIndex(data.num_rows))


def _pair(query: str) -> tuple[str, str]:
    a, _, b = query.partition("|")
    return a, b


def evidence(
    input_table: pa.Table, outputs: dict, sidecars: dict, params: MSTParams
) -> dict[str, pd.DataFrame]:
    data = outputs["data"]
    ledger = sidecars["ledger"].to_pandas()
    meas = sidecars["measurements"].to_pandas()
    comp = sidecars["compression"].to_pandas()
    tree = sidecars["tree"].to_pandas()
    model = sidecars["model"].to_pandas()

    # compression: joined with the 1-way noisy counts and their ledger scale
    one = ledger[ledger["phase"] == "one_way"][["query", "scale"]].drop_duplicates("query")
    compression = comp.merge(
        meas.rename(columns={"query": "attribute", "cell": "code"})[["attribute", "code", "value"]],
        on=["attribute", "code"],
        how="left",
    ).merge(one.rename(columns={"query": "attribute", "scale": "std"}), on="attribute", how="left")

    two = ledger[ledger["phase"] == "two_way"]["query"].map(_pair).tolist()
    cliques = model[["a", "b"]].drop_duplicates().itertuples(index=False, name=None)
    structure = pd.DataFrame(
        [("tree", a, b) for a, b in zip(tree["a"], tree["b"], strict=True)]
        + [("two_way", a, b) for a, b in two]
        + [("model", a, b) for a, b in cliques],
        columns=["source", "a", "b"],
    )

    codes = published_codes(input_table, data, params)
    names = input_table.column_names
    roles = read_roles(input_table)
    idx = index_roles(roles)
    edges = [
        (names.index(a), names.index(b))
        for a, b in zip(tree["a"], tree["b"], strict=True)
        if a in names and b in names
    ]
    admissible = set(idx.admissible)
    for o in idx.outcomes:
        for p in idx.protected:
            path = tree_path(edges, o, p) or []
            sep = next((v for v in path[1:-1] if v in admissible), None)
            codes[f"__s__{names[o]}__{names[p]}"] = (
                codes[names[sep]].to_numpy() if sep is not None else np.zeros(len(codes), int)
            )
    measured = [
        Measurement((0,), g["value"].to_numpy(float), g["variance"].to_numpy(float))
        for _, g in meas.groupby("query", sort=False)
    ]
    schema = pd.DataFrame(
        {
            "position": range(data.num_columns),
            "name": data.column_names,
            "type": [str(f.type) for f in data.schema],
            "out_of_domain": [
                int((codes[c].to_numpy() < 0).sum()) if c in codes else data.num_rows
                for c in data.column_names
            ],
            "nulls": [data.column(c).null_count for c in data.column_names],
        }
    )
    schema["rows"] = data.num_rows
    schema["noisy_total"] = noisy_total(measured) if measured else np.nan
    return {
        "ledger": ledger,
        "compression": compression,
        "structure": structure,
        "model": model,
        "synthetic": codes,
        "schema": schema,
    }


def aim_evidence(
    input_table: pa.Table, outputs: dict, sidecars: dict, params: MSTParams
) -> dict[str, pd.DataFrame]:
    """``evidence`` of an AIM release: its selected pairs (the ``cliques`` sidecar) stand
    where MST's tree does, and the noisy total is recomputed over every measurement, a pair
    measured in two rounds counted twice (the sidecar's ``round`` keeps them apart)."""
    frames = evidence(input_table, outputs, {**sidecars, "tree": sidecars["cliques"]}, params)
    meas = sidecars["measurements"].to_pandas()
    keys = ["query", "round"] if "round" in meas else ["query"]
    measured = [
        Measurement((0,), g["value"].to_numpy(float), g["variance"].to_numpy(float))
        for _, g in meas.groupby(keys, sort=False)
    ]
    frames["schema"]["noisy_total"] = noisy_total(measured) if measured else np.nan
    return frames
