"""The black box a report is about, when the data hold outcomes rather than decisions.

``decide`` trains a scikit-learn classifier on a seeded share of the records (features: the
``quasi_identifier``, ``public`` and ``sensitive`` columns; target: the label) and lets it decide
every record, as the company's model would. The model card (kind, features, split sizes and
seed, accuracy on both parts, positive rate) goes into the run's metrics (``model``), which stay
with the owner: its accuracies and exact positive rate are functions of the true decisions (the
positive rate with the report's group rates gives the true parity back). Only its parameters
and roles (kind, target, features, training share) are public (``decisions``); which rows
trained it is the internal ``training`` sidecar.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.core.inputs import member, null_options
from privfair.components.transparency.params import ATRParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Role, TableRoles

__all__ = ["decide"]


def _features(table: pa.Table, roles: TableRoles) -> tuple[list[str], list[str]]:
    numeric, nominal = [], []
    for c in roles:
        if c.role not in (Role.QUASI_IDENTIFIER, Role.PUBLIC, Role.SENSITIVE):
            continue
        t = table.column(c.name).type
        if (pa.types.is_integer(t) or pa.types.is_floating(t)) and c.kind.value == "numeric":
            if table.column(c.name).null_count:
                raise InputError(
                    c.name,
                    "a numeric model feature must have no missing values",
                    null_options(c.name),
                )
            numeric.append(c.name)
        else:
            nominal.append(c.name)
    return numeric, nominal


def decide(
    table: pa.Table, roles: TableRoles, label: str, params: ATRParams
) -> tuple[np.ndarray, dict, np.ndarray]:
    """(decision per record as 0/1 floats, model card, training-row mask)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    numeric, nominal = _features(table, roles)
    if not numeric and not nominal:
        raise InputError(None, "a model needs features (quasi_identifier, public, sensitive)")
    col = table.column(label)
    if col.null_count:
        raise InputError(
            label, "the model's target must have no missing values", null_options(label)
        )
    positive = roles[label].positive
    if positive is None:
        raise InputError(label, "the target needs its positive value ('positive')")
    y = member(col, positive).astype(np.int64)
    if y.min() == y.max():
        raise InputError(label, "the model's target must take both values")
    df = table.select(numeric + nominal).to_pandas()
    for c in nominal:
        df[c] = df[c].astype(object).where(df[c].notna(), "<missing>").astype(str)
    n = table.num_rows
    rng = np.random.default_rng(params.model_seed)
    train = np.zeros(n, dtype=bool)
    train[rng.permutation(n)[: max(1, int(round(params.train_fraction * n)))]] = True
    prep = ColumnTransformer(
        [
            ("numeric", StandardScaler(), numeric),
            ("nominal", OneHotEncoder(handle_unknown="ignore"), nominal),
        ]
    )
    clf = (
        LogisticRegression(max_iter=2000, random_state=params.model_seed)
        if params.model == "logistic_regression"
        else DecisionTreeClassifier(max_depth=6, random_state=params.model_seed)
    )
    pipe = make_pipeline(prep, clf).fit(df[train], y[train])
    decided = pipe.predict(df).astype(np.float64)
    test = ~train
    card = {
        "kind": params.model,
        "target": label,
        "features": numeric + nominal,
        "train_fraction": params.train_fraction,
        "seed": params.model_seed,
        "train_rows": int(train.sum()),
        "test_rows": int(test.sum()),
        "accuracy_train": float((decided[train] == y[train]).mean()),
        "accuracy_test": float((decided[test] == y[test]).mean()) if test.any() else None,
        "positive_rate": float(decided.mean()),
    }
    return decided, card, train
