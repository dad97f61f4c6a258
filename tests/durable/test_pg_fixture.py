"""The PostgreSQL fixture itself: a real server answering on loopback."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine


async def test_the_database_answers_on_loopback(pg_url: str) -> None:
    assert "@127.0.0.1:" in pg_url
    engine = create_async_engine(pg_url)
    try:
        async with engine.connect() as conn:
            version = (await conn.execute(text("show server_version"))).scalar_one()
    finally:
        await engine.dispose()
    assert str(version).split(".")[0].isdigit()
