"""The app served over real HTTP on 127.0.0.1 and a free port, in a background thread: the one
way every test (and the screenshots) serves it.

Werkzeug's development server closes a response's iterable only after draining the client's
socket; when the client resets the connection there (a browser closing at a test's end), the
close is skipped and a file response (a static file, even a 304) is left open until garbage
collection, which pytest then reports as an error in whichever test runs at that moment. So
each response here closes its iterable itself once it is written, as gunicorn always does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: object, **kwargs: object) -> None:
        pass


class _ClosedWhenWritten:
    """WSGI middleware: the app's response iterable is closed once iterated to its end (or,
    when the write failed half-way, when this generator is collected)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return _written_then_closed(self.app(environ, start_response))


def _written_then_closed(iterable: Iterable[bytes]) -> Iterator[bytes]:
    try:
        yield from iterable
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            close()


@contextlib.contextmanager
def serve_wsgi(app: Any, quiet: bool = False) -> Iterator[str]:
    """``app`` on a loopback port (its base URL), threaded as in production; stopped, its
    socket closed and its thread joined on the way out."""
    server: BaseWSGIServer = make_server(
        "127.0.0.1", 0, _ClosedWhenWritten(app), threaded=True,
        request_handler=_Quiet if quiet else None)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              name="live-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        assert not thread.is_alive(), "the live server did not stop"
