"""The cost of keeping conversations in the sql store: agent turns/s on each store.

One agent (echo model) runs ``--turns`` turns over ``--sessions`` sessions on the memory
store and on the sql store over SQLite (a file in a temporary directory) and, with
``--postgres URL``, over PostgreSQL; rounds alternate so the machine's noise falls on every
store alike. On a database the baseline is one bare write transaction on the same engine
(the unit a task-store save is made of; an A2A turn makes several): the figure is what a
turn's history costs, counted in such commits. Prints turns/s and the ratios::

    .venv/bin/python benchmarks/conversation_store.py --turns 300
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from library_ioa.plugins.a2a.server.stores.endpoint import TaskStores, build_task_stores
from mas.infra.models import AgentManifest, TaskStoreOptions
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.history import ConversationStore
from mas.runtime.memory_history import MemoryConversationStore
from mas.runtime.models.echo import EchoModel
from mas.runtime.turns import TurnInput


async def turns_per_second(store: ConversationStore, turns: int, sessions: int) -> float:
    agent = Agent("a", AgentManifest(), EchoModel(), DelegationContract("a", {}), history=store)
    started = time.perf_counter()
    for index in range(turns):
        turn = TurnInput(f"s{index % sessions}", f"t{index}", "hello there, how are you")
        async for _ in agent.run(turn):
            pass
    return turns / (time.perf_counter() - started)


async def commits_per_second(engine: AsyncEngine, count: int) -> float:
    """Bare write transactions (one row upserted) per second on ``engine``."""
    async with engine.begin() as connection:
        await connection.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS bench_probe (id INTEGER PRIMARY KEY, n INTEGER)"
        )
    started = time.perf_counter()
    for index in range(count):
        async with engine.begin() as connection:
            await connection.exec_driver_sql(
                f"INSERT INTO bench_probe (id, n) VALUES (1, {index}) "
                "ON CONFLICT (id) DO UPDATE SET n = excluded.n"
            )
    return count / (time.perf_counter() - started)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        urls = {"sql (SQLite)": f"sqlite+aiosqlite:///{Path(directory) / 'b.db'}"}
        if args.postgres:
            urls["sql (PostgreSQL)"] = args.postgres
        stores: dict[str, ConversationStore] = {"memory": MemoryConversationStore()}
        opened: list[TaskStores] = []
        try:
            for name, url in urls.items():  # the engines an endpoint's a2a.task_store builds
                built = build_task_stores("a", TaskStoreOptions(type="sql", url=url), push=False)
                await built.start("benchmark")
                opened.append(built)
                assert built.history is not None
                stores[name] = built.history
            rates: dict[str, list[float]] = {name: [] for name in stores}
            commits: dict[str, list[float]] = {name: [] for name in urls}
            for _ in range(args.rounds):
                for name, store in stores.items():
                    rates[name].append(await turns_per_second(store, args.turns, args.sessions))
                for name, built in zip(urls, opened, strict=True):
                    assert built.engine is not None
                    commits[name].append(await commits_per_second(built.engine, args.turns))
        finally:
            for built in opened:
                await built.aclose()
    memory = max(rates["memory"])
    print(f"{'memory':18} {memory:10.0f} turns/s")
    for name in urls:
        turns, bare = max(rates[name]), max(commits[name])
        print(
            f"{name:18} {turns:10.1f} turns/s   {bare:8.1f} bare commits/s   "
            f"a turn's history = {bare / turns:4.2f} commits   {turns / memory:6.4f} x memory"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per round and store")
    parser.add_argument("--sessions", type=int, default=50, help="sessions the turns cycle over")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (best kept)")
    parser.add_argument("--postgres", default="", help="a postgresql+asyncpg:// URL to add")
    asyncio.run(main(parser.parse_args()))
