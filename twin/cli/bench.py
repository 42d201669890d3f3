"""stub"""

from __future__ import annotations


def add_parser(subparsers) -> None:
    subparsers.add_parser("bench")
