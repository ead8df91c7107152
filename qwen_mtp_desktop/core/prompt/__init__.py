"""The prompt: what stands between typed text and the runtime's tokenizer.

`template` renders conversations with the model's own Jinja chat template, under limits;
`special_tokens` escapes typed text so it never spells a control token; `context_limit` checks
that a prompt fits the model's context; `vocab_proof` proves the fast byte table decodes every
token as the runtime does; `guards` is the one object per loaded model that applies them all."""
