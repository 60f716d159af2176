"""Two app replicas behind nginx with cookie affinity, as deploy/ runs them, without Docker: Debian's nginx runs
deploy/nginx/whiteboard.conf (only its listen, upstream-server and log-path lines replaced) in front of two
streamlit servers on 127.0.0.1. Ten headless visitors each stay on one replica; a link gives the same view on
either replica; stopping a replica loses no visitor's view (a reload lands on the other and rebuilds it from the
URL)."""

import difflib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from demos.processes import free_port
from harness.browser import (
    ROOT,
    new_context,
    open_page,
    streamlit_server,
    wait_charts,
    wait_every_chart_drawn,
    wait_loaded,
    wait_run,
)

pytestmark = pytest.mark.browser

NGINX_CONF = ROOT / "deploy" / "nginx" / "whiteboard.conf"
VISITORS = 10
# One broadcasting view per visitor (shape A differs; the results stay 3-D, so both charts draw), so a rebuilt
# view can only have come from its own URL.
VIEWS = [f"/tensors?tensors_bc_a={1 + i // 5},1,{1 + i % 5}&tensors_bc_b=3,1" for i in range(VISITORS)]
LOG_LINE = re.compile(r'"(?P<request>[^"]*)" (?P<status>\d+) affinity=(?P<key>\S+) upstream=(?P<upstream>.+)$')


def network_host(url: str) -> str | None:
    """The host a request went to over the network; None for data: and blob: URLs, which never leave the page."""
    parts = urlsplit(url)
    return None if parts.scheme in ("data", "blob") else parts.netloc


def local_nginx_conf(tmp: Path, port: int, replicas: list[str]) -> Path:
    """deploy's nginx file with this host's listen address, replica addresses and log path; a main config around
    it that keeps every nginx path under `tmp`."""
    site = NGINX_CONF.read_text()
    swaps = {
        "    listen 8080;\n": f"    listen 127.0.0.1:{port};\n",
        "    server app:8501;\n": "".join(f"    server {r};\n" for r in replicas),
        "/var/log/nginx/access.log": str(tmp / "access.log"),
    }
    for old, new in swaps.items():
        assert site.count(old) == 1, f"deploy/nginx/whiteboard.conf no longer has exactly one {old.strip()!r}"
        site = site.replace(old, new)
    (tmp / "whiteboard.conf").write_text(site)
    temp_paths = "\n".join(f"    {kind}_temp_path {tmp / kind};" for kind in
                           ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    main = tmp / "nginx.conf"
    main.write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {tmp / "nginx.pid"};
error_log {tmp / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
{temp_paths}
    include {tmp / "whiteboard.conf"};
}}
""")
    return main


def start_nginx(stack: ExitStack, nginx: str, tmp: Path, replicas: list[str]) -> str:
    """nginx (the binary at `nginx`) as a child process, checked with `nginx -t` first; returns its base URL;
    stopped with the stack."""
    port = free_port()
    conf = local_nginx_conf(tmp, port, replicas)
    check = subprocess.run([nginx, "-t", "-p", str(tmp), "-c", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([nginx, "-p", str(tmp), "-c", str(conf)], stderr=subprocess.PIPE)
    stack.callback(lambda: (proc.terminate(), proc.wait(timeout=10)))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                assert r.status == 200
                return url
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
            time.sleep(0.1)


def served_by(tmp: Path) -> dict[str, list[tuple[str, str]]]:
    """Affinity key -> (request, replica that answered) for each logged request; when nginx had to try a dead
    replica first, $upstream_addr lists both, and the last one answered."""
    by_key = defaultdict(list)
    for line in (tmp / "access.log").read_text().splitlines():
        m = LOG_LINE.search(line)
        if m and m["upstream"] != "-":
            by_key[m["key"]].append((m["request"], m["upstream"].split(", ")[-1]))
    return by_key


# What a view shows, read in the page: its prose, code and metrics, and every chart's data.
SIGNATURE = """() => {
    const main = document.querySelector('[data-testid=stMain]');
    const shown = sel => [...main.querySelectorAll(sel)].filter(e => e.checkVisibility());
    const texts = sel => shown(sel).map(e => e.innerText.trim());
    return JSON.stringify({
        text: texts('[data-testid=stMarkdownContainer], [data-testid=stCode], [data-testid=stMetric]').join('\\n'),
        charts: [...main.querySelectorAll('.js-plotly-plot')].map(p => JSON.stringify(p.data)),
    });
}"""


def view_signature(page) -> dict:
    """What the link shows: the page's prose, code and metrics, and every chart's data (the Tensors page draws
    two charts on its Broadcasting tab), read once the view is drawn and has stopped changing."""
    page.bring_to_front()  # a page in the background gets no animation frames, so plotly would not draw there
    assert wait_charts(page, 2, timeout=180) >= 2, "the view's two charts are drawn"
    wait_loaded(page)
    wait_every_chart_drawn(page)
    # A code block's highlighter loads lazily: on a loaded host a block can still be empty here. Every code block
    # on these views has text, so wait until each shows it.
    page.wait_for_function("""() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stCode]')]
                                   .every(e => e.innerText.trim().length > 0)""", timeout=60_000)
    # and until the reading is the same over ten animation frames
    page.wait_for_function(f"""() => new Promise(done => {{
        const read = {SIGNATURE};
        let last = read(), same = 0;
        const tick = () => {{
            const now = read();
            same = now === last ? same + 1 : 0;
            last = now;
            if (same >= 10) done(true); else requestAnimationFrame(tick);
        }};
        requestAnimationFrame(tick); }})""", timeout=60_000)
    return json.loads(page.evaluate(SIGNATURE))


def assert_same_view(got: dict, want: dict, what: str) -> None:
    """Equal charts and text; on a difference, the differing lines of text."""
    diff = "\n".join(difflib.unified_diff(want["text"].splitlines(), got["text"].splitlines(), lineterm="", n=0))
    assert got["text"] == want["text"], f"{what}: the page's text differs:\n{diff}"
    assert got["charts"] == want["charts"], f"{what}: the charts' data differ"


def assert_no_bug(page) -> None:
    bug = page.locator("[data-testid=stException]")
    assert bug.count() == 0, bug.first.inner_text()
    assert page.locator("[data-testid=stAlertContentError]").count() == 0


def open_view(browser, url: str):
    return open_page(browser, url, timeout=180, viewport={"width": 1280, "height": 800})


def sockets_logged(tmp: Path, keys: list[str], timeout: float = 30) -> dict[str, list[tuple[str, str]]]:
    """served_by(tmp) once nginx has logged a websocket for every affinity key (it logs one when it closes)."""
    deadline = time.monotonic() + timeout
    while True:
        log = served_by(tmp)
        if all(any("/_stcore/stream" in request for request, _ in log[key]) for key in keys):
            return log
        if time.monotonic() > deadline:
            return log  # the caller's assertion says which visitor has none
        time.sleep(0.1)


def test_replicas_behind_nginx_keep_each_visitor_and_survive_a_stopped_replica(nginx, browser, tmp_path,
                                                                                monkeypatch):
    # Replicas share one cookie secret, as deploy/ sets it (Streamlit signs its cookies with it).
    monkeypatch.setenv("STREAMLIT_SERVER_COOKIE_SECRET", "replica-test-shared-secret")
    with ExitStack() as stack:
        servers = [stack.enter_context(streamlit_server()) for _ in range(2)]
        replicas = [urlsplit(url).netloc for url, _ in servers]
        balancer = start_nginx(stack, nginx, tmp_path, replicas)

        visitors, requested = [], defaultdict(set)
        for view in VIEWS:  # start all ten page loads, then wait for each
            context = new_context(browser, viewport={"width": 1280, "height": 800})
            page = context.new_page()
            hosts = requested[view]
            page.on("request", lambda r, hosts=hosts: hosts.add(network_host(r.url)))
            page.goto(balancer + view, wait_until="commit")
            visitors.append((context, page))
        keys, views = [], []
        for context, page in visitors:
            wait_run(page, timeout=240)
            assert_no_bug(page)
            keys.append(next(c["value"] for c in context.cookies() if c["name"] == "wb_replica"))
            views.append(view_signature(page))
        assert len(set(keys)) == VISITORS, "each visitor got its own affinity cookie"
        assert all(hosts <= {urlsplit(balancer).netloc, None} for hosts in requested.values()), (
            f"every request went to the app's own origin (favicon included): {dict(requested)}")
        assert page.evaluate("document.querySelector('link[rel~=icon]').href").startswith("data:image/svg+xml")

        # Stickiness so far: every request of a visitor (page, scripts, uploads' and media's routes) reached one
        # replica. Websockets are logged when they close: they are checked at the end.
        log = served_by(tmp_path)
        home = {}
        for key in keys:
            answered = {replica for _, replica in log[key]}
            assert len(answered) == 1, f"visitor {key} was served by {answered}"
            home[key] = answered.pop()
        load = Counter(home.values())
        assert set(load) <= set(replicas), load

        # A link opened on either replica directly gives the same view as through nginx.
        for url, _ in servers:
            context, page = open_view(browser, url + VIEWS[0])
            assert_same_view(view_signature(page), views[0], f"the first link opened on {url}")
            context.close()

        # Stop the busier replica (SIGTERM, as `docker stop` and Kubernetes do): its visitors reload onto the other.
        busiest = load.most_common(1)[0][0]
        _, proc = servers[replicas.index(busiest)]
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        survivor = next(r for r in replicas if r != busiest)
        moved = [i for i, key in enumerate(keys) if home[key] == busiest]
        assert moved, "the stopped replica held visitors"
        for i in moved:
            _, page = visitors[i]
            page.reload()
            wait_run(page, timeout=240)
            assert_no_bug(page)
            assert_same_view(view_signature(page), views[i], f"visitor {i} after {busiest} stopped")
        for context, _ in visitors:
            context.close()  # nginx logs each websocket as it closes
        log = sockets_logged(tmp_path, keys)
        for i, key in enumerate(keys):
            order = [replica for _, replica in log[key]]
            sockets = [replica for request, replica in log[key] if "/_stcore/stream" in request]
            assert sockets and sockets[0] == home[key], f"visitor {i}'s first websocket went to {home[key]}"
            if i in moved:  # on the stopped replica until it stopped, then on the survivor only
                switch = order.index(survivor)
                assert set(order[:switch]) == {busiest} and set(order[switch:]) == {survivor}, order
            else:
                assert set(order) == {home[key]}, f"visitor {i} left its live replica: {order}"
