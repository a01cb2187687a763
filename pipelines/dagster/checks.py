"""privfair's guarantees as blocking asset checks on a user's own asset (``build_privfair_checks``).

The asset was produced elsewhere (a dbt model, an extract, a table the user anonymised by
hand); the checks ask of its value what a release's validator asks of published rows, with the
same checkers run by Great Expectations (``privfair.validation.check_table``): k-anonymity over
named quasi-identifiers, t-closeness within their classes, a parity gap, columns absent.
A check that fails, being blocking, stops every asset downstream of the checked one in the
run. Its metadata holds counts and the offending classes' sizes, never a value of the table:
the check's page in the UI is seen by whoever can open the project.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from privfair.dagster.factory import AssetLike, upstream_key
from privfair.schemas import contracts as C

__all__ = ["build_privfair_checks"]


def build_privfair_checks(
    asset: AssetLike,
    demands: Sequence[Mapping[str, Any] | C.Guarantee],
    *,
    blocking: bool = True,
    name: str | None = None,
) -> list[dg.AssetChecksDefinition]:
    """Blocking asset checks of ``demands`` on the user's ``asset``, one check per demand.

    Parameters
    ----------
    asset : AssetKey, str, AssetsDefinition or AssetSpec
        The checked asset; its value is read through its own IO manager (a pandas, polars or
        Arrow frame).
    demands : list of mapping
        As a spec's ``guarantees`` entries: ``{"kind": "k_anonymity", "k": 5,
        "quasi_identifiers": ["age", "zip"]}``, ``{"kind": "t_closeness", "t": 0.2,
        "attribute": "sex", "quasi_identifiers": [...]}``, ``{"kind": "parity_gap", "max":
        0.1, "protected": "sex", "label": "y", "favoured": ["M"], "positive": [1]}``,
        ``{"kind": "columns_absent", "columns": ["ssn"]}`` (``privfair.validation.table_checks``).
    blocking : bool
        Whether a failed check stops the assets downstream of ``asset`` (default True).
    name : str, optional
        The checks definition's name (default ``<asset>__privfair_checks``).

    Returns
    -------
    list of dg.AssetChecksDefinition
        One definition holding a check per demand, named ``<id>_<kind>`` as a release's are
        (``k_anonymity``, ``k_anonymity_2``...).

    Raises
    ------
    SpecError
        A demand a table alone cannot decide or that is malformed, when the checks are
        built (not when they run).

    Examples
    --------
    >>> import dagster as dg
    >>> [checks] = build_privfair_checks("crm/customers", [
    ...     {"kind": "k_anonymity", "k": 5, "quasi_identifiers": ["age", "zip"]}])
    >>> [k.name for k in checks.check_keys]
    ['k_anonymity']
    """
    from privfair.spec.catalogue import check_keys
    from privfair.validation.table_checks import demands_of

    key = upstream_key(asset, key="asset")
    parsed = demands_of(demands)  # a bad demand fails here, when the project loads
    guarantees = [g for g, _ in parsed]
    names = check_keys(guarantees)
    raw = [d.model_dump(mode="json") if isinstance(d, C.Guarantee) else dict(d) for d in demands]
    specs = [
        dg.AssetCheckSpec(
            n,
            asset=key,
            blocking=blocking,
            description=f"privfair: {g.title} on {key.to_user_string()} (checked by Great "
            "Expectations with the validator's checker; metadata: counts and class sizes only)",
        )
        for n, g in zip(names, guarantees, strict=True)
    ]

    @dg.multi_asset_check(
        specs=specs,
        name=name or f"{key.to_python_identifier()}__privfair_checks",
        ins={"table": dg.AssetIn(key)},
        can_subset=True,
    )
    def checks(context: dg.AssetCheckExecutionContext, table):
        from privfair.schemas.errors import PrivfairError
        from privfair.validation.table_checks import check_table

        try:
            results = check_table(table, raw)
        except PrivfairError as e:
            raise dg.Failure(
                description=f"{key.to_user_string()}: {e}", allow_retries=False
            ) from None
        selected = {k.name for k in context.selected_asset_check_keys}
        for n, r in zip(names, results, strict=True):
            if n not in selected:
                continue
            md: dict[str, Any] = {
                "observed": dg.MetadataValue.json(_plain(r.observed)),
                "expected": dg.MetadataValue.json(_plain(r.expected)),
                "n_offending": int(r.n_offending),
            }
            sizes = [o["class_size"] for o in r.offending if o.get("class_size") is not None]
            if sizes:
                md["offending_class_sizes"] = dg.MetadataValue.json(sizes)
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name=n,
                passed=bool(r.passed),
                metadata=md,
                description=r.message or None,
            )

    return [checks]


def _plain(v: Any) -> Any:
    """A JSON value (metadata takes no None at the top level)."""
    return {} if v is None else v if isinstance(v, (dict, list)) else {"value": v}
