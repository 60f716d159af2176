"""Home: the softmax-with-temperature figure's snippet prints its probabilities."""

from demos import home
from tests.snippets import checks


@checks(home.softmax_temperature)
def home_softmax(r, run):
    assert run(r.code) == f"{list(r.probs)}\n"
