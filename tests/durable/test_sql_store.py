"""``a2a.task_store: {type: sql}``: tasks and push configs survive a restart of the server,
on a SQLite file and on PostgreSQL; push configs are encrypted at rest; bad settings are
one clear error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.helpers import get_message_text
from a2a.types import GetTaskPushNotificationConfigRequest, TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError
from cryptography.fernet import Fernet
from durable_support import STEP, get_task, list_tasks, serve_on_store
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import free_port, sdk_client, send, user_message

from library_ioa.plugins.a2a.server.stores.endpoint import TaskStoreError, build_task_stores
from mas.infra.models import SecretKeyRef, TaskStoreOptions
from mas.infra.secrets import secret_env_name

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    return str(request.getfixturevalue("pg_url"))


async def test_tasks_history_and_artifacts_survive_a_restart(store_url: str) -> None:
    port = free_port()
    async with serve_on_store(store_url, port=port) as served, sdk_client(served) as client:
        [made] = await send(client, user_message("artifacts", context_id="c1"))
        [streamed] = await send(client, user_message("echo one two three", context_id="c1"))
        [asked] = await send(client, user_message("ask which day?", context_id="c2"))
    ids = {made.task.id, streamed.task.id, asked.task.id}
    assert made.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert asked.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    async with serve_on_store(store_url, port=port) as served, sdk_client(served) as client:
        again = await get_task(client, made.task.id)
        echoed = await get_task(client, streamed.task.id)
        waiting = await get_task(client, asked.task.id)
        listed = await list_tasks(client)
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(again.status.message) == "4 artifacts"
    assert [a.name for a in again.artifacts] == ["notes.txt", "result.json", "blob.bin", "link"]
    assert again.artifacts[2].parts[0].raw == b"\x00\x01binary"
    assert get_message_text(again.history[0]) == "artifacts"
    assert "".join(p.text for a in echoed.artifacts for p in a.parts) == "echo one two three"
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # its turn had ended
    assert get_message_text(waiting.status.message) == "question: which day?"
    assert {t.id for t in listed} == ids
    assert all(t.history for t in listed)


async def test_a_resumed_task_goes_on_after_a_restart(store_url: str) -> None:
    port = free_port()
    async with serve_on_store(store_url, port=port) as served, sdk_client(served) as client:
        [asked] = await send(client, user_message("ask which day?", context_id="c"))
    async with serve_on_store(store_url, port=port) as served, sdk_client(served) as client:
        served.runner.asked.add("c")  # the runner's session state is in memory (see the docs)
        [answer] = await send(
            client, user_message("tuesday", context_id="c", task_id=asked.task.id)
        )
    assert answer.task.id == asked.task.id
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(answer.task.status.message) == "resumed with: tuesday"
    assert [get_message_text(m) for m in answer.task.history][:2] == [
        "ask which day?",
        "question: which day?",
    ]


async def test_push_configs_are_encrypted_at_rest_and_survive_a_restart(store_url: str) -> None:
    key_ref = SecretKeyRef(name="a2a-push", key="fernet")
    env = {secret_env_name(key_ref): Fernet.generate_key().decode()}
    options = {
        "type": "sql",
        "url": store_url,
        "push_config_key_secret_key_ref": key_ref.model_dump(),
    }
    port = free_port()
    token = "tok-7f3a-not-in-the-database"
    async with (
        serve_on_store(
            store_url, port=port, env=env, options=options, pushNotifications=True
        ) as served,
        sdk_client(served) as client,
    ):
        [asked] = await send(client, user_message("ask a question", context_id="p"))
        config = TaskPushNotificationConfig(
            task_id=asked.task.id, url="https://hooks.example.invalid/a2a", token=token
        )
        created = await client.create_task_push_notification_config(config)
    engine = create_async_engine(store_url)
    try:
        async with engine.connect() as conn:
            query = text("select config_data from push_notification_configs")
            rows = (await conn.execute(query)).all()
    finally:
        await engine.dispose()
    assert len(rows) == 1
    stored = bytes(rows[0][0])
    assert token.encode() not in stored
    assert b"hooks.example.invalid" not in stored

    async with (
        serve_on_store(
            store_url, port=port, env=env, options=options, pushNotifications=True
        ) as served,
        sdk_client(served) as client,
    ):
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=asked.task.id, id=created.id)
        )
    assert got.token == token
    assert got.url == "https://hooks.example.invalid/a2a"


def test_a_missing_secret_names_the_field_the_secret_and_the_variable() -> None:
    ref = SecretKeyRef(name="tasks-db", key="url")
    options = TaskStoreOptions(type="sql", url_secret_key_ref=ref)
    with pytest.raises(TaskStoreError) as caught:
        build_task_stores("front", options, push=False, env={})
    message = str(caught.value)
    assert message.startswith("a2a.task_store.url_secret_key_ref: Secret 'tasks-db' key 'url'")
    assert secret_env_name(ref) in message


def test_the_url_may_come_from_a_secret(tmp_path: Path) -> None:
    ref = SecretKeyRef(name="tasks-db", key="url")
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    stores = build_task_stores(
        "front",
        TaskStoreOptions(type="sql", url_secret_key_ref=ref),
        push=False,
        env={secret_env_name(ref): url},
    )
    assert stores.durable
    assert stores.shown_url == url


def test_a_bad_push_key_is_refused_naming_the_field(tmp_path: Path) -> None:
    ref = SecretKeyRef(name="push", key="k")
    options = TaskStoreOptions(
        type="sql",
        url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}",
        push_config_key_secret_key_ref=ref,
    )
    with pytest.raises(TaskStoreError, match=r"^a2a.task_store.push_config_key_secret_key_ref: "):
        build_task_stores("front", options, push=True, env={secret_env_name(ref): "short"})


async def test_an_unreachable_database_is_one_error_without_the_password() -> None:
    url = f"postgresql+asyncpg://maslab:hunter2@127.0.0.1:{free_port()}/tasks"
    stores = build_task_stores("front", TaskStoreOptions(type="sql", url=url), push=False)
    with pytest.raises(TaskStoreError) as caught:
        async with asyncio.timeout(STEP):
            await stores.start("r1")
    message = str(caught.value)
    assert message.startswith(
        "a2a.task_store: cannot open postgresql+asyncpg://maslab:***@127.0.0.1:"
    )
    assert "hunter2" not in message


async def test_a_sqlite_file_in_a_missing_directory_is_one_error(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'no' / 'such' / 'tasks.db'}"
    stores = build_task_stores("front", TaskStoreOptions(type="sql", url=url), push=False)
    with pytest.raises(TaskStoreError, match=r"^a2a.task_store: cannot open sqlite\+aiosqlite:///"):
        await stores.start("r1")


async def test_a_context_id_longer_than_the_store_keeps_is_refused_by_name(pg_url: str) -> None:
    long_id = "conversation-" + "x" * 40  # 53 characters: PostgreSQL's varchar(36) refuses it
    async with serve_on_store(pg_url) as served, sdk_client(served) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await send(client, user_message("hello", context_id=long_id))
        stored = await list_tasks(client)
        # the agent goes on serving a conversation whose id fits
        [*_, last] = await send(client, user_message("hello again", context_id="c-36"))
    assert str(refused.value) == (
        f"contextId {long_id!r} has 53 characters; this agent's task store keeps ids of "
        "at most 36 (a UUID fits)"
    )
    assert stored == []  # the refusal stored nothing
    assert last.task.status.state == TaskState.TASK_STATE_COMPLETED
