"""Shared study components for every page: layout, whiteboard mode, figures, code panels, quizzes, errors."""

from pages.ui import marks
from pages.ui.code import show_code
from pages.ui.compute import compute
from pages.ui.errors import input_errors
from pages.ui.figures import figure_pair, graph, legend, plot, vega
from pages.ui.layout import (
    key_controls,
    page_header,
    prose,
    sections,
    settings,
    sidebar_controls,
    steps,
    whiteboard_on,
)
from pages.ui.queue import queued, queued_each, queued_status
from pages.ui.quiz import interview_corner, predict_then_run
from pages.ui.runs import ran_with, run_button
from pages.ui.tables import table
from pages.ui.traps import trap_pair

__all__ = [
    "compute",
    "figure_pair",
    "graph",
    "input_errors",
    "interview_corner",
    "key_controls",
    "legend",
    "marks",
    "page_header",
    "plot",
    "predict_then_run",
    "prose",
    "queued",
    "queued_each",
    "queued_status",
    "ran_with",
    "run_button",
    "sections",
    "settings",
    "show_code",
    "sidebar_controls",
    "steps",
    "table",
    "trap_pair",
    "vega",
    "whiteboard_on",
]
