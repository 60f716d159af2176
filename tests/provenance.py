"""Which functions ran: the check that a snippet's source is the code that drew the figure (demos/shown.py)."""

import inspect
import os
import sys
import tempfile
import threading
import types
from contextlib import contextmanager
from pathlib import Path

import torch

# While calls are recorded this environment variable names a folder where a process this one starts may write the
# code it ran, one `file<TAB>first line<TAB>name` line each (demos/distributed/launcher.py does for its ranks).
CHILD_CALLS = "WB_CALLS_DIR"


@contextmanager
def recording_calls():
    """Collect the code object of every Python function called in this process (all threads) while inside, and the
    class of every object a Python __init__ made: a DataLoader's dataset runs its methods in worker processes,
    which this process cannot see, but it was made here. Processes that report what they ran (CHILD_CALLS) add
    the (file, first line, name) of each function they ran."""
    called: set[types.CodeType | type] = set()
    # A thread the call started keeps this trace function after the block ends (threading.settrace(None) only
    # reaches new threads): the lock and flag stop it adding to `called` while the caller reads the set.
    lock, recording = threading.Lock(), [True]

    def trace(frame, event, arg):  # a global trace function sees Python calls only (a profiler also sees every
        with lock:  # C call, each torch op): returning None skips tracing the lines inside
            if not recording[0]:
                return None
            called.add(frame.f_code)
            if frame.f_code.co_name == "__init__" and frame.f_code.co_varnames[:1] == ("self",):
                called.add(type(frame.f_locals["self"]))

    old, old_folder = sys.gettrace(), os.environ.get(CHILD_CALLS)
    with tempfile.TemporaryDirectory(prefix="wb-calls-") as folder:
        os.environ[CHILD_CALLS] = folder
        sys.settrace(trace)
        threading.settrace(trace)
        try:
            yield called
        finally:
            sys.settrace(old)
            threading.settrace(None)
            with lock:
                recording[0] = False
            if old_folder is None:
                os.environ.pop(CHILD_CALLS, None)
            else:
                os.environ[CHILD_CALLS] = old_folder
            called |= _reported_by_children(folder)


def _reported_by_children(folder: str) -> set[tuple[str, int, str]]:
    """The (file, first line, name) of each function that processes started meanwhile reported running."""
    out = set()
    for report in Path(folder).glob("*.calls"):
        for line in report.read_text(encoding="utf-8").splitlines():
            file, first, name = line.split("\t")
            out.add((file, int(first), name))
    return out


def code_objects(obj) -> set[types.CodeType]:
    """The code objects of a function, of a class's methods, or of a module's functions and classes' methods."""
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return {inspect.unwrap(obj).__code__}
    members = vars(obj).values()
    if inspect.ismodule(obj):
        members = [m for m in members if getattr(m, "__module__", None) == obj.__name__]
    else:  # a class: its own methods and the classes written inside it, not classes it merely refers to (an
        # autograd Function's generated _backward_cls points back at it)
        members = [m for m in members if not inspect.isclass(m) or m.__qualname__.startswith(obj.__qualname__ + ".")]
    found = set()
    for member in members:
        if inspect.isfunction(member) or inspect.isclass(member):
            found |= code_objects(member)
        elif isinstance(member, (staticmethod, classmethod, property)):
            found |= code_objects(getattr(member, "__func__", None) or member.fget)
    return found


def _where(code: types.CodeType) -> tuple[str, int, str]:
    """A code object's file, first line and name: torch.compile runs a function through a transformed copy of its
    code object, which keeps all three."""
    return code.co_filename, code.co_firstlineno, code.co_name


def origins_that_did_not_run(script, called: set) -> list[str]:
    """Names of the script's origins of which no function ran (empty when every shown piece of code ran)."""
    ran = {_where(c) for c in called if isinstance(c, types.CodeType)} | {c for c in called if isinstance(c, tuple)}
    return [getattr(o, "__qualname__", getattr(o, "__name__", repr(o))) for o in script.origins
            if o not in called and not {_where(c) for c in code_objects(o)} & ran]


def clear_demo_caches() -> None:
    """Empty every functools cache of the loaded demos modules: a cached function that an earlier test filled would
    answer from its cache, and its code would not run during the call under test."""
    for name, module in list(sys.modules.items()):
        if name == "demos" or name.startswith("demos."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__"):
                    value.cache_clear()


def assert_shows_what_ran(demo, *args, **kwargs):
    """Call demo(*args, **kwargs); every snippet its result holds (the result itself, a field, or an item:
    demos.shown.scripts_in) must be a Script whose every origin ran during the call. Returns the result."""
    from demos.shown import scripts_in

    clear_demo_caches()
    with recording_calls() as called:
        result = demo(*args, **kwargs)
    codes = scripts_in(result)
    assert codes, f"{demo.__qualname__}: the result holds no Script (a hand-written string is not one)"
    for code in codes:
        assert code.origins, f"{demo.__qualname__}: the Script names no origins"
        missing = origins_that_did_not_run(code, called)
        if not torch.cuda.is_available():  # a GPU-only piece of a snippet runs on a host that has one
            missing = [name for name in missing if name not in {o.__qualname__ for o in code.cuda_only}]
        assert not missing, f"{demo.__qualname__}: shown but never ran: {missing}"
    return result
