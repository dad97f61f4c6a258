"""What the params of the HTTP model plugins (``openai``, ``anthropic``) share, and the key.

- :data:`EnvName`: ``api_key_env``, the name of the environment variable holding the API
  key; :func:`api_key` reads it and refuses, naming the plugin and the variable, when it is
  unset or empty. The key itself never appears in a message.
- :data:`BaseURL`: ``base_url``, an ``http://`` or ``https://`` URL, kept without its
  trailing ``/``.
- :data:`Timeout`: ``timeout``, seconds, more than 0 and at most an hour.

The retry params are :class:`~mas.runtime.models.retries.RetryParams`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, Field

from mas.runtime.errors import PluginConfigError


def _http(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value.rstrip("/")


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
BaseURL = Annotated[str, Field(min_length=1), AfterValidator(_http)]
Timeout = Annotated[float, Field(gt=0, le=3600)]


def api_key(plugin: str, env_name: str, env: Mapping[str, str] | None) -> str:
    """The API key in the variable ``env_name`` of ``env`` (default: the process's);
    :class:`PluginConfigError` when it is unset or empty."""
    source = os.environ if env is None else env
    key = source.get(env_name)
    if not key:
        raise PluginConfigError(
            f"model {plugin!r}: params.api_key_env: the environment variable {env_name} "
            "is not set (it must hold the API key)"
        )
    return key
