"""Reading a scenario's YAML: PyYAML's safe loader, refusing a key given twice in one mapping.

YAML's own rule (and PyYAML's behaviour) is that the last of two equal keys wins, silently: a
file with two ``load:`` blocks, or ``ttft_ms`` twice under ``slo:``, ran with whichever came
last, and the one the person was editing may have been the first. Such a file is a mistake,
so it is refused with the key's YAML path (``slo.ttft_ms``, as the validation errors name
fields) and both lines.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: The tag of ``<<: *defaults``: its keys may be overridden by the mapping's own, by design.
_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A key given twice in one mapping; ``problem`` names its YAML path and both lines."""


class ScenarioLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` that refuses a duplicated mapping key anywhere in the document.

    The check walks the composed node tree before it is constructed, because only there are a
    key's parents known (the constructor builds nested mappings later, without their path).
    """

    def construct_document(self, node: Node) -> Any:
        self._check_duplicates(node, "", set())
        return super().construct_document(node)

    def _check_duplicates(self, node: Node, path: str, seen_nodes: set[int]) -> None:
        if id(node) in seen_nodes:  # an alias of a node already walked (or a recursive one)
            return
        seen_nodes.add(id(node))
        if isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                self._check_duplicates(item, f"{path}[{i}]", seen_nodes)
        elif isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    self._check_duplicates(value_node, path, seen_nodes)
                    continue
                key = self._key(key_node)
                child = f"{path}.{key}" if path else str(key)
                line = key_node.start_mark.line + 1
                if key is not None and key in first_line:
                    lines = f"line {line}" if first_line[key] == line else f"lines {first_line[key]} and {line}"
                    raise DuplicateKeyError(
                        None, None,
                        f"{child}: the key is given twice, at {lines} (YAML would keep only the last, silently)",
                        key_node.start_mark)
                if key is not None:
                    first_line[key] = line
                self._check_duplicates(value_node, child, seen_nodes)

    def _key(self, key_node: Node) -> Any:
        """A scalar key's value as the constructor reads it (``1`` and ``"1"`` differ), or None."""
        if not isinstance(key_node, ScalarNode):
            return None  # a mapping or list as a key: refused later as unhashable
        return self.construct_object(key_node)


def read_yaml(text: str) -> Any:
    """The YAML document in ``text``; a :class:`yaml.YAMLError` (with its mark) if it is invalid."""
    return yaml.load(text, Loader=ScenarioLoader)  # noqa: S506 (a SafeLoader subclass)
