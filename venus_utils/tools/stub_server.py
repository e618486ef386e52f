"""A local HTTP stand-in for Serper, Jina Reader and an OpenAI-compatible summariser, with injectable faults.

Used by the reliability tests and ``benchmarks/bench_tools.py``; also handy to try the web backends offline::

    with StubServer(latency_s=0.2) as stub:
        SerperSearch(api_url=stub.url + "/search")
        JinaVisit(reader_url=stub.url + "/reader", api_base=stub.url + "/v1")

A fault is chosen by a keyword inside the search query, the visited URL or the visit goal:
``hang`` (no answer for ``hang_s``), ``http429`` (429 twice, then fine), ``http500`` (always 500),
``http503once`` (503 once), ``badjson`` (a broken JSON body), ``slowbody`` (the body trickles in over
``slow_s``), ``noresults`` (no ``organic`` key), ``emptypage`` (reader returns nothing), ``badsummary`` (the
summariser never answers JSON), ``badsummaryonce`` (the first reply is not JSON), ``leakkey`` (the reply
echoes the API key it received).  ``/v1/completions`` (a token prompt) and ``/v1/chat/completions`` with model
``agent`` play a policy model that always replies ``completion_text``; ``GET /v1/models`` lists
``served_models`` (none by default, as a server that does not say its model name).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", slow: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not slow:
            self.wfile.write(body)
            return
        step = max(1, len(body) // 20)
        for i in range(0, len(body), step):
            time.sleep(self.server.stub.slow_s / 20)
            try:
                self.wfile.write(body[i : i + step])
                self.wfile.flush()
            except OSError:
                return

    def _fault(self, key: str) -> str | None:
        stub = self.server.stub
        with stub.lock:
            stub.hits[key] += 1
            n = stub.hits[key]
        time.sleep(stub.latency_s)
        for fault in (
            "hang",
            "http429",
            "http500",
            "http503once",
            "badjson",
            "slowbody",
            "noresults",
            "emptypage",
            "badsummaryonce",
            "badsummary",
            "leakkey",
        ):
            if fault in key:
                if fault == "hang":
                    time.sleep(stub.hang_s)
                if fault == "http429" and n <= 2:
                    return "429"
                if fault == "http503once" and n <= 1:
                    return "503"
                if fault == "badsummaryonce" and n > 1:
                    return None
                return fault
        return None

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.stub.headers.append(dict(self.headers))
        if self.path.endswith("/search"):
            return self._search(body)
        if self.path.endswith("/completions") and (body.get("prompt") is not None or body.get("model") == "agent"):
            return self._agent(body)
        if self.path.endswith("/chat/completions"):
            return self._chat(body)
        self._send(404, b'{"error": "not found"}')

    def do_GET(self):  # noqa: N802
        self.server.stub.headers.append(dict(self.headers))
        if self.path.rstrip("/").endswith("/v1/models"):
            models = [{"id": name, "object": "model", "owned_by": "stub"} for name in self.server.stub.served_models]
            return self._send(200, json.dumps({"object": "list", "data": models}).encode())
        prefix = "/reader/"
        if not self.path.startswith(prefix):
            return self._send(404, b"not found", "text/plain")
        url = unquote(self.path[len(prefix) :])
        fault = self._fault("reader:" + url)
        if fault in ("429", "503", "http500"):
            return self._send({"429": 429, "503": 503}.get(fault, 500), b"error", "text/plain")
        if fault == "emptypage":
            return self._send(200, b"", "text/plain")
        text = (
            f"Title: {url}\n\nURL Source: {url}\n\nMarkdown Content:\nThis page describes {url}. "
            f"The company was founded in 1931 by Ada Example. Its headquarters are in Springfield. "
        )
        if fault == "leakkey":
            text += self.headers.get("Authorization", "")
        self._send(200, text.encode(), "text/plain", slow=fault == "slowbody")

    def _search(self, body: dict) -> None:
        q = str(body.get("q", ""))
        fault = self._fault("search:" + q)
        if fault in ("429", "503", "http500"):
            return self._send({"429": 429, "503": 503}.get(fault, 500), b'{"message": "error"}')
        if fault == "badjson":
            return self._send(200, b'{"organic": [{"title": "broken"')
        if fault == "noresults":
            return self._send(200, json.dumps({"searchParameters": {"q": q}}).encode())
        organic = [
            {
                "title": f"Result {i} for {q}",
                "link": f"https://example.org/{q.replace(' ', '-')}/{i}",
                "snippet": f"Snippet {i} about {q}.",
                "date": "Jan 1, 2025",
                "position": i,
            }
            for i in range(1, int(body.get("num", 10)) + 1)
        ]
        if fault == "leakkey":
            organic[0]["snippet"] += " key=" + self.headers.get("X-API-KEY", "")
        self._send(200, json.dumps({"organic": organic}).encode(), slow=fault == "slowbody")

    def _agent(self, body: dict) -> None:
        """A policy model: always ``stub.completion_text`` (token ids too, when ``stub.completion_ids`` is set)."""
        stub = self.server.stub
        self._fault("agent")
        choice = {"finish_reason": "stop", "stop_reason": None}
        if "prompt" in body:
            choice["text"] = stub.completion_text
            if stub.completion_ids is not None and body.get("return_tokens_as_token_ids"):
                choice["logprobs"] = {"tokens": [f"token_id:{i}" for i in stub.completion_ids]}
        else:
            choice["message"] = {"role": "assistant", "content": stub.completion_text}
        stub.requests.append(body)
        self._send(200, json.dumps({"choices": [choice]}).encode())

    def _chat(self, body: dict) -> None:
        prompt = body["messages"][-1]["content"]
        goal = prompt.split("## User goal\n", 1)[-1].split("\n", 1)[0]
        fault = self._fault("chat:" + goal)
        if fault in ("429", "503", "http500"):
            return self._send({"429": 429, "503": 503}.get(fault, 500), b'{"error": "busy"}')
        if fault == "badjson":
            return self._send(200, b'{"choices": [')
        if fault in ("badsummary", "badsummaryonce"):
            content = "I could not do that."
        else:
            content = (
                "```json\n"
                + json.dumps(
                    {
                        "rational": "The page states the founding.",
                        "evidence": "The company was founded in 1931 by Ada Example.",
                        "summary": f"For the goal '{goal}': founded in 1931 by Ada Example.",
                    }
                )
                + "\n```"
            )
        self._send(
            200,
            json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode(),
            slow=fault == "slowbody",
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    stub: StubServer


class StubServer:
    """``with StubServer() as stub:`` serves on ``stub.url`` (127.0.0.1, a free port) in a background thread."""

    def __init__(self, latency_s: float = 0.0, hang_s: float = 30.0, slow_s: float = 5.0):
        self.latency_s, self.hang_s, self.slow_s = latency_s, hang_s, slow_s
        self.hits: Counter = Counter()
        self.headers: list[dict] = []
        self.requests: list[dict] = []  # bodies sent to the policy-model routes
        self.completion_text = "Done.\n</think>\n<answer>\nstub answer\n</answer>"
        self.completion_ids: list[int] | None = None
        self.served_models: list[str] = []  # what GET /v1/models lists
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
