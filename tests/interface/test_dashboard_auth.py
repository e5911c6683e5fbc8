"""The dashboard off this machine (issue 56, item 10): bound beyond 127.0.0.1 it asks for a password (Panel's
basic auth; generated and printed at start, or the first line of ``--token-file``), so a script that forges
an ``Origin`` header — which stopped browsers only — gets the login page, not the app, and its websocket is
refused; with the password the app is served. On 127.0.0.1 nothing changes. Real ``daskgp dashboard``
processes, real HTTP."""

from __future__ import annotations

import http.cookiejar
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _get(url, headers=None, opener=None):
    """(status, final URL or Location, body) without following redirects."""
    opener = opener or urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status, r.url, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", ""), ""


@pytest.fixture
def dashboard(tmp_path):
    started = []

    def start(*args):
        port = _free_port()
        log = open(tmp_path / f"dashboard-{port}.log", "w+")
        p = subprocess.Popen([sys.executable, "-m", "daskgp", "dashboard", "--port", str(port), *args],
                             stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        started.append(p)
        for _ in range(120):
            log.seek(0)
            text = log.read()
            if "Launching server" in text or p.poll() is not None:
                break
            time.sleep(0.5)
        assert p.poll() is None, text
        return port, text

    yield start
    for p in started:
        p.terminate()
        p.wait(timeout=30)


def test_off_this_machine_the_dashboard_asks_for_a_password(dashboard, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("a-long-password-of-mine-0123\n")
    port, said = dashboard("--address", "0.0.0.0", "--token-file", str(token_file))
    assert "log in with any user name and the password in" in said and "a-long-password" not in said
    base = f"http://127.0.0.1:{port}"
    forged = {"Origin": f"http://127.0.0.1:{port}", "Host": f"127.0.0.1:{port}"}
    status, where, _ = _get(f"{base}/sgld", forged)
    assert status == 302 and "/login" in where, (status, where)  # a forged Origin no longer reaches the app
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "x3JJHMbDL1EzLkh9GBhXDw=="}
    status, _, _ = _get(f"{base}/sgld/ws", {**forged, **upgrade})
    assert status in (401, 403), status
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    _get(f"{base}/login", opener=opener)

    def login(password):
        data = urllib.parse.urlencode({"username": "me", "password": password}).encode()
        try:
            with opener.open(urllib.request.Request(f"{base}/login", data=data), timeout=30) as r:
                return r.status, r.url
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location", "")

    status, where = login("wrong-password-0123456789")
    assert "error" in where and _get(f"{base}/sgld", opener=opener)[0] == 302
    status, where = login("a-long-password-of-mine-0123")
    assert "error" not in where, where
    status, _, body = _get(f"{base}/sgld", opener=opener)
    assert status == 200 and "bokeh" in body.lower()


def test_a_generated_password_is_printed_and_loopback_needs_none(dashboard, tmp_path):
    _, said = dashboard("--address", "0.0.0.0")
    assert "the password " in said and len(said.split("the password ", 1)[1].split()[0]) >= 24
    port, said = dashboard()  # 127.0.0.1: only this machine reaches it, as before
    status, _, body = _get(f"http://127.0.0.1:{port}/sgld")
    assert status == 200 and "bokeh" in body.lower() and "log in" not in said


def test_a_short_or_unreadable_token_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "short").write_text("abc\n")
    for path, msg in ((tmp_path / "short", "16 characters or more"), (tmp_path / "none", "cannot be read")):
        r = subprocess.run([sys.executable, "-m", "daskgp", "dashboard", "--address", "0.0.0.0",
                            "--token-file", str(path), "--port", str(_free_port())], capture_output=True,
                           text=True, timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1 and msg in lines[0], r.stderr
