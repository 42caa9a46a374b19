"""What the framework adapters' tests share: the framework, and a model to drive it.

A framework that is not installed skips its tests locally, never under CI=true
(`.ci/run` installs every adapter's extra)."""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType
from typing import Any

import pytest


def framework(module: str) -> ModuleType:
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def said_to_model(body: dict[str, Any]) -> str:
    """Everything one chat-completions request showed the model, as one text."""
    return json.dumps(body.get("messages", []), ensure_ascii=False)


class Model:
    """Answers each request in turn, and keeps what each one showed the model."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.seen.append(said_to_model(body))
        return f"answer {len(self.seen)}"
