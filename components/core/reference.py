"""The parameter reference: every algorithm's parameters with type, default, range and meaning,
generated from its descriptor and its ``Params`` model (pydantic field info, constraints,
descriptions and the model's docstring), never written by hand.

``privfair describe`` prints it (one algorithm, or the list of them), ``privfair describe
--markdown`` writes the page checked in as ``components/PARAMETERS.md`` (a test regenerates it
and fails on drift). A ``Params`` field without a ``description`` is an error here, so no
parameter can be added without its meaning.

>>> from privfair.components.core.registry import algorithm
>>> [p for p in parameters(algorithm("mdav")) if p.name == "k"][0]
Param(name='k', type='int', default='required', range='≥ 2', meaning='minimum group size (k-anonymity level)')
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from privfair.components.core.descriptor import Algorithm
from privfair.schemas.errors import SpecError

__all__ = ["Param", "named", "parameters", "type_name", "describe", "listing", "markdown"]


@dataclass(frozen=True)
class Param:
    """One parameter as the reference shows it: each field a short text."""

    name: str
    type: str
    default: str
    range: str
    meaning: str


def named(name: str) -> Algorithm:
    """The registered algorithm ``name``; ``SpecError`` (key ``component.name``) listing the
    known ones otherwise."""
    from privfair.components.core.registry import algorithm, known_names

    if name not in known_names():
        known = ", ".join(sorted(known_names()))
        raise SpecError("component.name", f"unknown algorithm '{name}'; known: {known}")
    return algorithm(name)


def type_name(annotation: object) -> str:
    """A reader's name of a parameter's type: ``Literal`` values joined by ``|``, ``X | None``,
    containers with their item types, models by their class name.

    >>> from typing import Literal
    >>> type_name(Literal["a", "b"]), type_name(int | None), type_name(tuple[float, ...])
    ("'a' | 'b'", 'int | None', 'tuple[float, ...]')
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if annotation is type(None):
        return "None"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _range(info: FieldInfo) -> str:
    """The field's numeric bounds (pydantic's ``ge``/``gt``/``le``/``lt`` constraints, kept
    in ``FieldInfo.metadata`` as objects with that one attribute), else ``—``."""
    parts = []
    for meta in info.metadata:
        for attr, sign in _BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return ", ".join(parts) or "—"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, tuple):
        value = list(value)
    # six significant digits: a third of the budget reads 0.333333, delta stays 1e-09
    if isinstance(value, float):
        return repr(float(f"{value:.6g}"))
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        value = [float(f"{v:.6g}") for v in value]
    return json.dumps(value, ensure_ascii=False) if value is not None else "None"


def parameters(algo: Algorithm) -> list[Param]:
    """The parameters of ``algo`` in the order its ``Params`` model declares them.

    Raises
    ------
    ValueError
        A field without a ``description``: every parameter must say what it means.
    """
    return _fields(algo.params, "")


def _fields(model: type[BaseModel], prefix: str) -> list[Param]:
    """The rows of ``model``'s fields, each followed by the fields of the models it holds
    (``fairness[].type``: an item of a list; ``bins.*.start``: a value of a mapping)."""
    out = []
    for name, info in model.model_fields.items():
        if not info.description:
            raise ValueError(
                f"{model.__module__}.{model.__name__}.{name} has no description: "
                "give it Field(description=...)"
            )
        meaning = " ".join(info.description.split())
        path = prefix + name
        out.append(Param(path, type_name(info.annotation), _default(info), _range(info), meaning))
        for inner, where in _models(info.annotation, path):
            out += _fields(inner, where + ".")
    return out


def _models(annotation: object, path: str) -> list[tuple[type[BaseModel], str]]:
    """The pydantic models inside a type, with the path of their values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, path)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset):
        return [m for a in args if a is not Ellipsis for m in _models(a, path + "[]")]
    if origin is dict and len(args) == 2:
        return _models(args[1], path + ".*")
    return [m for a in args for m in _models(a, path)]


def _rules(algo: Algorithm) -> str:
    """The model's docstring (its rules across parameters), one paragraph per blank line."""
    doc = inspect.getdoc(algo.params) or ""
    return doc if doc and doc != inspect.getdoc(algo.params.__mro__[1]) else ""


def _facts(algo: Algorithm) -> list[tuple[str, str]]:
    dp = "yes (privacy cost from the params and the schema)" if algo.cost else "no"
    return [
        ("family", algo.family),
        ("outputs", ", ".join(algo.outputs)),
        ("row level", "yes" if algo.row_level else "no (new, aggregate tables)"),
        ("differentially private", dp),
        ("paper", " ".join(algo.paper.split()) or "—"),
    ]


def describe(algo: Algorithm) -> str:
    """``algo`` for a terminal: what it is, its rules across parameters, then one block per
    parameter (type, default, range, meaning)."""
    lines = [f"{algo.name}: {algo.title}"]
    lines += [f"  {k}: {v}" for k, v in _facts(algo)]
    rules = _rules(algo)
    if rules:
        lines += ["", *rules.splitlines()]
    lines += ["", "parameters (component.params in a spec, --set KEY=VALUE on the command line):"]
    for p in parameters(algo):
        lines.append(
            f"  {p.name}: {p.type} = {p.default}" + ("" if p.range == "—" else f"  ({p.range})")
        )
        lines.append(f"      {p.meaning}")
    return "\n".join(lines)


def listing(algos: list[Algorithm]) -> str:
    """One line per algorithm: name, family, title and parameter names."""
    lines = []
    for a in algos:
        names = ", ".join(a.params.model_fields)
        lines.append(f"{a.name:<11} {a.family:<17} {a.title}")
        lines.append(f"{'':<11} parameters: {names}")
    lines.append("privfair describe ALGO for each parameter's type, default, range and meaning")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return re.sub(r"\s+", " ", text).replace("|", "\\|")


def markdown(algos: list[Algorithm]) -> str:
    """The whole reference as one Markdown page (what ``components/PARAMETERS.md`` holds)."""
    out = [
        "# Algorithm parameters",
        "",
        "Generated by `privfair describe --markdown` from each algorithm's descriptor and its",
        "`Params` model; do not edit by hand (`tests/common/test_reference.py` fails when this",
        "page and the code differ). Parameters go under `component.params` in a spec, or",
        "`--set KEY=VALUE` on the command line.",
        "",
    ]
    out += [f"- [`{a.name}`](#{a.name}): {a.title}" for a in algos]
    for a in algos:
        out += ["", f"## {a.name}", "", f"**{a.title}**", ""]
        out += [f"- {k}: {_cell(v)}" for k, v in _facts(a)]
        rules = _rules(a)
        if rules:
            out += ["", *[ln.rstrip() for ln in rules.splitlines()]]
        out += ["", "| parameter | type | default | range | meaning |", "|---|---|---|---|---|"]
        for p in parameters(a):
            out.append(
                f"| `{p.name}` | `{_cell(p.type)}` | `{_cell(p.default)}` | {_cell(p.range)} "
                f"| {_cell(p.meaning)} |"
            )
    return "\n".join(out) + "\n"
