"""What every generating endpoint shares: the request models (`schema`), the body read and
validated (`parsing`), a request turned into engine messages and settings (`planning`, with
`tools`, `structured` and `images`), the turn run on its thread (`turns`), the shared POST
flow (`answer`, which each endpoint gives its answer shape), Server-Sent Events (`sse`), the
answer's tool calls, log-probabilities and speculative-decoding figures, and the state the
routes share (`state`)."""
