"""A LlamaIndex `FunctionAgent` whose `Memory` has a `PartnerMemoryBlock`, on every SQL
backend and through a remote `serve`: what `Memory` flushes is recorded, and each turn
shows the model the flushed messages, the rolled summary and what recall finds, after
a restart (a new `Memory`: its short-term queue is gone) and after rolling; two users
stay apart; a forgotten namespace gives nothing back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from partner_memory import InvalidInputError
from partner_memory.client import MemoryClient
from partner_memory.service import MemoryService
from tests.frameworks import (
    Model,
    delivers_the_facts,
    framework,
    remembers_across_restarts_and_rolling,
)
from tests.http_server import Server

framework("llama_index.core")

# LlamaIndex's workflows find an agent's steps by reading every attribute of the agent,
# pydantic's deprecated ones included
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
T = TypeVar("T")

from examples.llama_index_model import ChatCompletions  # noqa: E402
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
)
from llama_index.core.memory import Memory  # noqa: E402

from partner_memory.integrations.llama_index import (  # noqa: E402
    SESSION_KEY,
    PartnerMemoryBlock,
    message_of,
)


class Chats:
    """Turns on one event loop (a `Memory`'s chat store is bound to the loop that opened
    it), each `Memory` flushing after about a turn (tokens counted as words, so no
    tokenizer is downloaded); `close` closes their chat stores."""

    def __init__(self, fake_llm: Any) -> None:
        self.fake_llm = fake_llm
        self.loop = asyncio.new_event_loop()
        self.memories: list[Memory] = []

    def memory(self, block: PartnerMemoryBlock, session_id: str, **options: Any) -> Memory:
        options = {"token_limit": 12, "token_flush_size": 4, **options}
        memory = Memory.from_defaults(
            session_id=session_id, memory_blocks=[block], tokenizer_fn=str.split, **options
        )
        self.memories.append(memory)
        return memory

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def ask(self, memory: Memory, text: str, agent_type: type[Any] = FunctionAgent) -> str:
        agent = agent_type(llm=ChatCompletions(base_url=self.fake_llm.base_url), streaming=False)

        async def run() -> str:  # the workflow starts in the running loop
            return str(await agent.run(text, memory=memory))

        return self.run(run())

    def close(self) -> None:
        for memory in self.memories:
            engine = memory.sql_store._async_engine
            if engine is not None:
                self.run(engine.dispose())
        self.loop.close()


@pytest.fixture
def chats(fake_llm: Any) -> Iterator[Chats]:
    opened = Chats(fake_llm)
    yield opened
    opened.close()


def _per_user(chats: Chats) -> Callable[[MemoryService, str, str], str]:
    """A turn through the agent, with one `Memory` per user and service: a restart loses
    its short-term queue."""
    memories: dict[tuple[int, str], Memory] = {}

    def ask(service: MemoryService, user: str, text: str) -> str:
        memory = memories.get((id(service), user))
        if memory is None:
            block = PartnerMemoryBlock(user, memory=service)
            memory = memories[id(service), user] = chats.memory(block, f"chat-of-{user}")
        return chats.ask(memory, text)

    return ask


def test_flushed_turns_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, chats: Chats, model: Model
) -> None:
    remembers_across_restarts_and_rolling(store_url, model, _per_user(chats))


def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, chats: Chats, model: Model
) -> None:
    """45 turns, 29 facts, a question about each: the block's recall brings back what
    rolled away, and not what it lists as flushed."""
    delivers_the_facts(store_url, model, _per_user(chats))


def test_what_is_flushed_is_recorded_and_recall_finds_it(
    store_url: str, chats: Chats, model: Model
) -> None:
    with MemoryService.open(store_url) as service:
        memory = chats.memory(PartnerMemoryBlock("user-7", memory=service, k=3), "chat-1")
        chats.ask(memory, "I'm off to Kyoto in April")
        chats.ask(memory, "My dog is called Rex")
        said = [w.message for w in service.memory("user-7").window()]
        assert [m.text for m in said[:2]] == ["I'm off to Kyoto in April", "answer 1"]
        assert [m.role for m in said[:2]] == ["user", "assistant"]
        assert said[0].metadata[SESSION_KEY] == "chat-1"
        assert "<earlier_messages>" in model.seen[-1]

        assert service.memory("user-7").roll_now(idle=True) is not None
        fresh = chats.memory(PartnerMemoryBlock("user-7", memory=service), "chat-2")
        chats.ask(fresh, "When do I fly to Kyoto?")
        assert "dialog_history" in model.seen[-1]
        assert "<recalled_messages>" in model.seen[-1]
        assert "- user: I'm off to Kyoto in April" in model.seen[-1]


@pytest.mark.filterwarnings("ignore:is_running called from within a step")  # ReActAgent's own
def test_a_react_agent_sees_the_block_in_the_user_message(
    tmp_path: Path, chats: Chats, model: Model
) -> None:
    with MemoryService.open(str(tmp_path / "memory.db")) as service:
        block = PartnerMemoryBlock("user-7", memory=service)
        memory = chats.memory(block, "chat-1", insert_method="user", token_limit=60)
        chats.ask(memory, "My cat is called Luna, and she is four years old", ReActAgent)
        chats.ask(memory, "What is my cat called? I keep forgetting it", ReActAgent)
        assert service.memory("user-7").window()  # the first turn was flushed
        chats.ask(memory, "Tell me", ReActAgent)
        assert "<earlier_messages>" in model.seen[-1]
        assert "Luna" in model.seen[-1]


def test_under_a_token_limit_recall_goes_first_then_the_flushed_messages(
    tmp_path: Path, chats: Chats
) -> None:
    def asked(text: str) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=text)]

    with MemoryService.open(str(tmp_path / "memory.db")) as service:
        block = PartnerMemoryBlock("user-7", memory=service)
        noted = ChatMessage(role="assistant", content="Noted")
        chats.run(block.aput([*asked("I'm off to Kyoto in April"), noted]))
        assert service.memory("user-7").roll_now(idle=True) is not None
        chats.run(block.aput(asked("And Osaka in May")))
        content = chats.run(block.aget(asked("Kyoto trip")))
        assert content.index("dialog_history") < content.index("<earlier_messages>")
        assert content.index("<earlier_messages>") < content.index("<recalled_messages>")

        without_recall = chats.run(block.atruncate(content, 1))
        assert without_recall is not None
        assert "<earlier_messages>" in without_recall
        assert "<recalled_messages>" not in without_recall
        context_only = chats.run(block.atruncate(content, len(content.split()) - 1))
        assert context_only is not None
        assert "dialog_history" in context_only
        assert "<earlier_messages>" not in context_only
        assert chats.run(block.atruncate("<earlier_messages>\n</earlier_messages>", 5)) is None

        ranked = PartnerMemoryBlock("user-7", memory=service, priority=1)
        tight = chats.memory(ranked, "s", token_limit=30)
        chats.run(tight.aput(asked("Kyoto trip")[0]))
        shown = "\n".join(m.content or "" for m in chats.run(tight.aget()))
        assert "dialog_history" in shown  # the context stays
        assert "<recalled_messages>" not in shown  # Memory asked the block to shrink

        service.memory("user-7").forget_all()
        assert chats.run(block.aget(asked("Kyoto"))) == ""


def test_the_readme_setup_remembers_across_a_restart_and_reset_forgets(
    tmp_path: Path, fake_llm: Any, model: Model
) -> None:
    """The README's setup: `Memory`'s queue in a file, the block over a database. A new
    process (a new loop, new objects) is shown what was said; `Memory.reset()` empties
    the queue only, `block.reset()` forgets what partner-memory holds."""
    queue = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    db = str(tmp_path / "memory.db")

    def process(*texts: str, reset: bool = False) -> None:
        chats = Chats(fake_llm)
        block = PartnerMemoryBlock("user-7", db=db)
        try:
            memory = Memory.from_defaults(
                session_id="chat-1",
                memory_blocks=[block],
                async_database_uri=queue,
                tokenizer_fn=str.split,
                token_limit=16,
                token_flush_size=4,
            )
            chats.memories.append(memory)
            for text in texts:
                chats.ask(memory, text)
            if reset:
                chats.run(memory.areset())
                chats.run(block.areset())
        finally:
            chats.close()
            chats.loop.close()
            block.close()

    process("My cat is called Luna, she is four", "She likes tuna and sleeping all day")
    process("What is my cat called?")  # a restart
    assert "Luna" in model.seen[-1]
    with MemoryService.open(db) as service:
        assert service.memory("user-7").window()  # what Memory flushed is kept here
    process(reset=True)
    process("What is my cat called?")
    assert "Luna" not in model.seen[-1]


def test_a_remote_serve_through_the_client(tmp_path: Path, chats: Chats, model: Model) -> None:
    server = Server(str(tmp_path / "remote.db"))
    try:
        with MemoryClient(server.url, "user-7") as client:
            memory = chats.memory(PartnerMemoryBlock("user-7", memory=client), "chat-1")
            chats.ask(memory, "My cat is called Luna")
            chats.ask(memory, "What is my cat called?")
            chats.ask(chats.memory(PartnerMemoryBlock("user-7", memory=client), "chat-2"), "Hi")
            assert "Luna" in model.seen[-1]
            with pytest.raises(InvalidInputError, match="bound to namespace 'user-7'"):
                PartnerMemoryBlock("user-8", memory=client)
    finally:
        server.stop()


def test_messages_map_and_bad_construction_is_refused(tmp_path: Path) -> None:
    tool = ChatMessage(role="tool", content="42 degrees")
    assert message_of(tool) is not None
    assert message_of(tool).role == "assistant"  # type: ignore[union-attr]
    assert message_of(ChatMessage(role="assistant", content="")) is None  # a bare tool call
    assert message_of(ChatMessage(role="developer", content="Be brief")).role == "system"  # type: ignore[union-attr]
    with (
        MemoryService.open(str(tmp_path / "a.db")) as service,
        pytest.raises(InvalidInputError, match=r"db=.*memory=.*not both"),
    ):
        PartnerMemoryBlock("user-7", db=str(tmp_path / "a.db"), memory=service)
    with pytest.raises(InvalidInputError, match="namespace"):
        PartnerMemoryBlock("", db=str(tmp_path / "b.db"))
    owned = PartnerMemoryBlock("user-7", db=str(tmp_path / "c.db"))
    owned.close()
