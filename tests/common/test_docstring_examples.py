"""Every example in privfair's docstrings runs and prints what it shows (``doctest``), module
by module, imported by its installed name (``privfair...``) as a user imports it."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest


def _modules() -> list[str]:
    import privfair.components
    import privfair.schemas

    names = ["privfair"]
    infos = [
        *pkgutil.walk_packages(privfair.__path__, "privfair."),
        *pkgutil.walk_packages(privfair.components.__path__, "privfair.components."),
        *pkgutil.walk_packages(privfair.schemas.__path__, "privfair.schemas."),
    ]
    for info in infos:
        if info.name.endswith("__main__"):
            continue  # a command: importing it runs it
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str, monkeypatch, tmp_path):
    # imported where the suite runs (a module may read the current directory at import), and
    # its examples run in a folder of their own: an example that writes a file writes it there
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    if not tests:
        pytest.skip("no examples")
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
