"""How much a model reads when it calls dcpm's MCP tools: size of a typical search result.

What it measures
    A fresh data directory, one user (Ana) with eight turns said over a week, extracted by the
    scripted OpenAI-compatible server (dcpm.testing.scripted_llm: one fact per turn; the tea
    turn supersedes the coffee fact, so one hit carries a two-link chain). Then `search_memory`
    with the default limit through the MCP SDK's own client, in process, for a few questions.
    For each it prints the characters and estimated tokens (4 characters a token, the estimate
    dcpm's context block budgets with) of
        * text: the text content, what a host hands the model;
        * structured: the structured content serialized as compact JSON, what a host that
          reads structuredContent would pass on instead.
    Run it on two versions of dcpm.mcp to compare them.

Run
    .venv/bin/python scripts/mcp_result_size.py            # prints one line per question, then the mean
    .venv/bin/python scripts/mcp_result_size.py --show     # also prints the first result's text
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import anyio
from mcp import Client

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from dcpm.api.models import AddMemoryRequest
from dcpm.config import Settings
from dcpm.mcp.server import build_server
from dcpm.read.context_block import estimate_tokens
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer, add_everything, supersede_first_candidate

TURNS = [
    "I drink two espressos every morning",
    "My sister Lena lives in Porto and I visit her every spring",
    "I am training for the Berlin half marathon in September",
    "I keep bees on my allotment behind the railway",
    "I am allergic to walnuts",
    "I work as a nurse on the night shift at St. Mary's",
    "My cat Miso is afraid of the vacuum cleaner",
    "I switched from espresso to black tea",
]
QUESTIONS = ["what does Ana drink in the morning", "who is in Ana's family", "what is Ana allergic to",
             "what are Ana's hobbies"]


def populate(service: MemoryService, llm: LLMServer) -> None:
    start = datetime(2025, 5, 1, 8, tzinfo=timezone.utc)
    for day, text in enumerate(TURNS):
        llm.script.reconcile = supersede_first_candidate if "switched" in text else add_everything
        service.add_memory(AddMemoryRequest(user_id="ana", messages=[{"content": text, "name": "Ana"}],
                                            timestamp=start + timedelta(days=day)))


async def searches(server) -> list[tuple[str, str]]:
    results = []
    async with Client(server) as client:
        for question in QUESTIONS:
            found = await client.call_tool("search_memory", {"query": question})
            text = "\n".join(block.text for block in found.content if block.type == "text")
            results.append((text, json.dumps(found.structured_content, separators=(",", ":"))))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="print the first result's text content")
    args = parser.parse_args()
    from dcpm.embedding import load_embedder

    with tempfile.TemporaryDirectory() as tmp, LLMServer() as llm:
        settings = Settings(data_dir=Path(tmp) / "data", llm_base_url=llm.url, llm_model="scripted")
        service = MemoryService(settings, embedder=load_embedder(settings))
        try:
            populate(service, llm)
            results = anyio.run(searches, build_server(service, user_id="ana"))
        finally:
            service.close()
    print(f"{'question':40} {'text chars':>10} {'text tok':>9} {'struct chars':>12} {'struct tok':>10}")
    for question, (text, structured) in zip(QUESTIONS, results):
        print(f"{question:40} {len(text):>10} {estimate_tokens(text):>9} {len(structured):>12} "
              f"{estimate_tokens(structured):>10}")
    count = len(results)
    text_chars = sum(len(t) for t, _ in results) / count
    struct_chars = sum(len(s) for _, s in results) / count
    print(f"{'mean':40} {text_chars:>10.0f} {text_chars / 4:>9.0f} {struct_chars:>12.0f} {struct_chars / 4:>10.0f}")
    if args.show:
        print("\n" + results[0][0])


if __name__ == "__main__":
    main()
