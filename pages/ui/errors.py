"""Bad input is a sentence on the page, never a traceback; a bug is a sentence that says so."""

import logging
from contextlib import contextmanager

import streamlit as st

from demos.errors import InputError

BUG_NOTE = "This is a bug in the app"
_log = logging.getLogger(__name__)


@contextmanager
def input_errors():
    """Run a block; an InputError inside it becomes st.error with its sentence and the page goes on below.

    Any other exception is a bug (validation should have caught the input first): the visitor gets one
    sentence naming the error type, the server log gets the traceback, and the page goes on below.
    Streamlit's own control flow (st.stop, st.rerun) derives from BaseException and passes through.
    """
    try:
        yield
    except InputError as err:
        st.error(str(err), icon=":material/error:")
    except Exception as err:
        _log.exception("unexpected error in a demo")
        st.error(f"This part of the page could not be drawn ({type(err).__name__}). {BUG_NOTE}, not in your "
                 "input: the rest of the page still works.", icon=":material/bug_report:")
