"""Escaping and the page frame. Every string that reaches HTML goes through :func:`esc` or
:func:`attr` (``html.escape`` with quotes); a URL from a peer becomes a link only through
:func:`safe_link` (http and https only: ``javascript:``, ``data:`` and the rest stay text).
"""

from __future__ import annotations

import html
from urllib.parse import urlsplit

ASSET_VERSION = "5"  # bumped when a static file changes, so browsers fetch the new one


def esc(value: object) -> str:
    """Text for an element's content."""
    return html.escape(str(value), quote=True)


def attr(value: object) -> str:
    """Text for a quoted attribute value."""
    return html.escape(str(value), quote=True)


def safe_link(url: str, text: str | None = None) -> str:
    """An ``<a>`` to ``url`` when it is http(s), else the url as inert text."""
    shown = esc(text if text is not None else url)
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        scheme = ""
    if scheme in ("http", "https"):
        return f'<a href="{attr(url.strip())}" rel="noopener noreferrer nofollow">{shown}</a>'
    return f'<span class="inert-url" title="not a link: only http(s) urls are">{shown}</span>'


def page(title: str, body: str, *, mode: str, scripts: tuple[str, ...] = ()) -> str:
    """A whole page: the frame, the navigation, ``body`` (already HTML) and its scripts."""
    tags = "".join(
        f'<script src="/static/{attr(s)}?v={ASSET_VERSION}" defer></script>' for s in scripts
    )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark"><link rel="icon" href="data:,">'
        f"<title>{esc(title)} · MAS Lab console</title>"
        f'<link rel="stylesheet" href="/static/console.css?v={ASSET_VERSION}">{tags}</head>'
        '<body><a class="skip" href="#main">Skip to content</a>'
        '<header><nav aria-label="main"><a href="/" class="brand">MAS Lab console</a>'
        f'<span class="mode">{esc(mode)}</span></nav></header>'
        f'<main id="main">{body}</main></body></html>'
    )
