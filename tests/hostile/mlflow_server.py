"""A loopback server that answers the MLflow tracking REST calls ddptrain's runs make (experiments, runs,
log-batch, update), for MLflow's own client — and that can stop answering after a number of requests, or demand
credentials. Artifacts go to a local folder (the runs' artifact URI), as with a server that keeps them elsewhere."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional


class MlflowLikeServer:
    def __init__(self, artifacts: Path, stall_after: Optional[int] = None, password: Optional[str] = None):
        self.artifacts, self.stall_after, self.password = artifacts, stall_after, password
        self.requests: List[str] = []
        self.runs: Dict[str, Dict] = {}
        self.metrics: List[Dict] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                server.answer(self, {})

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.answer(self, body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.port = self.httpd.server_address[1]

    def url(self, user: Optional[str] = None) -> str:
        auth = f"{user}:{self.password}@" if user else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    def answer(self, handler, body: Dict) -> None:
        path = handler.path.split("?", 1)[0]
        self.requests.append(path)
        if self.stall_after is not None and len(self.requests) > self.stall_after:
            time.sleep(600)  # accepted, never answered
            return
        if self.password is not None and not self._authorised(handler):
            self._send(handler, 401, {"error_code": "UNAUTHENTICATED", "message": "bad credentials"})
            return
        self._send(handler, 200, self._reply(path.rsplit("/mlflow/", 1)[-1], body))

    def _authorised(self, handler) -> bool:
        header = handler.headers.get("Authorization", "")
        return header.startswith("Basic ") and base64.b64decode(header[6:]).decode().endswith(":" + self.password)

    def _experiment(self) -> Dict:
        return {
            "experiment_id": "1",
            "name": "ddptrain",
            "artifact_location": self.artifacts.as_uri(),
            "lifecycle_stage": "active",
        }

    def _reply(self, call: str, body: Dict) -> Dict:
        if call in ("experiments/get-by-name", "experiments/get"):
            return {"experiment": self._experiment()}
        if call == "experiments/search":
            return {"experiments": [self._experiment()]}
        if call == "experiments/create":
            return {"experiment_id": "1"}
        if call == "runs/create":
            run_id = uuid.uuid4().hex
            info = {
                "run_id": run_id,
                "run_uuid": run_id,
                "experiment_id": "1",
                "run_name": body.get("run_name", ""),
                "status": "RUNNING",
                "start_time": int(time.time() * 1000),
                "artifact_uri": (self.artifacts / run_id).as_uri(),
                "lifecycle_stage": "active",
            }
            self.runs[run_id] = info
            return {"run": {"info": info, "data": {}}}
        if call == "runs/log-batch":
            self.metrics.extend(body.get("metrics", []))
            return {}
        if call == "runs/update":
            info = self.runs.get(body.get("run_id", ""), {})
            info["status"] = body.get("status", info.get("status"))
            return {"run_info": info}
        if call == "runs/get":
            return {"run": {"info": self.runs.get(body.get("run_id", ""), {}), "data": {}}}
        return {}

    @staticmethod
    def _send(handler, status: int, payload: Dict) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
