"""The shared study components, run in AppTest: quiz verdicts come from torch, errors are sentences."""

from streamlit.testing.v1 import AppTest

from tests.conftest import assert_clean, open_page


def quiz_app():
    import torch

    from demos.quiz import Question
    from pages import ui

    def ones_shape():
        return torch.ones(3, 1).expand(3, 5).shape

    ui.predict_then_run(Question("q", "Shape?", ones_shape, "Because.", kind="shape"), key="t")


def test_predict_then_run_compares_with_torch():
    at = AppTest.from_function(quiz_app, default_timeout=60).run()
    assert "expand(3, 5)" in at.code[0].value and "print(" in at.code[0].value
    at.button(key="t_run").click().run()
    assert "Make a prediction first" in at.error[0].value
    at.text_input(key="t_typed").set_value("(5, 3)").run()
    at.button(key="t_run").click().run()
    assert "torch returned `(3, 5)`" in at.warning[0].value and not at.success
    at.text_input(key="t_typed").set_value("3, 5").run()
    at.button(key="t_run").click().run()
    assert "Correct" in at.success[0].value
    at.text_input(key="t_typed").set_value("3, five").run()
    at.button(key="t_run").click().run()
    assert at.error[0].value.endswith("dim 1 (`five`) is not a whole number ≥ 0.")
    assert not at.exception


def errors_app():
    import streamlit as st

    from demos.errors import InputError
    from pages import ui

    with ui.input_errors():
        raise InputError("Dimension 2 is too large.")
    st.markdown("still running")


def test_input_errors_show_a_sentence_and_the_page_goes_on():
    at = AppTest.from_function(errors_app).run()
    assert at.error[0].value == "Dimension 2 is too large."
    assert at.markdown[-1].value == "still running"
    assert not at.exception


def steps_app():
    import streamlit as st

    from pages import ui

    st.session_state.setdefault("whiteboard", True)
    ui.steps(["one", "two", "three"], key="s")


def test_steps_reveal_one_at_a_time_in_whiteboard_mode():
    at = AppTest.from_function(steps_app).run()
    assert at.markdown[0].value == "1. one"
    at.button(key="s_next").click().run()
    assert at.markdown[0].value == "1. one\n2. two"
    at.button(key="s_next").click().run()
    assert at.markdown[0].value.endswith("3. three") and not [b for b in at.button if b.key == "s_next"]
    at.button(key="s_prev").click().run()
    assert at.markdown[0].value == "1. one\n2. two", "the previous step (the ← key presses this button)"
    at.button(key="s_reset").click().run()
    assert at.markdown[0].value == "1. one"


def test_steps_show_everything_outside_whiteboard_mode():
    at = AppTest.from_function(steps_app)
    at.session_state["whiteboard"] = False
    at.run()
    assert at.markdown[0].value == "1. one\n2. two\n3. three"


def test_url_parameters_set_the_view():
    query = {"home_temperature": "2.0", "home_logits": "1, 2, 3, 4", "whiteboard": "true"}
    at = open_page("pages/home.py", query=query)
    at.session_state["home_softmax_code_panel"] = True  # open the code panel (its content is sent only when open)
    at.run()
    assert_clean(at)
    assert at.slider(key="home_temperature").value == 2.0
    assert at.text_input(key="home_logits").value == "1, 2, 3, 4"
    assert at.toggle(key="whiteboard").value is True
    code = next(c.value for c in at.code if "softmax" in c.value)
    assert "logits = [1.0, 2.0, 3.0, 4.0]" in code and "temperature = 2.0" in code


def test_home_bad_logits_show_error_then_recover():
    at = open_page("pages/home.py")
    at.text_input(key="home_logits").set_value("2, x").run()
    assert at.error[0].value == "Logits, entry 2: `x` is not a number such as 3, -0.5 or 1e-3." and not at.exception
    at.slider(key="home_temperature").set_value(9.5).run()
    at.text_input(key="home_logits").set_value("2, 1").run()
    assert_clean(at)


def corner_app():
    import torch

    from demos.quiz import Question
    from pages import ui

    def first():
        return torch.zeros(2, 3).T.shape

    def second():
        return torch.tensor([1, 2]).dtype

    ui.interview_corner("tensors", [
        Question("first", "Shape?", first, "Transposed.", kind="shape"),
        Question("second", "Dtype?", second, "Integers.", choices=("torch.int64", "torch.float32")),
    ])


def test_interview_corner_shows_one_question_and_marks_answers():
    at = AppTest.from_function(corner_app, default_timeout=60).run()
    assert len(at.code) == 1 and ".T.shape" in at.code[0].value
    at.text_input(key="tensors_q_first_typed").set_value("3, 2").run()
    at.button(key="tensors_q_first_run").click().run()
    assert "Correct" in at.success[0].value
    at.radio(key="tensors_q_pick").set_value(1).run()
    assert len(at.code) == 1 and ".dtype" in at.code[0].value
    picker = at.radio(key="tensors_q_pick")
    assert picker.options == ["1", "2"] and list(picker.proto.captions) == ["✓", ""]
    assert at.expander and not at.exception, "model answers follow the questions"


def test_the_picker_keeps_its_question_in_the_url_after_answering():
    """The URL stores the question's number; answering (which adds a ✓ caption) must not move the picker."""
    at = AppTest.from_function(corner_app, default_timeout=60)
    at.query_params["tensors_q_pick"] = "2"
    at.run()
    assert at.radio(key="tensors_q_pick").value == 1 and ".dtype" in at.code[0].value
    labels = at.radio(key="tensors_q_pick").options
    at.radio(key="tensors_q_second_pick").set_value("torch.int64").run()
    at.button(key="tensors_q_second_run").click().run()
    assert "Correct" in at.success[0].value
    at.run()
    assert at.radio(key="tensors_q_pick").options == labels, "the stored value is a label: labels never change"
    assert at.radio(key="tensors_q_pick").value == 1, "still on question 2"
    assert at.query_params["tensors_q_pick"] == "2"


def test_a_verdict_belongs_to_its_prediction_and_try_again_clears_it():
    at = AppTest.from_function(quiz_app, default_timeout=60).run()
    at.text_input(key="t_typed").set_value("torch.Size([3, 5])").run()
    at.button(key="t_run").click().run()
    assert "Correct" in at.success[0].value
    at.text_input(key="t_typed").set_value("(5, 3)").run()
    assert not at.success and not at.warning, "the old verdict judged another prediction"
    at.button(key="t_run").click().run()
    assert "torch returned `(3, 5)`" in at.warning[0].value
    at.button(key="t_retry").click().run()
    assert at.text_input(key="t_typed").value == "" and not at.warning and not at.success
    assert not [b for b in at.button if b.key == "t_retry"], "Try again shows only beside a verdict"
    at.text_input(key="t_typed").set_value("[3, 5]").run()
    at.button(key="t_run").click().run()
    assert "Correct" in at.success[0].value and not at.exception


def number_app():
    import torch

    from demos.quiz import Question
    from pages import ui

    def tiny():
        return torch.sigmoid(torch.tensor(0.0)) ** 10 / 1024  # about 9.5e-7

    ui.predict_then_run(Question("n", "How small?", tiny, "About 9.5e-7.", kind="number"), key="n")


def test_an_order_of_magnitude_answer_is_close():
    at = AppTest.from_function(number_app, default_timeout=60).run()
    at.text_input(key="n_typed").set_value("1e-6").run()
    at.button(key="n_run").click().run()
    assert at.info[0].value.startswith("Close: torch says `9.53674e-07`")
    at.text_input(key="n_typed").set_value("9.5e-7").run()
    at.button(key="n_run").click().run()
    assert "Correct" in at.success[0].value


def test_whiteboard_mode_reveals_the_answer_as_a_step():
    at = AppTest.from_function(quiz_app, default_timeout=60)
    at.session_state["whiteboard"] = True
    at.run()
    assert at.subheader[0].value == "Shape?"
    assert "torch returned" not in " ".join(m.value for m in at.markdown)
    at.button(key="t_reveal_next").click().run()
    assert "torch returned `(3, 5)`" in at.markdown[-1].value


def model_quiz_app():
    from demos.memory.questions import QUESTIONS
    from pages import ui

    ui.predict_then_run(next(q for q in QUESTIONS if q.key == "round_up"), key="m")


def test_a_question_answered_by_a_model_names_the_model_and_its_source():
    at = AppTest.from_function(model_quiz_app, default_timeout=60).run()
    assert at.code[0].value.splitlines()[0] == "from demos.memory.allocator import round_size", "no unused imports"
    about = next(c.value for c in at.caption if c.value.startswith("Answered by"))
    assert "this app's model of the CUDA caching allocator" in about and "CUDACachingAllocator.cpp" in about
    at.text_input(key="m_typed").set_value("512").run()
    at.button(key="m_run").click().run()
    assert "the model returned `1024`" in at.warning[0].value and "torch returned" not in at.warning[0].value
    assert not at.exception


def default_run_app():
    import streamlit as st

    from pages import ui

    width = st.number_input("width", value=64, key="w")
    if ui.run_button("Run", "r", (width,), default=(64,)):
        st.success(f"ran {width}")


def test_a_default_case_shows_without_a_press_and_other_settings_wait_for_the_button():
    at = AppTest.from_function(default_run_app, default_timeout=60).run()
    assert [s.value for s in at.success] == ["ran 64"] and not at.info
    at.number_input(key="w").set_value(32).run()
    assert not at.success and not at.info
    at.button(key="r_button").click().run()
    assert [s.value for s in at.success] == ["ran 32"]
    at.number_input(key="w").set_value(16).run()
    assert not at.success and "press the button" in at.info[0].value
    at.number_input(key="w").set_value(64).run()
    assert [s.value for s in at.success] == ["ran 64"] and not at.info
