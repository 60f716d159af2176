"""Topic packages do not import each other sideways: what two topics share lives in a module below them
(demos/*.py), which imports no topic. Practice, which writes questions about every topic, may import them all.
Read from the source (every import, at the top or inside a function), not by running it."""

import pytest

from demos.registry import ROOT
from tests.test_layers import imported_modules

DEMOS = ROOT / "demos"
TOPICS = sorted(p.parent.name for p in DEMOS.glob("*/__init__.py"))
MAY_IMPORT_TOPICS = {"practice"}


def topic_of(module: str) -> str | None:
    """The topic package a module name belongs to (`demos.data.workers` -> `data`), else None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "demos" and parts[1] in TOPICS else None


def imports_of_other_topics(path, own: str | None) -> list[str]:
    return sorted(m for m in imported_modules(path) if topic_of(m) not in (None, own))


@pytest.mark.parametrize("topic", [t for t in TOPICS if t not in MAY_IMPORT_TOPICS])
def test_a_topic_package_imports_no_other_topic(topic):
    wrong = {str(path.relative_to(ROOT)): found for path in sorted((DEMOS / topic).rglob("*.py"))
             if (found := imports_of_other_topics(path, topic))}
    assert not wrong, wrong


def test_the_shared_modules_below_the_topics_import_no_topic():
    wrong = {path.name: found for path in sorted(DEMOS.glob("*.py")) if (found := imports_of_other_topics(path, None))}
    assert not wrong, wrong


def test_the_check_sees_a_sideways_import_inside_a_function(tmp_path):
    script = tmp_path / "lazy.py"
    script.write_text("def f():\n    from demos.data.workers import TimedDataset\n    import demos.memory.models\n")
    assert imports_of_other_topics(script, "distributed") == ["demos.data.workers", "demos.data.workers.TimedDataset",
                                                              "demos.memory.models"]
    assert imports_of_other_topics(script, "data") == ["demos.memory.models"]
    assert {"data", "distributed", "memory", "modules", "training", "debugging", "practice"} <= set(TOPICS)
