"""`POST /v1/chat/completions`: the route (`route`) and the answer in OpenAI's shape, whole or
streamed (`output`)."""
