"""Errors that name what is wrong: the column (or spec key) and the rule it breaks."""

from __future__ import annotations


class PrivfairError(Exception):
    """Base class of every error privfair raises on purpose."""


class InputError(PrivfairError, ValueError):
    """A table or a parameter breaks a rule of the component that received it.

    ``column`` names the offending column (or parameter), ``rule`` the rule in a few words.
    """

    def __init__(self, column: str | None, rule: str, detail: str = "") -> None:
        self.column = column
        self.rule = rule
        self.detail = detail
        where = f"column '{column}'" if column is not None else "table"
        msg = f"{where}: {rule}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class SpecError(PrivfairError, ValueError):
    """A pipeline spec is malformed. ``key`` is the dotted path of the offending key."""

    def __init__(self, key: str, rule: str, source: str | None = None) -> None:
        self.key = key
        self.rule = rule
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}spec key '{key}': {rule}")


class DataSourceError(PrivfairError, RuntimeError):
    """A raw dataset file could not be found, downloaded or verified."""


class StoreError(PrivfairError):
    """The release store cannot be used: ``path`` names where, ``rule`` what is wrong (the store
    path is a file, a folder cannot be written, a release is incomplete...)."""

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"store '{path}': {rule}")


class ContractViolation(PrivfairError):
    """One or more declared guarantees do not hold on a candidate release."""

    def __init__(self, failed: list[str], detail: str = "") -> None:
        self.failed = failed
        msg = "guarantees failed: " + ", ".join(failed)
        if detail:
            msg += "\n" + detail
        super().__init__(msg)


class ClusterError(PrivfairError):
    """A Spark cluster could not be reached or used: ``master`` names it, ``reason`` says what
    went wrong in a few words (never a Java stack)."""

    def __init__(self, master: str, reason: str) -> None:
        self.master = master
        self.reason = reason
        super().__init__(f"execution.master: the Spark cluster at '{master}' {reason}")


class CheckerError(PrivfairError):
    """A guarantee's checker raised instead of returning a verdict: an error of the run (its
    code or its evidence is at fault), never a failed guarantee. ``raised``: one
    ``(guarantee id, kind, error)`` per checker that raised."""

    def __init__(self, raised: list[tuple[str, str, str]]) -> None:
        self.raised = list(raised)
        what = "; ".join(f"guarantee {gid} ({kind}): {error}" for gid, kind, error in raised)
        super().__init__(
            f"a checker raised instead of giving a verdict, so the release cannot be "
            f"validated: {what}"
        )


class EvidenceError(PrivfairError):
    """The algorithm's evidence builder raised (other than ``InputError``, the files not fitting
    together): an error of the run, never a verdict."""
