"""The read-only admin page in headless Chromium, on a store of a few hundred memories: chains, graph
and search reasons shown; long texts wrap at any width; empty states and errors say what to do.
Screenshots are kept in tests/e2e/artifacts/ (not tracked) for a person to look at."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from dcpm.testing.scripted_llm import LLMServer, one_fact_per_turn

from .browser import Browser
from .daemon import Daemon, run_cli

ARTIFACTS = Path(__file__).parent / "artifacts"
TOKEN = "admin-s3cret"
LONG_URL = "https://example.org/lists/AnaWantsToReadAllOfTheseBooksBeforeSeptemberEndsAndKeepsAddingMoreOfThem"
# Turns the scripted LLM turns into facts, in order, a week apart; each (new, old) pair below makes a revision.
TURNS = ["I went running before work on Monday morning", "I went running before work on Tuesday morning",
         "I went running before work on Thursday morning", "I drink two espressos every morning",
         "I switched from espresso to black tea", "I switched from black tea to green tea, no caffeine after noon",
         "I live in Leeds, near Hyde Park", "I moved from Leeds to York in April",
         "I moved from York to Manchester for the new job", "I work as a nurse at St James's hospital",
         "I left nursing and now work as a data analyst at the city council",
         (f"My reading list for the summer is at {LONG_URL} and I keep adding to it whenever a friend "
          "recommends something, which happens far more often than I can keep up with"),
         f"My reading list moved to {LONG_URL}-v2 because the old one got too long to scroll through",
         "My bank PIN is 4921"]
REVISIONS = [("switched from espresso", "espresso"), ("switched from black tea", "black tea"),
             ("moved from Leeds", "Leeds"), ("moved from York", "York"), ("left nursing", "nurse"),
             ("reading list moved", "reading list")]
ACTIVITIES = ["bought bread and tomatoes at the market", "read two chapters of a novel at the library",
              "called my sister about the holiday plans", "cleaned the flat and did the laundry",
              "walked Pepper along the canal", "tried a new recipe for lentil soup", "fixed the bike's back brake",
              "went to the cinema with Priya", "paid the electricity bill", "planted basil on the balcony"]
DIARY = [f"Week {week}: I {activity}" for week in range(1, 25) for activity in ACTIVITIES]  # 240 turns
START = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
NO_OVERFLOW = """[...document.querySelectorAll('body, body *')]
  .filter((e) => !['INPUT', 'SELECT', 'OPTION'].includes(e.tagName) && e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
  .map((e) => `${e.tagName}#${e.id}.${e.className}: ${e.scrollWidth} > ${e.clientWidth}`)
  .concat(document.documentElement.scrollWidth > innerWidth ? [`page ${document.documentElement.scrollWidth} > ${innerWidth}`] : [])"""
ERROR_SHOWN = ("(() => { const e = document.getElementById('error'); return e && !e.hidden && e.offsetHeight > 0 "
               "&& e.textContent; })()")


def revise(items):
    decisions = []
    for n, (text, shown) in enumerate(items, 1):
        target = next((handle for new, old in REVISIONS if new in text
                       for handle, shown_text in shown if old in shown_text and new not in shown_text), None)
        decisions.append({"item": n, "op": "SUPERSEDE", "target": target} if target else {"item": n, "op": "ADD"})
    return {"decisions": decisions}


def extract_all_but_the_pin(turns):
    if any("PIN" in turn for turn in turns):
        return {"items": "no"}  # an answer that never validates: the input ends up failed
    answer = one_fact_per_turn(turns)
    for item in answer["items"]:
        if "to Manchester" in item["text"]:
            item["anticipations"] = ["Ana registers with a new GP", "Ana asks where to buy a season ticket"]
    return answer


def running_schema(prompt: str):
    handles = re.findall(r"^\[(f\d+)\] \(\w+\) I went running", prompt, re.MULTILINE)
    if not handles:
        return []
    return [("create_schema", {"ref": "s1", "domain": "fitness", "text": "Ana runs before work",
                               "evidence": handles})]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    ARTIFACTS.mkdir(exist_ok=True)
    with Browser(tmp_path_factory.mktemp("chromium") / "profile") as browser:
        yield browser


@pytest.fixture(scope="module")
def ana_store(tmp_path_factory):
    """Ana's 240 diary turns stored verbatim and 14 extracted ones (chains, a schema, one failed), Bob's 40."""
    data_dir = tmp_path_factory.mktemp("store") / "data"
    with LLMServer() as llm:
        llm.script.extract, llm.script.reconcile, llm.script.induce = extract_all_but_the_pin, revise, running_schema
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted", "DCPM_API_TOKEN": TOKEN,
               "DCPM_WRITER_MAX_ATTEMPTS": "1"}
        with Daemon(data_dir, **env) as daemon, httpx.Client(base_url=daemon.url, timeout=60,
                                                            headers={"Authorization": f"Bearer {TOKEN}"}) as api:
            for user, turns in (("ana", DIARY), ("bob", DIARY[:40])):
                for n, text in enumerate(turns):
                    api.post("/v1/memories", json={"user_id": user, "text": text, "infer": False,
                                                   "timestamp": (START + timedelta(hours=17 * n)).isoformat()})
            for week, text in enumerate(TURNS):
                api.post("/v1/memories", json={"user_id": "ana", "messages": [{"content": text, "name": "Ana"}],
                                               "timestamp": (START + timedelta(weeks=week)).isoformat()})
            run_cli(data_dir, "consolidate", "--user", "ana", DCPM_API_TOKEN=TOKEN)
            assert httpx.get(f"{daemon.url}/v1/users").status_code == 401  # the data needs the token
            assert api.get("/v1/users/ana/items", params={"kind": "raw", "status": "failed"}).json()["total"] == 1
            yield daemon


def open_admin(browser: Browser, url: str, ready: str = "!!document.querySelector('#hits .hit')") -> str:
    browser.open(url)
    browser.wait_for(ready)
    return browser.evaluate("document.documentElement.outerHTML")


def test_admin_page_shows_chains_graph_and_search_reasons(ana_store, browser):
    browser.resize(1280, 900)
    dom = open_admin(browser, f"{ana_store.url}/admin#token={TOKEN}&user=ana&q=coffee%20in%20the%20morning")
    browser.screenshot(ARTIFACTS / "admin-page.png")

    assert re.search(r'class="rev old".*I drink two espressos every morning', dom)
    assert re.search(r'class="rev old".*I switched from espresso to black tea', dom)
    assert re.search(r'class="rev current".*I switched from black tea to green tea', dom)
    assert re.search(r'class="rev current".*I moved from York to Manchester', dom)
    assert "comes back when: Ana registers with a new GP; Ana asks where to buy a season ticket" in dom
    assert "Ana runs before work" in dom and "← I went running before work on Monday morning" in dom
    assert "believed now: I switched from black tea to green tea" in dom
    assert re.search(r"dense [\d.]+.*lexical [\d.]+", dom) and "= dense" not in dom  # parts, not a false sum
    assert "My bank PIN is 4921" in browser.evaluate("document.getElementById('failed').textContent")


@pytest.mark.parametrize("width", [1280, 560])
def test_admin_page_wraps_long_texts_at_any_width(ana_store, browser, width):
    browser.resize(width, 900)
    open_admin(browser, f"{ana_store.url}/admin#token={TOKEN}&user=ana&q=reading%20list")
    browser.screenshot(ARTIFACTS / f"admin-page-{width}px.png")

    assert LONG_URL in browser.evaluate("document.getElementById('chains').textContent")
    assert browser.evaluate(NO_OVERFLOW) == []
    narrowest = browser.evaluate("Math.min(...[...document.querySelectorAll('section')].map((s) => s.clientWidth))")
    assert narrowest > (width - 40) / 2 - 20  # two columns side by side at most, none squeezed


def test_admin_page_shows_an_api_error_in_the_page(ana_store, browser):
    browser.resize(1280, 900)
    browser.open(f"{ana_store.url}/admin#token=not-the-token&user=ana")
    shown = browser.wait_for(ERROR_SHOWN)
    browser.screenshot(ARTIFACTS / "admin-page-bad-token.png")

    assert "wrong admin token" in shown
    assert "not loaded: see the message above" in browser.evaluate("document.getElementById('chains').textContent")


def test_admin_page_on_an_empty_store_says_how_to_add_a_user_then_that_the_daemon_is_gone(tmp_path, browser):
    browser.resize(1280, 900)
    with Daemon(tmp_path / "data", DCPM_API_TOKEN=TOKEN) as daemon:
        open_admin(browser, f"{daemon.url}/admin#token={TOKEN}", ready="!!document.querySelector('#chains .empty')")
        chains = browser.evaluate("document.getElementById('chains').textContent")
        browser.screenshot(ARTIFACTS / "admin-page-empty.png")
    browser.evaluate("document.getElementById('refresh').click()")
    gone = browser.wait_for(ERROR_SHOWN)
    browser.screenshot(ARTIFACTS / "admin-page-daemon-gone.png")

    assert "No users yet" in chains and "dcpm add" in chains
    assert "did not answer" in gone
