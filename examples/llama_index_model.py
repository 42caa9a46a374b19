"""A LlamaIndex model on any OpenAI-compatible endpoint, for the README's LlamaIndex
example: LlamaIndex's own OpenAI classes (`llama-index-llms-openai`) pin an older
`openai` than the other frameworks' adapters install. Text in, text out; it calls
no tools, so a `FunctionAgent` answers directly.

    from examples.llama_index_model import ChatCompletions
    llm = ChatCompletions(base_url="http://127.0.0.1:8000/v1")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.tools.types import BaseTool
from openai import AsyncOpenAI, OpenAI


class ChatCompletions(CustomLLM, FunctionCallingLLM):
    """A LlamaIndex model on an OpenAI-compatible endpoint that calls no tools (the
    framework's own OpenAI model pins an older `openai` than the other adapters)."""

    base_url: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, is_function_calling_model=True, model_name="local")

    def _said(self, messages: Sequence[ChatMessage]) -> list[Any]:
        return [{"role": m.role.value, "content": m.content or ""} for m in messages]

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        client = AsyncOpenAI(
            base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY", "local"), max_retries=0
        )
        answer = await client.chat.completions.create(model="local", messages=self._said(messages))
        await client.close()
        return ChatResponse(
            message=ChatMessage(role="assistant", content=answer.choices[0].message.content)
        )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with OpenAI(
            base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY", "local"), max_retries=0
        ) as client:
            said = [{"role": "user", "content": prompt}]
            answer = client.chat.completions.create(model="local", messages=said)  # type: ignore[arg-type]
        return CompletionResponse(text=answer.choices[0].message.content or "")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        response = self.complete(prompt)
        yield CompletionResponse(text=response.text, delta=response.text)

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        asked = [ChatMessage(role="user", content=user_msg)] if isinstance(user_msg, str) else []
        return {
            "messages": [
                *(chat_history or []),
                *asked,
                *([user_msg] if user_msg and not asked else []),
            ]
        }

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[Any]:
        return []
