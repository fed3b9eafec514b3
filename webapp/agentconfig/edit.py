"""Rewriting one top-level section of a configuration text, keeping the rest as written
(comments, order, style), so a form can change `user_access` without flattening the YAML."""

from __future__ import annotations

from typing import Any

import yaml


def section_text(key: str, value: dict[str, Any]) -> str:
    """`key:` with one line per entry; small mappings stay on one line, as people write."""
    lines = [f"{key}:"]
    for name, item in value.items():
        rendered = yaml.safe_dump(item, default_flow_style=True, width=10_000).strip()
        rendered = rendered.removesuffix("\n...").strip()
        lines.append(f"  {name}: {rendered}")
    return "\n".join(lines) + "\n"


def replace_section(text: str, key: str, value: dict[str, Any]) -> str:
    """The text with its top-level `key` replaced by `value` (appended when missing).

    The text must be valid YAML whose root is a mapping or empty.
    """
    block = section_text(key, value)
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None or (isinstance(root, yaml.ScalarNode) and root.value == ""):
        return block
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return _redump(text, key, value)
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.value != key:
            continue
        if key_node.start_mark.column != 0:
            return _redump(text, key, value)
        start, end = key_node.start_mark.index, _end(value_node)
        return text[:start] + block.rstrip("\n") + text[end:]
    head = text.rstrip("\n")
    return f"{head}\n{block}" if head else block


def _end(node: yaml.Node) -> int:
    """Where a value's own text ends: a block collection's end mark is the next key."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _end(node.value[-1])
    return int(node.end_mark.index)


def _redump(text: str, key: str, value: dict[str, Any]) -> str:
    # Flow-style or indented roots cannot be edited in place; write the whole document.
    document = yaml.safe_load(text) or {}
    document[key] = value
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=None)
