"""An OpenAI-compatible server process that crashes the way a miscompiled llama.cpp does: on its first completion.

Run as ``python tests/support/fakes/crashing_server.py PORT``. It answers ``GET /v1/models`` as llama-cpp-python's
server does (``{"object": "list", "data": [{"id", "object": "model", "owned_by", "permissions"}]}``) and, on
``POST /v1/chat/completions``, kills itself with SIGSEGV before replying: the client's connection drops and
nothing answers on the port afterwards, as after llama.cpp's AMX kernels fault on a VM without AMX.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

MODEL = "crashing-model"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the handler's API)
        if self.path.rstrip("/") != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps(
            {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "owned_by": "me", "permissions": []}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        os.kill(os.getpid(), signal.SIGSEGV)

    def log_message(self, *_args) -> None:
        pass


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the deliberate crash
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
