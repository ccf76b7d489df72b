"""What every benchmark's command line shares: extra settings for the services it starts,
the command line its report names, and the JSON report written beside what it prints."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_env_option(parser: argparse.ArgumentParser) -> None:
    """`--env KEY=VALUE` (repeatable): extra settings for the services; `args.env` is a list
    of (key, value) pairs."""
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        type=lambda s: tuple(s.split("=", 1)),
        help="extra KEY=VALUE for the services (repeatable)",
    )


def write_json(path: Path, report: Any) -> str:
    """Write `report` to `path` (its folder made if missing); the JSON text written."""
    text = json.dumps(report, indent=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return text


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that ran `module` with `argv` (the process's own arguments when None), as
    a report states it so that a run on another machine can repeat it."""
    return f"python -m {module} " + " ".join(sys.argv[1:] if argv is None else argv)
