"""Column roles, contract types, dataset definitions and the pipeline-spec model.

This package imports nothing else of privfair: every other package depends on it.
"""
