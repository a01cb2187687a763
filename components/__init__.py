"""The algorithms and the metrics and checks they are judged by: pure functions over Arrow/NumPy.

A component never imports an orchestrator or Great Expectations.
"""
