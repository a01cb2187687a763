"""Every field of every guarantee is read by its checker: on each algorithm's example release,
changing any one field of any declared guarantee changes the verdict, the message or the
observed/expected values the checker reports."""

from __future__ import annotations

import typing

import pytest

from privfair.components.core.checks import check_guarantee
from privfair.components.core.descriptor import resolve
from privfair.components.core.registry import algorithms
from privfair.schemas.contracts import Guarantee

ALGORITHMS = algorithms()


def _candidates(g: Guarantee, name: str, value, columns: list[str]) -> list:
    """Values to try for field ``name`` (at least one should change a reading checker's result)."""
    ann = type(g).model_fields[name].annotation
    args = typing.get_args(ann)
    out: list = []
    if typing.get_origin(ann) is typing.Literal:
        out += [a for a in args if a != value]
    elif isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int) or int in args:
        base = value if isinstance(value, int) else 1
        out += [0, 1, -1, base + 1, base * 1000 + 7]
    elif isinstance(value, float) or float in args:
        base = value if isinstance(value, float) else 0.5
        out += [0.0, -1.0, 1.0, base / 3 + 0.123, 1e9]
    elif isinstance(value, str):
        out += [c for c in columns if c != value][:3] + ["no_such_thing"]
    elif isinstance(value, tuple):
        out += [(), (value[0],) if value else ("no_such_thing",), (*value, "no_such_thing")]
    if value is not None and type(None) in args:
        out.append(None)
    return [c for c in out if c != value]


def _outcome(g, frames):
    try:
        r = check_guarantee(g, frames)
    except Exception as e:  # a value the checker cannot take: it was read
        return ("raised", type(e).__name__)
    return (r.passed, r.message, repr(r.observed), repr(r.expected), repr(r.offending))


def _cases():
    out = []
    for algo in ALGORITHMS:
        for seed in (0, 3):
            table, params = resolve(algo.example)(seed)
            for i, g in enumerate(algo.required_contract(params, table)):
                for f in type(g).model_fields:
                    if f not in ("id", "kind"):
                        out.append(
                            pytest.param(
                                algo,
                                seed,
                                i,
                                f,
                                id=f"{algo.name}-{seed}-{g.title.replace(' ', '-')}-{f}",
                            )
                        )
    return out


@pytest.fixture(scope="module")
def runs():
    cache: dict = {}

    def get(algo, seed):
        if (algo.name, seed) not in cache:
            table, params = resolve(algo.example)(seed)
            result = algo(table, params)
            frames = resolve(algo.evidence)(table, result.outputs, result.sidecars, params)
            cache[(algo.name, seed)] = (table, result, frames)
        return cache[(algo.name, seed)]

    return get


@pytest.mark.parametrize(("algo", "seed", "index", "field"), _cases())
def test_every_field_is_read(runs, algo, seed, index, field):
    table, result, frames = runs(algo, seed)
    g = result.contract[index]
    columns = table.column_names + result.table.column_names
    base = _outcome(g, frames)
    tried = []
    # try the field alone, then with each optional companion field set (e.g. a trace sample,
    # without which the sample's seed is not used)
    contexts = [{}] + [
        {f: 1}
        for f, info in type(g).model_fields.items()
        if f != field and getattr(g, f) is None and type(None) in typing.get_args(info.annotation)
    ]
    for ctx in contexts:
        start = g.model_copy(update=ctx)
        ref = _outcome(start, frames) if ctx else base
        for value in _candidates(g, field, getattr(g, field), columns):
            tried.append((ctx, value))
            if _outcome(start.model_copy(update={field: value}), frames) != ref:
                return
    pytest.fail(f"changing {g.title}.{field} never changed the checker's result (tried {tried})")
