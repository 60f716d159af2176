"""Figures of the Sequences view.

Colours follow demos.style: activation = green (hidden states, the frames that match h_n inside output), error =
red (the padded run, which differs), parameter = blue (the packed run), data = cyan (attention), buffer = brown
(the recurrent layer's steps and time).
"""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.style import COLORS, base_layout, legend_on_top
from demos.transformers.sequences import PackingResult, ShapeResult, TimingResult

VALUES = "RdBu"


def h_n_rows(r: ShapeResult) -> list[str]:
    """The row names of h_n[:, 0]: layer k, then its direction."""
    arrows = ("→", "←") if r.bidirectional else ("→",)
    return [f"layer {k} {arrow}" for k in range(r.layers) for arrow in arrows]


def shapes_figure(r: ShapeResult) -> go.Figure:
    """output[sequence 0] (time × directions·hidden) beside h_n[:, sequence 0]; framed: where they hold the same
    numbers (the last layer's forward state at the last step, its backward state at the first step)."""
    length = len(r.output_seq0)
    width = r.directions * r.hidden
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, column_widths=[0.55, 0.45],
                        subplot_titles=(f"output of sequence 0: {length} × {width}",
                                        f"h_n[:, 0]: {r.layers * r.directions} × {r.hidden}"))
    cols = [f"{'→' if j < r.hidden else '←'} h{j % r.hidden}" for j in range(width)]
    bound = max(1e-6, *(abs(v) for row in r.output_seq0 + r.h_n_seq0 for v in row))
    fig.add_trace(go.Heatmap(z=r.output_seq0, x=cols, y=[f"t = {t}" for t in range(length)], zmin=-bound,
                             zmax=bound, colorscale=VALUES, showscale=False, xgap=1, ygap=1,
                             hovertemplate="%{y}, %{x}: %{z:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=r.h_n_seq0, x=[f"h{j}" for j in range(r.hidden)], y=h_n_rows(r), zmin=-bound,
                             zmax=bound, colorscale=VALUES, xgap=1, ygap=1, colorbar=dict(title="value", thickness=12),
                             hovertemplate="%{y}, %{x}: %{z:.4f}<extra></extra>"), row=1, col=2)
    frame = dict(color=COLORS["activation"], width=3)
    last = r.layers * r.directions - r.directions  # h_n row of the last layer's forward direction
    fig.add_shape(type="rect", x0=-0.5, x1=r.hidden - 0.5, y0=length - 1.5, y1=length - 0.5, xref="x", yref="y",
                  line=frame)
    fig.add_shape(type="rect", x0=-0.5, x1=r.hidden - 0.5, y0=last - 0.5, y1=last + 0.5, xref="x2", yref="y2",
                  line=frame)
    if r.bidirectional:
        fig.add_shape(type="rect", x0=r.hidden - 0.5, x1=width - 0.5, y0=-0.5, y1=0.5, xref="x", yref="y",
                      line=dict(frame, dash="dash"))
        fig.add_shape(type="rect", x0=-0.5, x1=r.hidden - 0.5, y0=last + 0.5, y1=last + 1.5, xref="x2", yref="y2",
                      line=dict(frame, dash="dash"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickangle=-45 if width > 10 else 0)
    return base_layout(fig, height=min(max(140 + 24 * length, 300), 460))


def packing_figure(r: PackingResult) -> go.Figure:
    """Per sequence: max |h_n − h_n of the sequence run alone|, for the padded batch and the packed batch."""
    names = [f"seq {i} (length {n})" for i, n in enumerate(r.lengths)]
    fig = go.Figure()
    fig.add_bar(x=names, y=r.padded_vs_alone, name="padded batch", marker_color=COLORS["error"],
                text=[f"{v:.2g}" for v in r.padded_vs_alone], textposition="outside")
    fig.add_bar(x=names, y=r.packed_vs_alone, name="pack_padded_sequence", marker_color=COLORS["parameter"],
                text=[f"{v:.2g}" for v in r.packed_vs_alone], textposition="outside")
    top = max(*r.padded_vs_alone, *r.packed_vs_alone, 1e-6)
    fig.update_yaxes(title="max |h_n − h_n alone|", range=[0, top * 1.2])
    return base_layout(fig, height=320)


def timing_figure(r: TimingResult) -> go.Figure:
    """Left: sequential steps per length (LSTMCell calls against attention calls). Right: the fastest measured
    forward time of nn.LSTM and of nn.MultiheadAttention per length, both axes log."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("steps that must run one after another", "time of one forward (ms)"))
    for col, (lstm, attention) in enumerate(((r.lstm_steps, r.attention_calls), (r.lstm_ms, r.attention_ms)), 1):
        fig.add_scatter(x=r.lengths, y=lstm, mode="lines+markers", name="LSTM", line_color=COLORS["buffer"],
                        showlegend=col == 1, row=1, col=col)
        fig.add_scatter(x=r.lengths, y=attention, mode="lines+markers", name="attention (one layer)",
                        line_color=COLORS["data"], showlegend=col == 1, row=1, col=col)
    fig.update_xaxes(title="sequence length T", type="log", tickvals=r.lengths, ticktext=[str(n) for n in r.lengths])
    fig.update_yaxes(type="log")
    return legend_on_top(base_layout(fig, height=340))
