"""Guarantees: typed, data-only statements a release makes about itself, and the kind registry.

A guarantee is a frozen pydantic model with a ``kind`` tag. This module holds the base class,
the kinds every family may declare and a spec may demand (k-anonymity, t-closeness, attributes
preserved, partition), and the registry through which a family adds its own kinds
(``register_kind``). Checkers live in ``components``: a guarantee here says *what* must hold,
never how to check it, and no algorithm is named.

``id`` ties a guarantee to a paper's numbered contract (Fair-MDAV C1-C14, ...).

>>> g = parse_guarantee({"kind": "k_anonymity", "k": 10})
>>> g.k, g.title
(10, 'k_anonymity')
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
)

from privfair.schemas.errors import PrivfairError
from privfair.schemas.numbers import finite
from privfair.schemas.roles import ColumnRole, Role, TableRoles, read_roles

__all__ = [
    "SCHEMA_CHECK_ID",
    "Guarantee",
    "KAnonymity",
    "TCloseness",
    "AttributesPreserved",
    "ColumnsAbsent",
    "Partition",
    "ParityGap",
    "Retention",
    "ReidentificationRisk",
    "LDiversity",
    "register_kind",
    "guarantee_kinds",
    "parse_guarantee",
    "parse_contract",
    "contract_to_json",
    "contract_from_json",
    "contract_to_data",
]

#: The id of the validator's built-in checks of a published table's schema (one result beside
#: the guarantees' own): every reader of validation results tells them apart by it.
SCHEMA_CHECK_ID = "schema"


class Guarantee(BaseModel):
    """Base of every guarantee kind. Subclasses set ``kind: Literal[...]`` with its default.

    ``column_fields`` names the fields that hold column names (checked against the input before
    a run, so a demanded guarantee over a column that does not exist is refused up front).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    column_fields: ClassVar[tuple[str, ...]] = ()
    id: str = ""

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return finite(value)

    row_level: ClassVar[bool] = False  # only row-level releases can be checked for it

    @property
    def title(self) -> str:
        return f"{self.id} {self.kind}".strip()  # type: ignore[attr-defined]

    def published_values(self) -> dict[str, tuple]:
        """Columns whose published values this guarantee fixes (``{column: values}``) where
        they differ from the input's (a PD attribute published as its groups): the built-in
        schema checks take these values, from the contract rebuilt from the spec and the input,
        instead of the input's. Most kinds fix none."""
        return {}

    def completed(self, table: pa.Table) -> Guarantee:
        """The guarantee with its unset fields taken from the input ``table``'s roles (a demand
        may leave the columns a kind needs to the roles); most kinds need none."""
        return self

    def referenced_columns(self) -> list[str]:
        """Every column name this guarantee refers to ('*' placeholders excluded)."""
        out: list[str] = []
        for f in self.column_fields:
            v = getattr(self, f)
            for name in (v,) if isinstance(v, str) else tuple(v or ()):
                if name != "*" and name not in out:
                    out.append(name)
        return out


# --- kinds shared by every family ---------------------------------------------------------------
class KAnonymity(Guarantee):
    """Every equivalence class over ``quasi_identifiers`` (rows of a published table with equal
    QI tuples) has at least ``k`` rows. Empty ``quasi_identifiers``: every published QI column."""

    kind: Literal["k_anonymity"] = "k_anonymity"
    column_fields: ClassVar[tuple[str, ...]] = ("quasi_identifiers",)
    k: int = Field(ge=1)
    quasi_identifiers: tuple[str, ...] = ()


class TCloseness(Guarantee):
    """Within every class of rows, the distribution of ``attribute`` is within ``t`` of a
    reference distribution.

    ``within`` names the class structure: the sidecar field whose value identifies a row's class
    (``group`` for a microaggregation fairlet, ``class`` for a generalisation class...).
    ``reference`` is the attribute's distribution over the published rows (``output``) or over
    the input table (``input``). The distance is the earth mover's distance with equal ground
    distance, which is the total variation distance (1/2) sum_v |P_class(v) - P_ref(v)|; for a
    binary attribute it is the difference of one value's shares.
    """

    kind: Literal["t_closeness"] = "t_closeness"
    column_fields: ClassVar[tuple[str, ...]] = ("attribute",)
    attribute: str
    t: float = Field(ge=0)
    within: str = "group"
    reference: Literal["input", "output"] = "output"


class AttributesPreserved(Guarantee):
    """The listed columns are published, and each published row holds exactly the values of the
    input row it comes from (cell by cell, nulls equal nulls)."""

    kind: Literal["attributes_preserved"] = "attributes_preserved"
    column_fields: ClassVar[tuple[str, ...]] = ("columns",)
    columns: tuple[str, ...]


class ColumnsAbsent(Guarantee):
    """None of ``columns`` (the input's ``private`` columns) is published: no public output has
    a column of that name."""

    kind: Literal["columns_absent"] = "columns_absent"
    columns: tuple[str, ...]


class Partition(Guarantee):
    """Each published row comes from exactly one input row and no input row is published twice;
    unless ``allow_drops``, every input row is published."""

    kind: Literal["partition"] = "partition"
    allow_drops: bool = True


class ParityGap(Guarantee):
    """On the published table, |P(label positive | protected group) − P(label positive |
    favoured group)| ≤ ``max`` (demographic parity of the label itself).

    The protected group is the rows whose ``protected`` value is in ``unfavoured`` (when the
    role declares it) or else not in ``favoured``; the favoured group is the rest. A release
    with no published row in one of the groups fails: its gap is undefined. Unset fields are
    taken from the input's roles (``completed``): the one ``protected`` column with its
    favoured/unfavoured values, the one ``label`` with its positive values.

    ``direction``: ``any`` (the default) bounds the gap's size alone; ``no_reversal`` also
    fails a release whose signed gap, P(positive | protected) − P(positive | favoured), has
    the opposite sign of the input's (a correction that overshoots turns the bias against
    the other group: Fair-MDAV on a 10 % base rate can, and still meet ``max``). The input's
    sign (``input_sign``: −1, 0 or +1) is recomputed from the input by ``completed`` each time
    the contract is rebuilt, never read from a release; an input gap of 0 has no direction to
    reverse. ``input_sign`` is set only under ``no_reversal`` (a release under ``any`` does
    not carry it) and is published with the contract like the other completed fields."""

    kind: Literal["parity_gap"] = "parity_gap"
    column_fields: ClassVar[tuple[str, ...]] = ("protected", "label")
    max: float = Field(ge=0, le=1)
    protected: str = ""
    label: str = ""
    favoured: tuple[str | int | float | bool, ...] = ()
    unfavoured: tuple[str | int | float | bool, ...] = ()
    positive: tuple[str | int | float | bool, ...] = ()
    direction: Literal["any", "no_reversal"] = "any"
    input_sign: int | None = Field(default=None, ge=-1, le=1)

    @model_serializer(mode="wrap")
    def _without_unset_direction(self, handler):
        """A demand under the default ``direction: any`` dumps as it did before the field
        existed (the contracts of releases that demand it keep their bytes)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("direction") == "any":
            data.pop("direction", None)
            if data.get("input_sign") is None:
                data.pop("input_sign", None)
        return data

    def completed(self, table: pa.Table) -> ParityGap:
        roles = read_roles(table)
        if (self.protected and self.protected not in roles) or (
            self.label and self.label not in roles
        ):
            return self  # the demand's column check names the missing column
        prot = roles[self.protected] if self.protected else _only(roles, Role.PROTECTED, self)
        label = roles[self.label] if self.label else _only(roles, Role.LABEL, self)
        done = self.model_copy(
            update={
                "protected": prot.name,
                "label": label.name,
                "favoured": self.favoured or _favoured(table, prot, label, self.positive),
                "unfavoured": self.unfavoured or tuple(prot.unfavoured or ()),
                "positive": self.positive or tuple(label.positive or (1,)),
            }
        )
        if done.direction == "no_reversal":
            done = done.model_copy(update={"input_sign": parity_sign(done, table)})
        return done


class Retention(Guarantee):
    """Each value of the ``protected`` column keeps at least ``min_share`` of its input rows in
    the release (read from the lineage: which input rows were published). For row-level
    releases only. An unset ``protected`` is the input's one protected column."""

    kind: Literal["retention"] = "retention"
    column_fields: ClassVar[tuple[str, ...]] = ("protected",)
    row_level: ClassVar[bool] = True  # needs the lineage of a row-level release
    min_share: float = Field(ge=0, le=1)
    protected: str = ""

    def completed(self, table: pa.Table) -> Retention:
        if self.protected:
            return self
        roles = read_roles(table)
        return self.model_copy(update={"protected": _only(roles, Role.PROTECTED, self).name})


class ReidentificationRisk(Guarantee):
    """The re-identification risk of the published records for an attacker who knows
    ``background`` (rows sharing one published tuple of it are a class of f rows) is at most
    ``max``: under ``model: prosecutor`` the highest risk, 1/min f; under ``marketer`` the
    expected share of records re-identified, classes / rows (ARX's definitions,
    ``privfair.components.core.risk``). An unset ``background`` is the input's
    quasi-identifiers, protected attributes and columns marked ``known`` (``completed``). For
    row-level releases only: a synthetic or aggregate row is no person to re-identify.

    >>> g = parse_guarantee({"kind": "reidentification_risk", "model": "prosecutor", "max": 0.2})
    >>> g.model, g.max, g.background
    ('prosecutor', 0.2, ())
    """

    kind: Literal["reidentification_risk"] = "reidentification_risk"
    column_fields: ClassVar[tuple[str, ...]] = ("background",)
    row_level: ClassVar[bool] = True
    model: Literal["prosecutor", "marketer"]
    max: float = Field(ge=0, le=1)
    background: tuple[str, ...] = ()

    def completed(self, table: pa.Table) -> ReidentificationRisk:
        if self.background:
            return self
        return self.model_copy(update={"background": _background(table, self)})


class LDiversity(Guarantee):
    """Every class of published rows sharing one tuple of ``background`` holds at least ``l``
    well-represented values of ``column``: ``distinct`` values (``measure: distinct``), or an
    entropy of at least log(l) (``entropy``: exp of the Shannon entropy of its values); nulls
    are a value. ``column`` is left out of the background. Unset fields come from the input's
    roles (``completed``): the one ``label``, and the background of ``ReidentificationRisk``.

    >>> parse_guarantee({"kind": "l_diversity", "l": 2, "column": "credit"}).measure
    'distinct'
    """

    kind: Literal["l_diversity"] = "l_diversity"
    column_fields: ClassVar[tuple[str, ...]] = ("column", "background")
    row_level: ClassVar[bool] = True
    l: float = Field(ge=1)  # noqa: E741 (the field's name in the literature)
    column: str = ""
    measure: Literal["distinct", "entropy"] = "distinct"
    background: tuple[str, ...] = ()

    def completed(self, table: pa.Table) -> LDiversity:
        column = self.column or _only(read_roles(table), Role.LABEL, self).name
        known = self.background or _background(table, self)
        return self.model_copy(
            update={"column": column, "background": tuple(c for c in known if c != column)}
        )


def _background(table: pa.Table, g: Guarantee) -> tuple[str, ...]:
    """The attacker's default background of the input ``table`` (``TableRoles.background``)."""
    found = tuple(read_roles(table).background)
    if not found:
        raise GuaranteeError(
            ("background",),
            f"{g.kind} needs the attacker's background: the input has no quasi-identifier, "
            "protected or known column; name the columns in 'background'",
        )
    return found


def signed_gap(g: ParityGap, protected: pa.ChunkedArray, label: pa.ChunkedArray) -> float | None:
    """P(label in ``g.positive`` | protected group) − P(... | favoured group) over the rows of
    ``protected`` / ``label`` (the groups as ``ParityGap`` defines them; nulls in neither);
    None when a group has no row.

    >>> g = ParityGap(max=1, protected="s", label="y", favoured=("M",), positive=(1,))
    >>> signed_gap(g, pa.chunked_array([["F", "F", "M", "M"]]), pa.chunked_array([[1, 0, 1, 1]]))
    -0.5
    """
    valid = pc.is_valid(protected).fill_null(False)
    held = _member(protected, g.unfavoured or g.favoured)
    prot = pc.and_(valid, held if g.unfavoured else pc.invert(held))
    fav = pc.and_(valid, _member(protected, g.favoured) if g.favoured else pc.invert(prot))
    pos = _member(label, g.positive)
    rates = []
    for mask in (prot.fill_null(False), fav.fill_null(False)):
        n = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
        if n == 0:
            return None
        hits = pc.sum(pc.cast(pc.and_(mask, pos), pa.int64())).as_py() or 0
        rates.append(hits / n)
    return rates[0] - rates[1]


def _member(column: pa.ChunkedArray, values: tuple) -> pa.ChunkedArray:
    """Per row, whether its value is one of ``values`` (a value the column's type cannot hold
    is in no row; a null in none)."""
    try:
        found = pc.is_in(column, value_set=pa.array(list(values), type=column.type))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return pc.and_(pc.is_valid(column), pc.is_null(column))  # no row
    return found.fill_null(False)


def parity_sign(g: ParityGap, table: pa.Table) -> int:
    """The sign (−1, 0, +1) of ``signed_gap`` on ``table`` (the input); 0 when a group has
    no row or the gap is within 1e-12 of 0 (no direction to keep)."""
    gap = signed_gap(g, table.column(g.protected), table.column(g.label))
    if gap is None or abs(gap) <= 1e-12:
        return 0
    return 1 if gap > 0 else -1


def _favoured(table: pa.Table, prot: ColumnRole, label: ColumnRole, positive: tuple) -> tuple:
    """The protected column's declared favoured values; for ``favoured: auto`` (or none
    declared, without unfavoured values), the value whose rows have the highest positive rate
    in the input (the group the data favour)."""
    declared = tuple(v for v in (prot.favoured or ()) if v != "auto")
    if declared or prot.unfavoured:
        return declared
    pos = pc.is_in(table.column(label.name), pa.array(list(positive or label.positive or (1,))))
    frame = pa.table({"v": table.column(prot.name), "p": pc.cast(pos, pa.int64())})
    rates = frame.group_by("v").aggregate([("p", "mean")]).sort_by([("p_mean", "descending")])
    return (rates.column("v")[0].as_py(),)


def _only(roles: TableRoles, role: Role, g: Guarantee) -> ColumnRole:
    found = roles.with_role(role)
    if len(found) != 1:
        names = ", ".join(c.name for c in found) or "none"
        raise GuaranteeError(
            (role.value,),
            f"{g.kind} needs the {role.value} column named: the input has {len(found)} ({names})",
        )
    return found[0]


# --- the registry -------------------------------------------------------------------------------
_KINDS: dict[str, type[Guarantee]] = {}


def kind_of(model: type[Guarantee]) -> str:
    """The ``kind`` tag of a guarantee model."""
    return model.model_fields["kind"].default


def register_kind(model: type[Guarantee]) -> type[Guarantee]:
    """Make ``model`` parseable by ``parse_guarantee`` (usable as a class decorator).

    Registering the same class twice is a no-op; a different class under a taken kind is an error.
    """
    if not (isinstance(model, type) and issubclass(model, Guarantee)):
        raise PrivfairError(f"{model!r} is not a Guarantee model")
    kind = kind_of(model)
    if not isinstance(kind, str) or not kind:
        raise PrivfairError(f"{model.__name__} needs a 'kind' field with a string default")
    have = _KINDS.get(kind)
    # the same class re-imported (a reloaded module) is the same kind
    same = have is not None and (have.__module__, have.__qualname__) == (
        model.__module__,
        model.__qualname__,
    )
    if have is not None and not same:
        raise PrivfairError(
            f"guarantee kind '{kind}' is already {have.__module__}.{have.__qualname__}"
        )
    _KINDS[kind] = model
    return model


for _m in (
    KAnonymity,
    TCloseness,
    AttributesPreserved,
    ColumnsAbsent,
    Partition,
    ParityGap,
    Retention,
    ReidentificationRisk,
    LDiversity,
):
    register_kind(_m)


def guarantee_kinds() -> dict[str, type[Guarantee]]:
    """Every registered kind -> its model (families register theirs when discovered)."""
    return dict(_KINDS)


class GuaranteeError(PrivfairError, ValueError):
    """A guarantee could not be parsed. ``loc`` is the path of the offending field."""

    def __init__(self, loc: tuple, rule: str) -> None:
        self.loc, self.rule = loc, rule
        super().__init__(f"{'.'.join(map(str, loc)) or '<guarantee>'}: {rule}")


def parse_guarantee(data: Any) -> Guarantee:
    """A guarantee from plain data (``{"kind": ..., fields...}``), or ``GuaranteeError``."""
    if isinstance(data, Guarantee):
        return data
    if not isinstance(data, dict):
        raise GuaranteeError((), "a guarantee must be a mapping with a 'kind'")
    kind = data.get("kind")
    if kind is None:
        raise GuaranteeError(("kind",), "missing; known kinds: " + ", ".join(sorted(_KINDS)))
    model = _KINDS.get(kind)
    if model is None:
        raise GuaranteeError(
            ("kind",), f"unknown guarantee kind '{kind}'; known: {', '.join(sorted(_KINDS))}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errs = e.errors()
        err = next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise GuaranteeError(tuple(err["loc"]), msg.removeprefix("Value error, ")) from None


def parse_contract(items: Iterable[Any]) -> list[Guarantee]:
    """A list of guarantees from plain data."""
    return [parse_guarantee(x) for x in items]


def contract_to_data(guarantees: Iterable[Guarantee]) -> list[dict]:
    """Each guarantee as plain JSON-able data (every field, defaults included)."""
    return [g.model_dump(mode="json") for g in guarantees]


def contract_to_json(guarantees: Iterable[Guarantee]) -> str:
    """Serialise a contract (list of guarantees) to compact, sorted JSON."""
    return json.dumps(contract_to_data(guarantees), sort_keys=True)


def contract_from_json(text: str | bytes) -> list[Guarantee]:
    return parse_contract(json.loads(text))
