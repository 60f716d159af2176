"""Home: what this is, the topic map, how to use it, the shared components at work, the study tracker."""

import streamlit as st

from demos.errors import InputError
from demos.home import HOME_QUESTIONS, MAX_T, MIN_T, softmax_chart, softmax_temperature
from demos.registry import registered
from demos.style import COLORS
from demos.tracker import export_tracker, import_tracker
from pages import ui
from pages.shell.entry import require_shell
from pages.ui import progress

require_shell()  # a direct run (a fresh server's first deep link) runs the app shell instead


def intro() -> None:
    st.title("PyTorch Whiteboard")
    st.markdown(
        "An interactive whiteboard for the PyTorch topics interviews probe. Every number and figure is "
        "computed by PyTorch when you open the page: predict what torch will do, run it, see why, and see "
        "how it silently goes wrong."
    )


def topic_map() -> None:
    st.header("Topics", divider="gray")
    topics = [t for t in registered() if t.slug != "home"]
    if not topics:
        st.info("No topic pages are installed yet.")
        return
    for row in range(0, len(topics), 3):  # one st.columns per row keeps the cards of a row level
        for column, topic in zip(st.columns(3), topics[row : row + 3], strict=False):
            with column.container(border=True, height="stretch"):
                st.page_link(topic.file, label=f"**{topic.title}**", icon=topic.icon)
                st.markdown(f"*“{topic.question}”*")
                st.caption(topic.summary)


def how_to_use() -> None:
    st.header("How to use it", divider="gray")
    alone, board, share = st.columns(3)
    alone.markdown(
        "**Study alone.** On each page, predict first (shape, dtype, gradient, memory), press *Run it*, and "
        "read why, or drill mixed questions on *Practice*. Tick concepts in the tracker below; its progress link "
        "carries them to your next visit."
    )
    board.markdown(
        "**Explain on a shared screen.** Turn on *Whiteboard mode* in the sidebar: large figures and type, "
        "prose folded away, explanations revealed one step per click."
    )
    share.markdown(
        "**Share a view.** Widgets write their values into the address bar, and demos are seeded: "
        "sending the URL reproduces the same figure for whoever opens it."
    )


@st.fragment  # its own key row: a change redraws this figure alone
def softmax_part() -> None:
    st.subheader("A figure, its code, its link")
    with ui.key_controls("home_softmax"):
        logits_text = st.text_input("Logits", value="2, 1, 0.1", key="home_logits", bind="query-params")
        temperature = st.slider("Temperature T", MIN_T, MAX_T, 0.5, 0.05, key="home_temperature",
                                bind="query-params")
    with ui.input_errors():
        result = ui.compute(softmax_temperature, logits_text, temperature)
        ui.vega(ui.compute(softmax_chart, result), key="home_softmax")
        ui.show_code(result.code, key="home_softmax_code", file_name="softmax_temperature.py")


def components_demo() -> None:
    st.header("Try it here", divider="gray")
    left, right = st.columns([3, 2], gap="large")
    with left:
        softmax_part()
        ui.prose("Dividing logits by T < 1 sharpens the distribution; T > 1 flattens it. Try typing `2, x` "
                 "into the logits to see how bad input is answered.")
        st.markdown("**One colour per concept, on every page's figures:**")
        ui.legend(list(COLORS))
    with right:
        st.subheader("Predict, then run")
        ui.predict_then_run(HOME_QUESTIONS[0], key="home_quiz")
        st.subheader("Step by step")
        ui.steps(
            [
                "`loss.backward()` starts at `loss.grad_fn` with gradient 1.",
                "The engine walks `next_functions`, calling each node's backward on the incoming gradient.",
                "Gradients meeting at one tensor are summed.",
                "At each leaf with `requires_grad=True`, the result is added into `.grad`.",
                "The graph's saved tensors are freed unless `retain_graph=True`.",
            ],
            key="home_backward_steps",
        )


def _tracker_key(slug: str, index: int) -> str:
    return f"track__{slug}__{index}"


def _tracker_box(slug: str, index: int, concept: str) -> None:
    """A concept's checkbox, showing the session's progress (which Practice, an import or a link may change)."""
    key = _tracker_key(slug, index)
    ticked = concept in progress.progress().done.get(slug, ())
    if st.session_state.get(key) != ticked:
        st.session_state[key] = ticked
    st.checkbox(concept, key=key, on_change=_on_tick, args=(slug, concept, key))


def _on_tick(slug: str, concept: str, key: str) -> None:
    progress.set_ticked(slug, concept, st.session_state[key])


def _on_tracker_upload() -> None:
    """Runs before the page: load the uploaded tracker into the session's progress, or keep it and say why."""
    upload = st.session_state.get("home_tracker_upload")
    st.session_state.pop("home_tracker_error", None)
    if upload is None:
        return
    try:
        progress.set_progress(import_tracker(upload.getvalue(), progress.known_concepts()))
    except InputError as err:
        st.session_state["home_tracker_error"] = str(err)


def tracker() -> None:
    st.header("Study tracker", divider="gray")
    known = progress.known_concepts()
    if not known:
        st.info("The tracker lists the concepts of each topic page once topic pages are installed.")
        return
    with ui.settings("home_tracker", label="Concepts studied, export and import"):  # folded on a shared screen
        tracker_body(known)


def tracker_body(known: dict[str, tuple[str, ...]]) -> None:
    titles = {t.slug: t.title for t in registered()}
    columns = st.columns(min(3, len(known)))
    for i, (slug, concepts) in enumerate(known.items()):
        with columns[i % len(columns)]:
            st.markdown(f"**{titles[slug]}**")
            for j, concept in enumerate(concepts):
                _tracker_box(slug, j, concept)
    current = progress.progress()
    total = sum(len(c) for c in known.values())
    st.progress(current.ticked() / total, text=f"{current.ticked()} of {total} concepts studied")
    st.caption("Ticks stay for this visit on every page; Practice ticks a concept once you master its questions.")
    progress.progress_link_panel()
    export, load = st.columns(2)
    export.download_button(
        "Export tracker (JSON)", export_tracker(dict(current.done), current.review),
        file_name="whiteboard-tracker.json", mime="application/json", key="home_tracker_export", on_click="ignore",
        icon=":material/download:",
    )
    load.file_uploader("Import a tracker file", type=["json"], key="home_tracker_upload", on_change=_on_tracker_upload)
    if "home_tracker_error" in st.session_state:
        load.error(st.session_state["home_tracker_error"], icon=":material/error:")


progress.load_link_from_url()
intro()
progress.show_link_notice()
topic_map()
how_to_use()
components_demo()
tracker()
