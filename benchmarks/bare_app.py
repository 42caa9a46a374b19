"""A FastAPI endpoint that does nothing: the HTTP stack's own ceiling, for bench_http.py."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

app = FastAPI()


@app.post("/nothing")
def nothing(body: dict[str, Any]) -> dict[str, Any]:
    return body


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
