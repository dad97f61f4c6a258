"""``mas-ctl card``: an A2A agent's AgentCard.

::

    mas-ctl card TARGET [-o text|json] [connection and credential options]

``-o text`` (default): its name, description, version, interfaces (the one ``mas-ctl``
would use marked), capabilities, security schemes and skills, every string escaped.
``-o json``: the card as the agent served it. Exit codes: 0; 1 the card could not be read
(one line on stderr); 2 a bad TARGET or option.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mas.ctl.client.connection import Connection
from mas.ctl.client.options import add_client_options
from mas.ctl.client.output import one_line, terminal_text
from mas.ctl.client.running import run_client


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("card", help="show an A2A agent's card")
    add_client_options(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    parser.set_defaults(handler=handle)


def card_lines(conn: Connection) -> list[str]:
    """The card for a person."""
    card = conn.card
    lines = [f"name:        {one_line(card.name)}"]
    if card.description:
        lines.append(f"description: {one_line(card.description, 400)}")
    if card.version:
        lines.append(f"version:     {one_line(card.version, 60)}")
    lines.append("interfaces:")
    for interface in card.supported_interfaces:
        used = "*" if interface == conn.interface else " "
        version = (
            f" (A2A {one_line(interface.protocol_version, 20)})"
            if interface.protocol_version
            else ""
        )
        lines.append(
            f"  {used} {one_line(interface.protocol_binding, 20):<10} "
            f"{one_line(interface.url, 300)}{version}"
        )
    caps = card.capabilities
    lines.append(
        f"streaming:   {'yes' if caps.streaming else 'no'}; push notifications: "
        f"{'yes' if caps.push_notifications else 'no'}"
    )
    if card.security_schemes:
        lines.append(f"security:    {', '.join(one_line(n, 60) for n in card.security_schemes)}")
    if card.skills:
        lines.append("skills:")
        lines.extend(
            f"  - {one_line(s.name or s.id, 80)}: {one_line(s.description, 200)}"
            for s in card.skills
        )
    return lines


async def show(conn: Connection, args: argparse.Namespace) -> int:
    """Print the card."""
    if args.output == "json":
        text = json.dumps(conn.card_json, indent=2, ensure_ascii=False)
        print(terminal_text(text))
    else:
        print("\n".join(card_lines(conn)))
    return 0


def handle(args: argparse.Namespace) -> int:
    """Fetch and print the card."""
    return run_client(args, lambda conn: show(conn, args))
