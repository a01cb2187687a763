"""The cost of protection: an evaluation protocol against a holdout, its runs over a grid and the page of results (``evaluate``)."""
