"""Before an export: can this checkpoint be exported with its MTP head, here, now? `checks`
runs the checklist (`checklist`: pass / warn / fail, each with a fix) over the checkpoint read
without loading it (`checkpoint`), the size and memory it needs (`estimate`) and the export
toolkit installed (`toolkit`)."""
