#!/usr/bin/env python3
"""How long the listener's pages take to load in headless Chromium, driven over the DevTools
protocol (a fresh tab per run, nothing cached: the pages are served with no-store).

For each run it reads, in milliseconds from the navigation's start: the HTML's response, DOM
content loaded, the status table drawn (the page's own mark, `data-status-loaded`: every row
fetched from /api/v1/status, modelled, filtered, sorted and the first 500 put in the DOM), and the
charts drawn (`data-summary-loaded`: /api/v1/summary fetched and both SVGs drawn); for a target
page, `data-target-loaded`. Overview loads are 31 s apart (--gap): the listener reuses a summary
of now for 30 s, and each load here pays for its own. Prints the median and the slowest of each,
and the API documents' own times and sizes from curl, for comparison.

    page_load.py URL [URL ...] [--runs 7] [--chromium /usr/bin/chromium]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket  # websocket-client


class DevTools:
    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="tlsaudit-page-load-")
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             "--window-size=1280,900", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        self.port = int(open(port_file).read().split()[0])
        self.next_id = 0

    def new_tab(self):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        target = json.load(urllib.request.urlopen(request))
        return target["id"], websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30)

    def close_tab(self, tab_id, socket):
        socket.close()
        urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{tab_id}").read()

    def call(self, socket, method, **params):
        self.next_id += 1
        socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, socket, expression):
        result = self.call(socket, "Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


MARKS = {"statusLoaded": "table drawn", "summaryLoaded": "charts drawn", "targetLoaded": "target drawn"}


def measure(devtools, url, timeout=60):
    tab, socket = devtools.new_tab()
    try:
        devtools.call(socket, "Page.enable")
        devtools.call(socket, "Page.navigate", url=url)
        wanted = ["targetLoaded"] if "/targets/" in url else ["statusLoaded", "summaryLoaded"]
        deadline = time.time() + timeout
        while time.time() < deadline:
            marks = devtools.evaluate(socket, "JSON.stringify(Object.assign({}, document.documentElement.dataset))")
            marks = json.loads(marks) if marks else {}
            if all(name in marks for name in wanted):
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"{url}: the page did not finish drawing within {timeout} s")
        navigation = json.loads(devtools.evaluate(socket, "JSON.stringify(performance.getEntriesByType('navigation')[0])"))
        rows = devtools.evaluate(socket, "document.querySelectorAll('tbody tr').length")
        figures = {"html response": navigation["responseEnd"], "DOM content loaded": navigation["domContentLoadedEventEnd"]}
        for name in wanted:
            figures[MARKS[name]] = float(marks[name])
        return figures, rows
    finally:
        devtools.close_tab(tab, socket)


def api_times(base, paths):
    lines = []
    for path in paths:
        output = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", base + path],
                                capture_output=True, text=True, check=True).stdout.split()
        lines.append(f"  {path}: {float(output[0]) * 1000:.0f} ms, {int(output[1]) / 1e6:.2f} MB")
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--gap", type=float, default=31, help="seconds between overview loads (past the summary's reuse)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    arguments = parser.parse_args()
    devtools = DevTools(arguments.chromium)
    try:
        for url in arguments.urls:
            measure(devtools, url)  # warm-up: the browser's own start, the listener's first read
            runs = []
            for _ in range(arguments.runs):
                # The listener answers a summary of now again for 30 s: wait that out, so each
                # overview load pays for its report (the first viewer's case, not the cached one).
                if "/targets/" not in url:
                    time.sleep(arguments.gap)
                runs.append(measure(devtools, url))
            print(f"{url} ({arguments.runs} runs, {runs[0][1]} rows in the DOM):")
            for name in runs[0][0]:
                values = [run[0][name] for run in runs]
                print(f"  {name}: median {statistics.median(values):.0f} ms, slowest {max(values):.0f} ms")
            base = url.split("/", 3)
            origin = base[0] + "//" + base[2]
            # The summary with `at` (now): computed, not the one reused for 30 s.
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            paths = [url[len(origin):].replace("/targets/", "/api/v1/targets/")] if "/targets/" in url \
                else ["/api/v1/status", "/api/v1/summary?since=30d&at=" + now]
            print("\n".join(api_times(origin, paths)))
    finally:
        devtools.close()


if __name__ == "__main__":
    sys.exit(main())
