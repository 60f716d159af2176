"""The page registry lives in demos/registry.py (below pages/ui and pages/shell); this name still resolves to it."""

from demos.registry import HOME, ROOT, SECTIONS, TOPICS, TabSet, Topic, by_slug, registered

__all__ = ["HOME", "ROOT", "SECTIONS", "TOPICS", "TabSet", "Topic", "by_slug", "registered"]
