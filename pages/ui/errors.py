"""Bad input is a sentence on the page, never a traceback."""

from contextlib import contextmanager

import streamlit as st

from demos.errors import InputError


@contextmanager
def input_errors():
    """Run a block; an InputError inside it becomes st.error with its sentence and the page goes on below."""
    try:
        yield
    except InputError as err:
        st.error(str(err), icon=":material/error:")
