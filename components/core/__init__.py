"""The shared core: descriptor and result types, discovery, shared checkers, evidence, metrics."""
