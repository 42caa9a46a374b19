"""The memory as MCP tools (the official `mcp` SDK), for any MCP client to remember and recall.

Over stdio (`partner-memory mcp -n NAMESPACE`) the server acts on one
namespace for the client that started it. Mounted in `serve` at /mcp, each
request names its namespace and carries its key (`http.mcp_endpoint`); a
`Target` turns a tool call into the handle it may act on, checking the
scope the tool needs (read, write, or admin to forget). The tools are thin
calls into that handle; their descriptions are written for an LLM choosing
among them. Answers are the documents of docs/json.md; a library error
becomes the tool's error with its message.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar, get_type_hints

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry.trace import SpanKind
from pydantic import Field

from partner_memory.context.render import NOTHING_STORED, render_with_window
from partner_memory.documents import recall_document, slice_document, window_document
from partner_memory.errors import NotFoundError, PartnerMemoryError
from partner_memory.host_logging import root_logging_kept
from partner_memory.memory import PartnerMemory
from partner_memory.recall.query import RecallQuery, filter_fields
from partner_memory.requests import ForgetRequest, TurnInput
from partner_memory.service import MemoryService
from partner_memory.telemetry.instruments import span
from partner_memory.telemetry.names import MCP_METHOD, TOOL_NAME

INSTRUCTIONS = (
    "Long-term memory of this agent. After each exchange with the user, call remember_turn."
    " Before answering anything that may depend on the past (names, dates, preferences,"
    " earlier decisions), call recall. get_context gives the summarised recent history."
)


#: The handle a tool call acts on, if its caller may act with the scope given
#: ("read", "write" or "admin"); refusals raise ToolError, a namespace not made yet
#: NotFoundError.
Target = Callable[[Context, str], PartnerMemory]

P = ParamSpec("P")
R = TypeVar("R")


def _told(tool: Callable[P, R]) -> Callable[P, R]:
    """A library error reaches the client as the tool's error, with its message; each
    call is an MCP server span (`tools/call NAME`) holding the memory operation's."""
    attributes = {MCP_METHOD: "tools/call", TOOL_NAME: tool.__name__}
    name = f"tools/call {tool.__name__}"

    @functools.wraps(tool)
    def told(*args: P.args, **kwargs: P.kwargs) -> R:
        with span(name, attributes, kind=SpanKind.SERVER):
            try:
                return tool(*args, **kwargs)
            except PartnerMemoryError as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return told


def _with_filters(tool: Callable[P, R]) -> Callable[P, R]:
    """The tool's keyword arguments declared as the filter's fields (`RecallFilter`),
    with their descriptions and bounds, for the tool's schema."""
    signature = inspect.signature(tool)
    declared = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                f.kind,
                Field(description=f.description, min_length=f.min_length, max_length=f.max_length),
            ],
        )
        for f in filter_fields()
    ]
    hints = get_type_hints(tool)  # the schema is read from the signature: real types in it
    kept = [
        p.replace(annotation=hints[p.name])
        for p in signature.parameters.values()
        if p.kind != p.VAR_KEYWORD
    ]
    vars(tool)["__signature__"] = signature.replace(  # what inspect.signature reads
        parameters=[*kept, *declared], return_annotation=hints["return"]
    )
    return tool


def one_namespace(service: MemoryService, namespace: str) -> Target:
    """Every call acts on `namespace` (stdio: the client that started the server owns it)."""

    def target(ctx: Context, scope: str) -> PartnerMemory:
        return service.memory(namespace)

    return target


def build_server(target: Target) -> MCPServer:
    """An MCP server whose tools act on the handles `target` gives."""
    with root_logging_kept():  # the SDK's constructor configures the root logger
        server = MCPServer(name="partner-memory", instructions=INSTRUCTIONS)

    @server.tool(
        description="Store one exchange: what the user said and what you answered. Call it"
        " after every reply, so the memory can summarise and recall it later."
    )
    @_told
    def remember_turn(
        user_input: str, assistant_output: str, ctx: Context, source: str = "USER"
    ) -> dict[str, Any]:
        memory = target(ctx, "write")
        turn = memory.record(TurnInput(user_input, assistant_output, source))
        return {"namespace": memory.namespace, "message_ids": [turn.user.id, turn.assistant.id]}

    @server.tool(
        description="Search the long-term memory for what was said before, by words, meaning"
        " and dates ('what did we decide about the trip', 'what happened yesterday'). Returns"
        " the best matching original messages with their dates, and the summaries of the"
        " conversations that hold them. Use topic (like 'travel->japan') to keep to a topic;"
        " role ('user', 'assistant'), speaker (a participant's name), unit (a memory"
        " session's id) and metadata (key/value pairs the messages carry) to keep to those."
    )
    @_told
    @_with_filters
    def recall(
        query: str, ctx: Context, *, k: int = 10, topic: str | None = None, **kept: Any
    ) -> dict[str, Any]:
        memory = target(ctx, "read")
        asked = {"query": query, "k": k, "topic": topic, "activate": False} | kept
        found = memory.recall(RecallQuery.from_dict(asked))
        return recall_document(memory.namespace, found)

    @server.tool(
        description="The summarised recent history of the conversation, as the agent's"
        " context (XML), then the newest messages not summarised yet; before anything is"
        " stored it says so. Use it at the start of a session to remember where things"
        " stand."
    )
    @_told
    def get_context(ctx: Context) -> str:
        try:
            memory = target(ctx, "read")
        except NotFoundError:  # a namespace is made by its first write
            return NOTHING_STORED
        window = memory.window()  # first: a rolling in between repeats, never loses
        return render_with_window(memory.context(), window)

    @server.tool(
        description="The conversation so far that is not summarised yet (the window),"
        " oldest first: each message's text, speaker and time."
    )
    @_told
    def get_window(ctx: Context) -> dict[str, Any]:
        memory = target(ctx, "read")
        return window_document(memory.namespace, memory.window())

    @server.tool(
        description="List the stored memory sessions (units), newest first, with their"
        " dates and sizes; read one's summaries with read_slice."
    )
    @_told
    def list_units(ctx: Context, limit: int = 20) -> dict[str, Any]:
        memory = target(ctx, "read")
        page = memory.core.list_units(limit=limit)
        return {"namespace": memory.namespace} | page.to_dict()

    @server.tool(
        description="Read a summary (slice) of a memory session together with the exact"
        " original messages it summarises. Ids come from recall or list_units."
    )
    @_told
    def read_slice(unit_id: str, slice_id: str, ctx: Context) -> dict[str, Any]:
        return slice_document(target(ctx, "read").core, unit_id, slice_id)

    @server.tool(
        description="Forget messages everywhere, for good, when the user asks to forget"
        " something. Takes message ids from recall; summaries are rewritten without them."
    )
    @_told
    def forget_messages(message_ids: list[str], ctx: Context) -> dict[str, Any]:
        memory = target(ctx, "admin")
        count = memory.forget(ForgetRequest.messages(message_ids))
        return {"namespace": memory.namespace, "message_count": count}

    return server
