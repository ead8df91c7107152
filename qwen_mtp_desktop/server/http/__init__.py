"""HTTP plumbing every route shares and no endpoint knows: errors in OpenAI's shape, the
Host, key and CORS guard, guarded connections, the request memory budget, the request log, and
the check that every request field is honoured or refused."""
