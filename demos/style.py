"""Visual constants shared by every figure: one colour per concept, one base layout.

Colour legend (the same meaning on every page):
parameter = blue, gradient = orange, activation = green, optimizer_state = purple,
buffer = brown, communication = pink, idle = grey, temporary = olive, data = cyan,
error = red.
"""

import plotly.graph_objects as go

COLORS = {
    "parameter": "#1f77b4",
    "gradient": "#ff7f0e",
    "activation": "#2ca02c",
    "optimizer_state": "#9467bd",
    "buffer": "#8c564b",
    "communication": "#e377c2",
    "idle": "#9e9e9e",
    "temporary": "#bcbd22",
    "data": "#17becf",
    "error": "#d62728",
}

# A sequence for things that are only told apart (ranks, workers, runs), not typed by concept.
SERIES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def color(concept: str) -> str:
    """The colour of a concept; an unknown name is a programming error, so it raises KeyError."""
    return COLORS[concept]


def base_layout(fig: go.Figure, title: str | None = None, height: int = 380) -> go.Figure:
    """Margins, height and legend placement shared by all figures; colours of the page theme are left to Streamlit."""
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    return fig
