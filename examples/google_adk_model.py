"""An ADK model on any OpenAI-compatible endpoint (a local server, a gateway), for the
README's Google ADK example: ADK's own classes reach such endpoints only through
LiteLLM, a large extra dependency. Text in, text out; no tool calls.

    from examples.google_adk_model import ChatCompletions
    model = ChatCompletions(model="local", base_url="http://127.0.0.1:8000/v1")
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from openai import AsyncOpenAI


class ChatCompletions(BaseLlm):
    """An ADK model on an OpenAI-compatible endpoint (ADK's own reach it through LiteLLM)."""

    base_url: str

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        messages: list[Any] = []
        instruction = llm_request.config.system_instruction
        if instruction:
            messages.append({"role": "system", "content": str(instruction)})
        for content in llm_request.contents:
            text = "\n".join(p.text for p in content.parts or [] if p.text)
            messages.append(
                {"role": "user" if content.role == "user" else "assistant", "content": text}
            )
        key = os.environ.get("OPENAI_API_KEY", "local")
        client = AsyncOpenAI(base_url=self.base_url, api_key=key)
        answer = await client.chat.completions.create(model=self.model, messages=messages)
        await client.close()
        text = answer.choices[0].message.content or ""
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
