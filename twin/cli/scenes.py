"""``twin scenes``: the shipped scenes, or the items of one scene."""

from __future__ import annotations

import argparse
import collections

from twin.cli.common import print_table


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") if text else ""


def run_scenes(args: argparse.Namespace) -> int:
    """Without a name: one row per shipped scene. With one (or a scene file): its items."""
    from twin.scenes import SHIPPED_SCENES, load_scene

    if args.scene is None:
        rows = []
        for name in SHIPPED_SCENES:
            scene = load_scene(name)
            kinds = collections.Counter(item.kind.value for item in scene.items)
            counts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
            rows.append([name, len(scene.items), counts, _first_sentence(scene.description)])
        print_table(["scene", "items", "kinds", "description"], rows)
        print("\n`twin scenes NAME` lists a scene's items; a sim run takes --scene NAME")
        return 0
    scene = load_scene(args.scene)
    print(f"scene {scene.name} ({scene.path}): {scene.description}\n")
    rows = [
        [
            item.name,
            item.kind.value,
            "[" + ", ".join(f"{v:+.3f}" for v in item.pose[:3]) + "]",
            "[" + ", ".join(f"{v:.3f}" for v in item.dims) + "]",
        ]
        for item in scene.items
    ]
    print_table(["item", "kind", "position m (world)", "dims (m; mesh: scale)"], rows)
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "scenes",
        help="list the shipped scenes, or the items of one",
        description="List the shipped scenes (name, items, description), or with a name (or "
        "the path of a scene .json file) the items of that scene.",
    )
    parser.add_argument("scene", nargs="?", default=None, help="a scene name or scene file")
    parser.set_defaults(func=run_scenes)
