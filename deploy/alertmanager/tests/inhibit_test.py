#!/usr/bin/env python3
"""The inhibitions of ../alertmanager.yml on a running Alertmanager: amtool posts alerts and reads
back which ones are inhibited, and by what. Run by tests/it/deploy_kit.rs; by hand:

    python3 deploy/alertmanager/tests/inhibit_test.py

AMTOOL and ALERTMANAGER name the binaries (default: amtool and prometheus-alertmanager, Debian's
names, from PATH). Starts its own Alertmanager on a free loopback port, without clustering, and
stops it. Prints SUCCESS, or what failed and exits 1."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "alertmanager.yml")
AMTOOL = os.environ.get("AMTOOL", "amtool")
ALERTMANAGER = os.environ.get("ALERTMANAGER", "prometheus-alertmanager")

# The alerts posted: name -> labels. A target that is down (chat-7b) and one that only fails
# partly (chat-13b).
ALERTS = {
    "down": dict(alertname="LLMCanaryTargetDown", severity="P0", target="chat-7b"),
    "failing": dict(alertname="LLMCanaryTargetFailing", severity="P0", target="chat-7b"),
    "failing-other": dict(alertname="LLMCanaryTargetFailing", severity="P0", target="chat-13b"),
    "fleet-down": dict(alertname="LLMCanaryFleetTargetDown", severity="P0", target="chat-7b",
                       probe="capital", region="eu-west"),
    "fleet-down-other": dict(alertname="LLMCanaryFleetTargetDown", severity="P0", target="chat-13b",
                             probe="capital", region="eu-west"),
}
# While chat-7b is down: its failing-ratio and fleet down alerts are inhibited by its down alert;
# chat-13b's are not (inhibitions hold per target).
WHILE_DOWN = {"failing": "down", "fleet-down": "down"}


def amtool(url, *args):
    out = subprocess.run([AMTOOL, f"--alertmanager.url={url}", *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"amtool {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def add(url, name, end=None):
    args = ["alert", "add"] + [f"{k}={v}" for k, v in ALERTS[name].items()]
    if end:
        args.append(f"--end={end}")
    amtool(url, *args)


def states(url):
    """name -> (state, names of the alerts inhibiting it), for the posted alerts still active or
    suppressed."""
    got = json.loads(amtool(url, "alert", "query", "--active", "--inhibited", "--output=json"))
    by_fp = {a["fingerprint"]: a["labels"] for a in got}
    name = {json.dumps(v, sort_keys=True): k for k, v in ALERTS.items()}
    out = {}
    for a in got:
        key = name.get(json.dumps(a["labels"], sort_keys=True))
        if key:
            by = sorted(name.get(json.dumps(by_fp.get(fp), sort_keys=True), fp) for fp in a["status"]["inhibitedBy"])
            out[key] = (a["status"]["state"], by)
    return out


def expect(url, what, want):
    """Polls (the inhibitor handles new alerts asynchronously) until the states are `want`."""
    deadline = time.time() + 15
    while True:
        got = states(url)
        if got == want:
            print(f"ok: {what}")
            return
        if time.time() > deadline:
            sys.exit(f"FAILED: {what}\n  want: {want}\n  got:  {got}")
        time.sleep(0.2)


def main():
    for b in (AMTOOL, ALERTMANAGER):
        if not shutil.which(b):
            sys.exit(f"{b} is missing: install the Debian package prometheus-alertmanager")
    # The fleet down alert is routed to the pager, after a longer wait than the other P0s.
    route = amtool("", "config", "routes", "test", f"--config.file={CONFIG}", "--verify.receivers=page",
                   *[f"{k}={v}" for k, v in ALERTS["fleet-down"].items()])
    print(f"ok: LLMCanaryFleetTargetDown routes to {route.split()[0]}")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    data = tempfile.mkdtemp(prefix="am-inhibit-")
    am = subprocess.Popen([ALERTMANAGER, f"--config.file={CONFIG}", f"--storage.path={data}",
                           f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1)
                break
            except OSError:
                if am.poll() is not None:
                    sys.exit(f"Alertmanager exited:\n{am.stderr.read()}")
                if time.time() > deadline:
                    sys.exit("Alertmanager not ready within 20 s")
                time.sleep(0.2)

        # The source first, as Prometheus would send it at the same evaluation or before.
        for name in ALERTS:
            add(url, name)
        expect(url, "chat-7b down inhibits its failing-ratio alert and its fleet down alert; chat-13b's are not inhibited", {
            k: ("suppressed", [WHILE_DOWN[k]]) if k in WHILE_DOWN else ("active", []) for k in ALERTS})

        # The target answers again: its down alert resolves, and what it held is active again.
        add(url, "down", end=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1)))
        expect(url, "once chat-7b's down alert resolves, its other alerts are no longer inhibited", {
            k: ("active", []) for k in ALERTS if k != "down"})
    finally:
        am.terminate()
        try:
            am.wait(timeout=10)
        except subprocess.TimeoutExpired:
            am.kill()
            am.wait()
        shutil.rmtree(data, ignore_errors=True)
    print("SUCCESS")


if __name__ == "__main__":
    main()
