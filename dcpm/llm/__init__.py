"""LLM access for System 1 and System 2 (DCPM 2.2 ii-iii, 2.3 phase 2-3): the real `openai`
client against any OpenAI-compatible endpoint, with format fallback and retries (`client`),
the prompts, each a template with the Pydantic model of its answer (`prompts/`), answer fields
bounded to the columns they go into (`answers`), and the context budget prompts are cut to
(`budget`)."""

from dcpm.llm.client import LLMClient, LLMFailure, LLMRateLimited, LLMUnreachable, ToolCall, Usage, reachability

__all__ = ["LLMClient", "LLMFailure", "LLMRateLimited", "LLMUnreachable", "ToolCall", "Usage", "reachability"]
