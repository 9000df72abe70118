#!/usr/bin/env python3
"""Open q35 serve's chat page in headless Chromium with ?q=TEXT (the page sends TEXT on load),
wait until the streamed reply is complete, and print its text. Drives Chromium through the
DevTools protocol on --remote-debugging-pipe (file descriptors 3 and 4), standard library only.
usage: serve_page.py URL [timeout_s]"""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

url = sys.argv[1]
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()
# move the child's ends above 4 so that dup2 onto 3 and 4 never clobbers one of them
for name in ("to_chrome_r", "from_chrome_w"):
    fd = globals()[name]
    globals()[name] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)


def child_fds():
    os.dup2(to_chrome_r, 3)
    os.dup2(from_chrome_w, 4)


# the binary itself: Debian's /usr/bin/chromium wrapper script does not keep fds 3 and 4 open
chrome = os.environ.get("Q35_CHROMIUM") or next(
    (p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if os.path.exists(p)), "chromium")
# a profile directory of our own unless the caller names one; removed at the end
profile = os.environ.get("Q35_CHROME_PROFILE") or tempfile.mkdtemp(prefix="q35-chrome-")
proc = subprocess.Popen(
    [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--remote-debugging-pipe",
     "--user-data-dir=" + profile, "about:blank"],
    preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=None if os.environ.get("Q35_CHROME_LOG") else subprocess.DEVNULL)
os.close(to_chrome_r)
os.close(from_chrome_w)
buf = b""
next_id = 0


def call(method, params=None, session=None):
    global buf, next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    while True:
        while b"\0" not in buf:
            chunk = os.read(from_chrome_r, 65536)
            if not chunk:
                raise SystemExit("chromium closed the DevTools pipe")
            buf += chunk
        raw, buf = buf.split(b"\0", 1)
        reply = json.loads(raw)
        if reply.get("id") == next_id:
            if "error" in reply:
                raise SystemExit("%s: %s" % (method, reply["error"]))
            return reply["result"]


result = 1
try:
    target = call("Target.createTarget", {"url": url})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    probe = ("(() => { const e = document.querySelector('.msg.error'); if (e) return 'ERROR ' + e.textContent;"
             " const d = document.querySelector('#reply-1.done'); return d ? 'REPLY ' + d.textContent : null; })()")
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session)
        v = r.get("result", {}).get("value")
        if v:
            kind, _, text = v.partition(" ")
            if kind == "REPLY":
                sys.stdout.write(text)
                result = 0
            else:
                sys.stderr.write("the page shows an error: %s\n" % text)
            break
        time.sleep(0.2)
    else:
        sys.stderr.write("no complete reply on the page within %.0f s\n" % timeout)
    try:
        call("Browser.close")
    except SystemExit:
        pass
finally:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if not os.environ.get("Q35_CHROME_PROFILE"):
        shutil.rmtree(profile, ignore_errors=True)
sys.exit(result)
