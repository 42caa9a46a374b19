"""The body of every error the service answers: `{"error": {"code", "message", "fields"}}`."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse


def error(
    status: int, code: str, message: str, fields: list[dict[str, str]] | None = None
) -> JSONResponse:
    """An error answer (`models.ErrorBody`); `fields` name each bad field and its problem."""
    body: dict[str, Any] = {"code": code, "message": message}
    if fields is not None:
        body["fields"] = fields
    return JSONResponse({"error": body}, status_code=status)
