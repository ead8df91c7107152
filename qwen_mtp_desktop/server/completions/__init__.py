"""`POST /v1/completions`: raw text in, raw text out (`route`; the check and the answer's shape
in `output`)."""
