"""`kubelint-ports server`: the findings in the editor, over the Language Server Protocol (stdio).

After the engine, beside the command line: it resolves a run's settings as `lint` does
(`settings.py`, the workspace's `.kubelint-ports.yaml`), lints the whole workspace with the open
editors' texts laid over the files on disk (`loading.files.PLANNED`), keeps what each file read
gave in memory (`loading.memory_cache`), and publishes each open file's findings (`diagnostics`) with
their fixes and a suppression comment as code actions (`actions`). `command` is the `server`
command, which needs the `server` extra (pygls, lsprotocol); `protocol` is the pygls server.
docs/integrations.md, "Editors"."""
