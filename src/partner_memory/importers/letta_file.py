"""Letta Agent Files (`.af`, Letta's `AgentFileSchema`): each agent a namespace.

An agent file holds `agents` (each with its `messages` and the `block_ids` of
its core memory) and the `blocks` they refer to. Messages become messages:
user text (a MemGPT-style JSON envelope, {"type": "user_message", "message":
...}, is opened; heartbeats, logins and system alerts are left out), and the
assistant's reply - its text, or the `message` it passed to `send_message`,
the way Letta agents answer. Other tool calls and their returns are kept in
the metadata of the reply that follows them; system prompts are left out. The
agent's core-memory blocks are held in the namespace's context as blocks named
by their labels (`held_blocks`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from partner_memory import json_text
from partner_memory.errors import InvalidInputError
from partner_memory.held_blocks import HeldBlock
from partner_memory.importers.source import Conversation, Imported, text_of
from partner_memory.ingest.transcripts import timestamp_ms

KIND = "letta-agent-file"
SOURCE = "letta"
_TOP = ("agents", "blocks")
#: What Letta calls the tool an agent answers the user with.
SEND_MESSAGE = "send_message"
_EVENTS = frozenset({"heartbeat", "login", "system_alert"})


def read(path: str, *, table: str | None = None, namespace: str | None = None) -> list[Imported]:
    """Every agent of the file; `namespace` names the namespace of a file of one agent."""
    if table is not None:
        raise InvalidInputError("--table is for database sources, not an agent file")
    try:
        document = json_text.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path}: not a JSON agent file ({exc})") from None
    if not isinstance(document, dict) or any(not isinstance(document.get(k), list) for k in _TOP):
        raise InvalidInputError(
            f"{path}: not a Letta agent file (an object with lists 'agents' and 'blocks')"
        )
    agents = document["agents"]
    if namespace is not None and len(agents) != 1:
        raise InvalidInputError(
            f"{path}: --namespace names one agent's namespace; the file holds {len(agents)}"
        )
    blocks = {b.get("id"): b for b in document["blocks"] if isinstance(b, dict)}
    return [_agent(path, agent, n, blocks, namespace) for n, agent in enumerate(agents, start=1)]


def _agent(
    path: str, agent: Any, n: int, blocks: dict[Any, Any], namespace: str | None
) -> Imported:
    where = f"{path} agent {n}"
    if not isinstance(agent, dict) or not isinstance(agent.get("messages", []), list):
        raise InvalidInputError(f"{where}: an agent is an object with a list of 'messages'")
    name = agent.get("name") or agent.get("id")
    if not isinstance(name, str):
        raise InvalidInputError(f"{where}: the agent has neither a name nor an id")
    conversation = Conversation(KIND, str(agent.get("id", name)))
    for m, message in enumerate(agent.get("messages", []), start=1):
        _message(conversation, message, f"{where} message {m}")
    held = []
    for block_id in agent.get("block_ids") or []:
        block = blocks.get(block_id)
        if block is None:
            raise InvalidInputError(f"{where}: block {block_id!r} is not among the file's blocks")
        label, value = block.get("label"), block.get("value", "")
        if not isinstance(label, str) or not isinstance(value, str):
            raise InvalidInputError(f"{where}: block {block_id!r} needs a label and a text value")
        held.append(HeldBlock(label, value, SOURCE))
    done = conversation.done(namespace or name, f"{path} agent {name}")
    return Imported(done.namespace, done.transcript, tuple(held), done.skipped)


def _message(conversation: Conversation, message: Any, origin: str) -> None:
    if not isinstance(message, dict) or "role" not in message:
        raise InvalidInputError(f"{origin}: a message is an object with a role")
    role, key = str(message["role"]), message.get("id", origin)
    at = timestamp_ms(message.get("created_at"), f"{origin} created_at")
    text = text_of(message.get("content"))
    if role == "user":
        text, event = _opened(text)
        if event:
            conversation.skipped += 1
            return
        conversation.add("user", text, key=key, origin=origin, timestamp=at)
    elif role == "assistant":
        reply = ""
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            if function.get("name") == SEND_MESSAGE:
                reply = _argument(function.get("arguments"), "message") or reply
            else:
                name = function.get("name", "")
                conversation.call(call.get("id"), name, function.get("arguments"))
        # a MemGPT-style agent's text is its inner thoughts; its reply went by send_message
        conversation.add("assistant", reply or text, key=key, origin=origin, timestamp=at)
    elif role == "tool":
        for given in message.get("tool_returns") or []:
            if isinstance(given, dict):
                conversation.output(message.get("tool_call_id"), given.get("func_response", ""))
        if not message.get("tool_returns"):
            conversation.output(message.get("tool_call_id"), text)
    else:  # system prompts, approvals
        conversation.skipped += 1


def _opened(text: str) -> tuple[str, bool]:
    """The user's words, and whether the message was an event (heartbeat, login)."""
    if not text.startswith("{"):
        return text, False
    try:
        envelope = json.loads(text)
    except ValueError:
        return text, False
    if not isinstance(envelope, dict):
        return text, False
    if envelope.get("type") in _EVENTS:
        return "", True
    said = envelope.get("message")
    return (said, False) if isinstance(said, str) else (text, False)


def _argument(arguments: Any, name: str) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    value = arguments.get(name) if isinstance(arguments, dict) else None
    return value if isinstance(value, str) else ""
