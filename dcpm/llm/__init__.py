"""LLM access: the real `openai` client against any OpenAI-compatible endpoint, and prompts."""

from dcpm.llm.client import LLMClient, LLMFailure, ToolCall, Usage, reachability

__all__ = ["LLMClient", "LLMFailure", "ToolCall", "Usage", "reachability"]
