"""Files: reading what the app did not write with limits, writing atomically and privately.

`safe_files` bounds every read of untrusted files (size, nesting, encoding); `fileio` writes
atomically; `private_files` gives the app's own files owner-only modes; `paths` names the app's
data folders."""
