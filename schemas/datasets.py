"""Built-in benchmark datasets: where their raw files come from and how they are prepared.

Each ``DatasetDefinition`` names its raw files (with the sha256 every copy must match and a
public source URL) and a ``prepare`` function that turns the local files into a typed
``pyarrow.Table`` with column roles in the field metadata. The preparation follows section
"4.1 Datasets" of the Fair-MDAV specification (after the authors' ``data_cleanup.ipynb``):

- ``adult``: UCI Adult, ``adult.data`` + ``adult.test`` (48,842 rows), PA sex, label income;
- ``compas``: ProPublica ``compas-scores-two-years.csv`` after ``dropna`` (6,907 rows),
  PA race (Caucasian), label no_recid (did not recidivate within two years);
- ``german``: Statlog German Credit ``german.data`` (1,000 rows), PA sex, label credit;
- ``australian``: Statlog Australian Credit Approval ``australian.dat`` (690 rows), label
  approved, every attribute a quasi-identifier (no protected attribute: the families that use
  it give roles in their presets).

Column order of every prepared table: quasi-identifiers in file order, then the protected
attribute, then the label. Finding the files is ``privfair.io.sources``' job, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from privfair.schemas.errors import DataSourceError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles


@dataclass(frozen=True)
class RawFile:
    """One raw file: its name, the sha256 every copy must have, and a public source URL."""

    name: str
    sha256: str
    url: str


@dataclass(frozen=True)
class DatasetDefinition:
    """A built-in dataset.

    ``prepare`` receives the verified local paths keyed by ``RawFile.name`` and returns the
    typed table with ``roles`` attached (one role on every column it keeps).
    """

    name: str
    title: str
    files: tuple[RawFile, ...]
    roles: TableRoles
    prepare: Callable[[dict[str, Path]], pa.Table]
    citation: str


# --- helpers ---------------------------------------------------------------------------------


def _path(paths: Mapping[str, Path], name: str) -> Path:
    """The local path of raw file ``name``; a ``DataSourceError`` if it was not given."""
    try:
        return Path(paths[name])
    except KeyError:
        raise DataSourceError(f"raw file '{name}' was not provided to prepare()") from None


def _map_codes(s: pd.Series, mapping: Mapping[str, int], column: str, file: str) -> pd.Series:
    """Map the codes of ``s`` through ``mapping`` to int8; any other value is an error."""
    mapped = s.map(mapping)
    unknown = s[mapped.isna()]
    if len(unknown):
        vals = sorted({str(v) for v in unknown.unique()})
        raise DataSourceError(
            f"{file}: column '{column}' has unexpected values {vals}; expected {sorted(mapping)}"
        )
    return mapped.astype("int8")


def _qi(name: str, kind: Kind) -> ColumnRole:
    return ColumnRole(name=name, role=Role.QUASI_IDENTIFIER, kind=kind)


def _protected(name: str) -> ColumnRole:
    return ColumnRole(name=name, role=Role.PROTECTED, kind=Kind.BINARY, favoured=1)


def _label(name: str) -> ColumnRole:
    return ColumnRole(name=name, role=Role.LABEL, kind=Kind.BINARY, positive=1)


_ARROW_TYPE = {Kind.NOMINAL: pa.string(), Kind.BINARY: pa.int8()}


def _to_table(df: pd.DataFrame, roles: TableRoles, numeric: Mapping[str, pa.DataType]) -> pa.Table:
    """The columns of ``roles`` (in that order) as an Arrow table with roles attached.

    NOMINAL columns become ``string`` (NaN -> null), BINARY ``int8``, NUMERIC the type given in
    ``numeric``.
    """
    fields = [
        pa.field(c.name, numeric[c.name] if c.kind is Kind.NUMERIC else _ARROW_TYPE[c.kind])
        for c in roles
    ]
    table = pa.Table.from_pandas(
        df[roles.names].reset_index(drop=True), schema=pa.schema(fields), preserve_index=False
    )
    return attach_roles(table.replace_schema_metadata(None), roles)


# --- Adult (Income) --------------------------------------------------------------------------

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
_ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
_ADULT_NOMINAL = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "native-country",
)

ADULT_ROLES = TableRoles.of(
    [
        _qi(n, Kind.NUMERIC if n in _ADULT_NUMERIC else Kind.NOMINAL)
        for n in ADULT_COLUMNS
        if n not in ("fnlwgt", "sex", "income")
    ]
    + [_protected("sex"), _label("income")]
)


def _read_adult(path: Path, skip_first_line: bool) -> pd.DataFrame:
    """One Adult file: ``", "``-separated, no header, ``?`` = missing, blank lines skipped."""
    return pd.read_csv(
        path,
        header=None,
        names=list(ADULT_COLUMNS),
        sep=",",
        skipinitialspace=True,
        na_values=["?"],
        keep_default_na=False,
        skiprows=1 if skip_first_line else 0,
        dtype={n: "int64" for n in _ADULT_NUMERIC} | {n: object for n in _ADULT_NOMINAL},
    )


def prepare_adult(paths: dict[str, Path]) -> pa.Table:
    """Income (UCI Adult): ``adult.data`` then ``adult.test``, 48,842 rows, 12 QIs.

    - ``adult.test``: its first line ``|1x3 Cross validator`` is skipped and the trailing ``.``
      of its labels stripped;
    - ``?`` becomes null; rows with missing values are kept (nominal nulls stay null);
    - ``fnlwgt`` is dropped;
    - QIs: age, education-num, capital-gain, capital-loss, hours-per-week (int64, NUMERIC) and
      workclass, education, marital-status, occupation, relationship, race, native-country
      (string, NOMINAL), in file order;
    - protected ``sex``: Male = 1 (favoured), Female = 0; label ``income``: ``>50K`` = 1.
    """
    df = pd.concat(
        [
            _read_adult(_path(paths, "adult.data"), skip_first_line=False),
            _read_adult(_path(paths, "adult.test"), skip_first_line=True),
        ],
        ignore_index=True,
    )
    df["income"] = _map_codes(
        df["income"].str.rstrip("."), {">50K": 1, "<=50K": 0}, "income", "adult"
    )
    df["sex"] = _map_codes(df["sex"], {"Male": 1, "Female": 0}, "sex", "adult")
    return _to_table(df, ADULT_ROLES, {n: pa.int64() for n in _ADULT_NUMERIC})


# --- COMPAS ----------------------------------------------------------------------------------

COMPAS_KEEP = (
    "age",
    "c_charge_degree",
    "race",
    "sex",
    "priors_count",
    "days_b_screening_arrest",
    "two_year_recid",
    "c_jail_in",
    "c_jail_out",
)

COMPAS_ROLES = TableRoles.of(
    [
        _qi("sex", Kind.BINARY),
        _qi("age", Kind.NUMERIC),
        _qi("priors_count", Kind.NUMERIC),
        _qi("days_b_screening_arrest", Kind.NUMERIC),
        _qi("jailtime", Kind.NUMERIC),
        _qi("c_charge_degree", Kind.BINARY),
        _protected("race"),
        _label("no_recid"),
    ]
)

_COMPAS_DATE = "%Y-%m-%d %H:%M:%S"


def prepare_compas(paths: dict[str, Path]) -> pa.Table:
    """COMPAS (ProPublica ``compas-scores-two-years.csv``): 6,907 rows, 6 QIs.

    - keep age, c_charge_degree, race, sex, priors_count, days_b_screening_arrest,
      two_year_recid, c_jail_in, c_jail_out and ``dropna`` (7,214 -> 6,907 rows; no
      ProPublica screening filter);
    - ``jailtime`` = (c_jail_out - c_jail_in) in whole days (``.dt.days``, i.e. floored: an
      exit earlier on the same day as the entry gives -1); the dates are dropped;
    - QIs in file order: sex (Male = 1, Female = 0; BINARY), age, priors_count,
      days_b_screening_arrest, jailtime (int64, NUMERIC), c_charge_degree (F = 1, M = 0; BINARY);
    - protected ``race``: Caucasian = 1 (favoured), every other race = 0;
    - label ``no_recid`` = 1 - two_year_recid (1 = did not recidivate within two years).
    """
    file = "compas-scores-two-years.csv"
    df = pd.read_csv(_path(paths, file), usecols=list(COMPAS_KEEP)).dropna()
    jail_in = pd.to_datetime(df["c_jail_in"], format=_COMPAS_DATE)
    jail_out = pd.to_datetime(df["c_jail_out"], format=_COMPAS_DATE)
    df["jailtime"] = (jail_out - jail_in).dt.days.astype("int64")
    days = df["days_b_screening_arrest"]
    if (days % 1 != 0).any():
        raise DataSourceError(f"{file}: days_b_screening_arrest has non-integral values")
    df["days_b_screening_arrest"] = days.astype("int64")
    df["sex"] = _map_codes(df["sex"], {"Male": 1, "Female": 0}, "sex", file)
    df["c_charge_degree"] = _map_codes(
        df["c_charge_degree"], {"F": 1, "M": 0}, "c_charge_degree", file
    )
    df["race"] = (df["race"] == "Caucasian").astype("int8")
    recid = _map_codes(df["two_year_recid"].astype(str), {"0": 0, "1": 1}, "two_year_recid", file)
    df["no_recid"] = (1 - recid).astype("int8")
    numeric = ("age", "priors_count", "days_b_screening_arrest", "jailtime")
    return _to_table(df, COMPAS_ROLES, {n: pa.int64() for n in numeric})


# --- German Credit ---------------------------------------------------------------------------

GERMAN_COLUMNS = (
    "checking",
    "duration",
    "credit_history",
    "purpose",
    "credit_amount",
    "savings",
    "employment",
    "inst_rate",
    "personal_status",
    "other_debtors",
    "residence_time",
    "property",
    "age",
    "other_inst",
    "housing",
    "num_credits",
    "job",
    "dependants",
    "phone",
    "foreigner",
    "credit",
)
_GERMAN_NUMERIC = (
    "duration",
    "credit_amount",
    "inst_rate",
    "residence_time",
    "age",
    "num_credits",
    "dependants",
)
_GERMAN_BINARY = ("phone", "foreigner")


def _german_qi(name: str) -> ColumnRole:
    if name in _GERMAN_NUMERIC:
        return _qi(name, Kind.NUMERIC)
    if name in _GERMAN_BINARY:
        return _qi(name, Kind.BINARY)
    return _qi(name, Kind.NOMINAL)


GERMAN_ROLES = TableRoles.of(
    [_german_qi("status" if n == "personal_status" else n) for n in GERMAN_COLUMNS if n != "credit"]
    + [_protected("sex"), _label("credit")]
)


def prepare_german(paths: dict[str, Path]) -> pa.Table:
    """Credit (Statlog German Credit ``german.data``): 1,000 rows, 20 QIs.

    - space separated, no header, 21 columns (20 attributes + class), named after [R];
    - ``personal_status`` is split into protected ``sex`` (A92, A95 female -> 0, else 1,
      favoured) and the nominal QI ``status`` (A91, A92 -> divorced; A93, A95 -> single;
      A94 -> married), which takes personal_status' place in the column order;
    - phone: A191 = 0, A192 = 1; foreigner: A201 = 1, A202 = 0 (BINARY QIs);
    - nominal QIs keep their A-codes as string values;
    - numeric QIs (int64): duration, credit_amount, inst_rate, residence_time, age,
      num_credits, dependants;
    - label ``credit``: class 1 (good) = 1, class 2 (bad) = 0.
    """
    file = "german.data"
    df = pd.read_csv(
        _path(paths, file),
        sep=" ",
        header=None,
        names=list(GERMAN_COLUMNS),
        dtype={n: "int64" for n in (*_GERMAN_NUMERIC, "credit")}
        | {n: object for n in GERMAN_COLUMNS if n not in (*_GERMAN_NUMERIC, "credit")},
    )
    ps = df["personal_status"]
    df["sex"] = _map_codes(
        ps, {"A91": 1, "A92": 0, "A93": 1, "A94": 1, "A95": 0}, "personal_status", file
    )
    df["status"] = ps.map(
        {"A91": "divorced", "A92": "divorced", "A93": "single", "A94": "married", "A95": "single"}
    )
    df["phone"] = _map_codes(df["phone"], {"A191": 0, "A192": 1}, "phone", file)
    df["foreigner"] = _map_codes(df["foreigner"], {"A201": 1, "A202": 0}, "foreigner", file)
    df["credit"] = _map_codes(df["credit"].astype(str), {"1": 1, "2": 0}, "credit", file)
    return _to_table(df, GERMAN_ROLES, {n: pa.int64() for n in _GERMAN_NUMERIC})


# --- Australian credit -----------------------------------------------------------------------

AUSTRALIAN_COLUMNS = tuple(f"A{i}" for i in range(1, 15)) + ("approved",)
_AUSTRALIAN_NUMERIC = ("A2", "A3", "A7", "A10", "A13", "A14")

AUSTRALIAN_ROLES = TableRoles.of(
    [
        _qi(n, Kind.NUMERIC if n in _AUSTRALIAN_NUMERIC else Kind.NOMINAL)
        for n in AUSTRALIAN_COLUMNS
        if n != "approved"
    ]
    + [_label("approved")]
)


def prepare_australian(paths: dict[str, Path]) -> pa.Table:
    """Statlog Australian Credit Approval ``australian.dat``: 690 rows, 14 anonymised attributes.

    - space separated, no header, 15 columns: A1-A14 and the class (1 = approved, ``+``);
    - A2, A3, A7, A10, A13, A14 are continuous (float64); A1, A4, A5, A6, A8, A9, A11, A12 are
      categorical codes, kept as strings (``"1"``, ``"2"``...);
    - label ``approved``: class 1 = 1 (positive), 0 = 0. The donors imputed the 37 incomplete
      cases of UCI's crx.data with the mode or mean: there is no missing value.
    """
    file = "australian.dat"
    df = pd.read_csv(
        _path(paths, file),
        sep=" ",
        header=None,
        names=list(AUSTRALIAN_COLUMNS),
        dtype={n: "float64" for n in _AUSTRALIAN_NUMERIC}
        | {n: str for n in AUSTRALIAN_COLUMNS if n not in (*_AUSTRALIAN_NUMERIC, "approved")}
        | {"approved": str},
    )
    df["approved"] = _map_codes(df["approved"], {"1": 1, "0": 0}, "approved", file)
    return _to_table(df, AUSTRALIAN_ROLES, {n: pa.float64() for n in _AUSTRALIAN_NUMERIC})


# --- registry --------------------------------------------------------------------------------

_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"

DATASETS: dict[str, DatasetDefinition] = {
    "adult": DatasetDefinition(
        name="adult",
        title="Income (UCI Adult / Census Income), adult.data + adult.test",
        files=(
            RawFile(
                "adult.data",
                "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
                f"{_UCI}/adult/adult.data",
            ),
            RawFile(
                "adult.test",
                "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
                f"{_UCI}/adult/adult.test",
            ),
        ),
        roles=ADULT_ROLES,
        prepare=prepare_adult,
        citation=(
            "Becker, B. and Kohavi, R. (1996). Adult. UCI Machine Learning Repository. "
            "https://doi.org/10.24432/C5XW20 (CC BY 4.0)."
        ),
    ),
    "compas": DatasetDefinition(
        name="compas",
        title="COMPAS (ProPublica, Broward County FL), two-year recidivism",
        files=(
            RawFile(
                "compas-scores-two-years.csv",
                "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
                "https://raw.githubusercontent.com/propublica/compas-analysis/master/"
                "compas-scores-two-years.csv",
            ),
        ),
        roles=COMPAS_ROLES,
        prepare=prepare_compas,
        citation=(
            "Angwin, J., Larson, J., Mattu, S. and Kirchner, L. (2016). Machine Bias. ProPublica. "
            "Data: https://github.com/propublica/compas-analysis."
        ),
    ),
    "german": DatasetDefinition(
        name="german",
        title="Credit (Statlog German Credit Data)",
        files=(
            RawFile(
                "german.data",
                "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
                f"{_UCI}/statlog/german/german.data",
            ),
        ),
        roles=GERMAN_ROLES,
        prepare=prepare_german,
        citation=(
            "Hofmann, H. (1994). Statlog (German Credit Data). UCI Machine Learning Repository. "
            "https://doi.org/10.24432/C5NC77 (CC BY 4.0)."
        ),
    ),
    "australian": DatasetDefinition(
        name="australian",
        title="Statlog (Australian Credit Approval)",
        files=(
            RawFile(
                "australian.dat",
                "3abe5af151afa50b999a9ba21cbc884e80d80a4050b716cf88b34a2e6ecb731c",
                # no verbatim UCI copy is byte-verified: this is the file of the shared data
                # folder (GitHub bdsul/grape datasets/australian.dat without its header line)
                "https://archive.ics.uci.edu/ml/machine-learning-databases/statlog/australian/"
                "australian.dat",
            ),
        ),
        roles=AUSTRALIAN_ROLES,
        prepare=prepare_australian,
        citation=(
            "Quinlan, R. Statlog (Australian Credit Approval). UCI Machine Learning Repository. "
            "https://doi.org/10.24432/C59012 (CC BY 4.0)."
        ),
    ),
}
