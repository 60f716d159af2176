"""Keep Streamlit's garbage collection after every run cheap in a process that has torch loaded.

Streamlit runs a full `gc.collect(2)` after each script run (`runner.postScriptGC`), holding the GIL, so the
run's messages wait for it before they reach the browser. With torch, plotly and pandas imported that pass
walks 250-400k long-lived objects: 150-300 ms on a 2-core host, more than any page's own script costs.
Objects moved to the permanent generation with `gc.freeze()` are not walked, so after a freeze the
post-run pass only sees what the runs themselves create.
"""

import gc
import sys
import threading

_lock = threading.Lock()
_modules_at_freeze = 0


def freeze_loaded_code() -> bool:
    """Freeze the heap if modules were imported since the last freeze (the first visit of a page); True if it did.

    The young generations are collected first (a few ms; a full pass would cost the 150-300 ms this saves),
    so the run's own garbage is not frozen with the code: what is frozen is the imported modules and what was
    alive then. That happens once per batch of new modules, so at most once per page per process.
    """
    global _modules_at_freeze
    with _lock:
        if len(sys.modules) == _modules_at_freeze:
            return False
        _modules_at_freeze = len(sys.modules)
        gc.collect(1)
        gc.freeze()
        return True
