"""R17: long messages are compressed before summarising; the originals are what is stored.

A message whose body is longer than the threshold is shortened by the LLM,
in parallel; an answer is accepted only if non-empty and shorter, otherwise
the body is cut around a middle marker at sentence boundaries. Compressed
copies carry the [COMPRESSED] status marker and exist only for the summariser.
The LLM is shown at most `COMPRESS_INPUT_CHARS` of a body (its head and tail),
so one pasted document cannot overflow its context or the token budget.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from partner_memory import markers
from partner_memory.model import Message
from partner_memory.rolling.llm import ChatClient, LLMError, UsageMeter
from partner_memory.rolling.prompts import compress_messages

CUT_MARK = "\n...[中间内容已裁剪]...\n"
BOUNDARIES = "\n 。！？;；."
#: Characters of one body sent to the LLM to compress (~6k tokens).
COMPRESS_INPUT_CHARS = 24_000


def truncate(body: str, limit: int = 900, window: int = 80) -> str:
    """Head and tail halves around CUT_MARK, each cut moved back to a sentence boundary."""
    if len(body) <= limit:
        return body
    half = max(1, (limit - len(CUT_MARK)) // 2)
    head_end = half
    for i in range(half, max(0, half - window), -1):
        if body[i - 1] in BOUNDARIES:
            head_end = i
            break
    tail_start = len(body) - half
    for i in range(tail_start, min(len(body), tail_start + window)):
        if body[i - 1] in BOUNDARIES:
            tail_start = i
            break
    return body[:head_end] + CUT_MARK + body[tail_start:]


def rebuild(message: Message, body: str) -> Message:
    marker, _ = markers.split(message.content)
    content = markers.compose(markers.with_status(marker, markers.COMPRESSED), body)
    return dataclasses.replace(message, content=content)


class MessageCompressor(Protocol):
    """Shortens long messages for the summariser; returns one message per input."""

    def compress(self, messages: Sequence[Message], meter: UsageMeter) -> list[Message]: ...


class TruncatingCompressor:
    """The offline compressor: the R17 fallback cut, no LLM."""

    def __init__(self, threshold: int = 1200, limit: int = 900, window: int = 80) -> None:
        self.threshold, self.limit, self.window = threshold, limit, window

    def _long(self, message: Message) -> str | None:
        _, body = markers.split(message.content)
        return body if len(body) > self.threshold else None

    def compress(self, messages: Sequence[Message], meter: UsageMeter) -> list[Message]:
        out = []
        for message in messages:
            body = self._long(message)
            out.append(
                message
                if body is None
                else rebuild(message, truncate(body, self.limit, self.window))
            )
        return out


class LLMCompressor(TruncatingCompressor):
    """Compresses long messages with the LLM in parallel, cutting when it fails or grows."""

    def __init__(
        self,
        client: ChatClient,
        *,
        threshold: int = 1200,
        limit: int = 900,
        window: int = 80,
        parallelism: int = 4,
    ) -> None:
        super().__init__(threshold, limit, window)
        self._client = client
        # one pool for the compressor's life (the service closes it), made on first need:
        # rollings that compress nothing never start its threads
        self._parallelism = parallelism
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _one(self, message: Message, meter: UsageMeter) -> Message:
        body = self._long(message)
        if body is None:
            return message
        try:
            answer = self._client.complete(
                compress_messages(truncate(body, COMPRESS_INPUT_CHARS, self.window), self.limit),
                model=self._client.settings.compressor_model,
                meter=meter,
                what="compress",
            ).text
        except LLMError:
            answer = ""
        if not answer or len(answer) >= len(body):
            if answer:
                meter.fallbacks.append("compress: answer not shorter than the original")
            answer = truncate(body, self.limit, self.window)
        return rebuild(message, answer)

    def compress(self, messages: Sequence[Message], meter: UsageMeter) -> list[Message]:
        if not any(self._long(m) is not None for m in messages):
            return list(messages)
        # each worker runs in a copy of this context, so its LLM calls are traced inside
        # the rolling that asked for them
        contexts = [contextvars.copy_context() for _ in messages]
        return list(
            self._workers().map(
                lambda m, context: context.run(self._one, m, meter), messages, contexts
            )
        )

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._parallelism, thread_name_prefix="pm-compress")
            return self._pool

    def close(self) -> None:
        """Stop the compressor's threads (the service does, when it closes)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
