"""What the framework adapters' tests share: the framework, and a model to drive it.

A framework that is not installed skips its tests locally, never under CI=true
(`.ci/run` installs every adapter's extra)."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from partner_memory.service import MemoryService


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


def remembers_across_restarts_and_rolling(
    store_url: str, model: Model, ask: Callable[[MemoryService, str, str], str]
) -> None:
    """The scenario every adapter passes through its framework's runner: `ask(service,
    user, text)` runs one turn and returns the answer. Each turn shows the model what
    the user said before (after a restart: a new service on the same database; after
    rolling: the summary), never another user's, and nothing once it is forgotten."""
    with MemoryService.open(store_url) as service:
        assert ask(service, "user-7", "My cat is called Luna") == "answer 1"
        ask(service, "user-7", "What is my cat called?")
        assert "Luna" in model.seen[-1]
        assert "answer 1" in model.seen[-1]
        ask(service, "user-8", "What is my cat called?")
        assert "Luna" not in model.seen[-1]

    with MemoryService.open(store_url) as service:  # a restart
        ask(service, "user-7", "Remind me of her name")
        assert "Luna" in model.seen[-1]
        assert service.memory("user-7").roll_now(idle=True) is not None
        assert service.memory("user-7").window() == []
        ask(service, "user-7", "And her name again?")
        assert "dialog_history" in model.seen[-1]
        assert "Luna" in model.seen[-1]
        service.memory("user-7").forget_all()
        ask(service, "user-7", "What is my cat called?")
        assert "Luna" not in model.seen[-1]
