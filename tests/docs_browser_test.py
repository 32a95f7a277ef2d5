#!/usr/bin/env python3
"""The generated documentation opened in a real browser (Debian's chromium, headless), as a reader
would: each page below must load without a JavaScript error or a failed resource, show text, and
the search for "run" must list results. A screenshot of each page is kept in DOCS/screenshots.

    tests/docs_browser_test.py DOCS          (DOCS: scripts/docs.sh's output, holding plugboard/, plugboard_nx/)

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages, each
ending in a NUL byte, written to its fd 3 and read from its fd 4), so nothing but the standard library
and the browser is needed. Exit 0 when every check passes; otherwise each failure is printed with
the page and the error.
"""
import base64
import json
import os
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import time

# (name of the screenshot, page under DOCS, what the page must show); ex_doc's pages (all but cpp/,
# Doxygen's) also have a sidebar that JavaScript builds.
PAGES = [
    ("plugboard-index", "plugboard/index.html", "Plugboard"),
    ("plugboard-guide-release", "plugboard/release.html", "One release, N accelerator targets"),
    ("plugboard-guide-performance", "plugboard/performance.html", "Performance"),
    ("plugboard-module", "plugboard/Plugboard.html", "Plugboard"),
    ("plugboard-search-run", "plugboard/search.html?q=run", None),
    ("plugboard_nx-module", "plugboard_nx/Plugboard.Nx.html", "Plugboard.Nx"),
    ("plugboard_nx-guide-nx", "plugboard_nx/nx.html", "Nx on plugboard"),
    ("cpp-index", "cpp/html/index.html", "Errors as values; nothing throws."),
    ("cpp-client", "cpp/html/classplugboard_1_1api_1_1Client.html", "A started plugin"),
]


class Browser:
    """A headless chromium on a DevTools pipe: send(method, params) waits for that command's answer;
    the events that came meanwhile are kept in self.events."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="plugboard-docs-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # The child sees the pipe ends as its fd 3 (commands) and fd 4 (answers): moved out of the way
        # first (either may be 3 or 4 already), and not closed by subprocess (close_fds would run
        # after this and close 3 and 4).
        def child_fds():
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
            os.closerange(5, os.sysconf("SC_OPEN_MAX"))  # nothing else of this process's
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--window-size=1280,900",
             "--disable-dev-shm-usage",
             f"--user-data-dir={self.profile}", "about:blank"],
            close_fds=False, preexec_fn=child_fds, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 65536)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe (did it start?)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        # The browser's helpers (renderers, the GPU process) are in its process group.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def problems_in(events):
    """JavaScript exceptions, console errors and failed loads among the events of one page."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append("JavaScript exception: " + details.get("exception", {}).get("description", details.get("text", "?")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            found.append("console error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"browser error: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            found.append(f"failed to load a resource: {params.get('errorText')}")
    return found


def evaluate(browser, session, expression):
    """The expression's value in the page; None while the page is being replaced (a redirect)."""
    try:
        result = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
    except RuntimeError:
        return None
    return result.get("result", {}).get("value")


def broken_links(browser, session, docs):
    """The page's links to files (not to the web, not to an anchor of itself) whose file is missing."""
    hrefs = evaluate(browser, session, "Array.from(document.querySelectorAll('a[href]')).map(a => a.href)") or []
    missing = []
    for href in hrefs:
        if href.startswith("file://"):
            path = href[len("file://"):].split("#")[0].split("?")[0]
            if path and not os.path.exists(path):
                missing.append(os.path.relpath(path, docs))
    return sorted(set(missing))


def check_page(browser, docs, shots, name, page, must_show):
    failures = []
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable", session=session)
    browser.events.clear()
    path, _, query = page.partition("?")
    url = "file://" + os.path.join(docs, path) + ("?" + query if query else "")
    if not os.path.exists(os.path.join(docs, path)):
        return [f"{page}: no such file in {docs}"]
    browser.send("Page.navigate", {"url": url}, session)
    browser.wait_for("Page.loadEventFired")
    # ex_doc builds the sidebar and the search results in JavaScript after the load.
    deadline = time.monotonic() + 10
    while True:
        text = evaluate(browser, session, "document.querySelector('#content') ? document.querySelector('#content').innerText : document.body.innerText") or ""
        if must_show is None:
            results = evaluate(browser, session, "document.querySelectorAll('#content .result, #content .search-result').length") or 0
            done = results > 0
        else:
            done = must_show in text
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    title = evaluate(browser, session, "document.title") or ""
    sidebar = evaluate(browser, session, "document.querySelectorAll('#sidebar a, #nav-tree a').length") or 0
    if len(text.strip()) < 200:
        failures.append(f"{page}: the page shows almost nothing ({len(text.strip())} characters)")
    if must_show is not None and must_show not in text:
        failures.append(f"{page}: {must_show!r} is not on the page (title {title!r})")
    if must_show is None and not done:
        failures.append(f"{page}: the search lists no result (the page says: {text.strip()[:200]!r})")
    if not page.startswith("cpp/") and sidebar < 10:
        failures.append(f"{page}: the sidebar has {sidebar} links (its JavaScript did not build it?)")
    failures += [f"{page}: {p}" for p in problems_in(browser.events)]
    failures += [f"{page}: a link to a missing file: {m}" for m in broken_links(browser, session, docs)]
    shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)
    with open(os.path.join(shots, name + ".png"), "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print(f"[browser] {page}: {title!r}, {len(text)} characters, {sidebar} sidebar links"
          + (f", {results} search results" if must_show is None else "") + f" -> screenshots/{name}.png")
    browser.send("Target.closeTarget", {"targetId": target})
    return failures


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: docs_browser_test.py DOCS_DIR")
    docs = os.path.abspath(sys.argv[1])
    if shutil.which("chromium") is None:
        sys.exit("docs_browser_test: no chromium on PATH (Debian's chromium package, deps/apt-packages.txt)")
    shots = os.path.join(docs, "screenshots")
    os.makedirs(shots, exist_ok=True)
    browser = Browser()
    failures = []
    try:
        for name, page, must_show in PAGES:
            failures += check_page(browser, docs, shots, name, page, must_show)
    finally:
        browser.close()
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        sys.exit(1)
    print(f"[browser] {len(PAGES)} pages without an error; screenshots in {shots}")


if __name__ == "__main__":
    main()
