"""The Dagster face: definitions for a folder of specs (``privfair[dagster]``)."""
