"""The `server` command: the language server over standard input and output, when the `server`
extra is installed; else exit 2 with the one sentence that says how to install it."""

from __future__ import annotations

# No release is on PyPI yet (README, "Install and first run"): the extra comes from a checkout or a
# commit, as the Helm extra does (loading/helm/charts.py).
SERVER_EXTRA = ("kubelint-ports: error: the language server needs the server extra (pygls, lsprotocol): in a "
                "checkout, `pip install '.[server]'`; or from a commit, `pip install 'kubelint-ports[server] @ "
                "git+https://github.com/kubelint-ports/kubelint-ports@COMMIT'`")
EXIT_USAGE = 2


def server() -> None:
    """Serve findings to an editor: a language server (LSP) over standard input and output."""
    try:
        import lsprotocol.types  # noqa: F401
        import pygls.lsp.server  # noqa: F401
    except ImportError:
        import sys

        print(SERVER_EXTRA, file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    from kubelint_ports.loading.pool import allow_fork_server
    from kubelint_ports.server.protocol import run

    allow_fork_server()  # the first run's workers, though the server reads its input on a thread
    run()
