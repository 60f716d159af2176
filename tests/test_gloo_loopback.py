"""Every gloo group the app makes listens on 127.0.0.1 only: the questions that run gloo ranks as threads of the
server (interview corner, Practice) make their groups with GLOO_SOCKET_IFNAME set to the loopback interface."""

import os
import random

import psutil
import pytest
import torch.distributed as dist

from demos.distributed.questions import QUESTIONS
from demos.practice.gen_scale import all_reduce_question
from demos.processes import loopback_interface


@pytest.fixture
def groups_made(monkeypatch):
    """Each group the code makes: (GLOO_SOCKET_IFNAME when it was made, this process's listening addresses)."""
    made, real = [], dist.ProcessGroupGloo

    def recording(*args, **kwargs):
        pg = real(*args, **kwargs)
        listening = {c.laddr.ip for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        made.append((os.environ.get("GLOO_SOCKET_IFNAME"), listening))
        return pg

    monkeypatch.setattr(dist, "ProcessGroupGloo", recording)
    return made


@pytest.mark.parametrize("question", [
    *(q for q in QUESTIONS if q.key in {"reduce_scatter", "all_reduce_sum"}),
    all_reduce_question(random.Random(0)),
], ids=lambda q: q.key or "practice all_reduce")
def test_a_question_s_gloo_groups_listen_on_loopback_only(groups_made, question):
    question.run()
    assert groups_made, "the question made gloo groups"
    for interface, listening in groups_made:
        assert interface == loopback_interface()
        assert listening and listening <= {"127.0.0.1"}, listening
