"""st.cache_resource and st.cache_data for the functions a page script defines, wrapped once per server.

A page script runs again on every rerun, so it defines its cached functions anew each time, and Streamlit's
decorator then reads each function's source to find its cache (inspect.getsource and a tokenizer pass: about a
millisecond a function, tens of milliseconds a rerun on a page with twenty of them). The server compiles a page
once, so a function defined again has the very same code object: the wrapper made for it the first time is handed
back, and it reads the same cache the new one would have.
"""

import threading

import streamlit as st

_WRAPPERS: dict[tuple, tuple] = {}  # (decorator, id of the code, defaults, options) -> (code, wrapper)
_WRAPPERS_MAX = 512  # above the app's hundred-odd cached functions; AppTest compiles a page afresh on every run
_lock = threading.Lock()


def _reused(decorator, options: dict):
    def wrap(fn):
        if fn.__closure__ is not None:  # a nested function: its free variables may differ from run to run
            return decorator(**options)(fn)
        # the very code object, not an equal one: a page compiled again (edited, or by AppTest) runs in a new
        # namespace, and its functions must see that namespace's names; the entry holds the code, so its id stays
        key = (decorator, id(fn.__code__), repr(fn.__defaults__), repr(sorted(options.items())))
        with _lock:
            hit = _WRAPPERS.get(key)
            if hit is not None and hit[0] is fn.__code__:
                return hit[1]
            if len(_WRAPPERS) >= _WRAPPERS_MAX:
                _WRAPPERS.clear()  # costs only the decorations again
            wrapper = decorator(**options)(fn)
            _WRAPPERS[key] = (fn.__code__, wrapper)
        return wrapper
    return wrap


def cache_resource(**options):
    """st.cache_resource(**options), its wrapper reused when the page defines the same function again."""
    return _reused(st.cache_resource, options)


def cache_data(**options):
    """st.cache_data(**options), its wrapper reused when the page defines the same function again."""
    return _reused(st.cache_data, options)
