#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub, for tests/cli/hub.sh (standard library only).

Serves the files of --root as model repositories the way the hub does:
  GET /api/models/{owner}/{name}/revision/{rev}?blobs=true
      -> {"id", "sha": commit, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size", "pointerSize"}}]}
         (*.safetensors are LFS files: blobId is then the Git blob id of their pointer file)
  GET /{owner}/{name}/resolve/{rev}/{path}
      -> small files directly; LFS files by a 302 redirect to /cdn/{owner}/{name}/{sha256}, as the hub
         sends them to its CDN; ETag, X-Repo-Commit, X-Linked-Etag, X-Linked-Size headers; Range requests
         answered with 206 and Content-Range.
The repository name picks a behaviour:
  test/tiny       as above
  test/tampered   model.safetensors is served with one byte changed (the listing keeps the true sha256)
  test/truncated  every model.safetensors response stops after a third of its bytes (connection closed)
  test/missing    generation_config.json is listed but answers 404
  test/norange    Range headers are ignored (always 200 with the whole file)
  test/evil       the listing also names "../evil.json"
  test/private    every request needs "Authorization: Bearer secret" (else 401)
Each request is logged to --log as one line: "METHOD PATH range=R status=S sent=N".
The chosen port is written to --port-file once the server listens; it exits after --lifetime seconds.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
MODES = {"tiny", "tampered", "truncated", "missing", "norange", "evil", "private"}


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256, size):
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256.encode(), size)


class Repo:
    def __init__(self, root):
        self.files = {}
        for name in sorted(os.listdir(root)):
            with open(os.path.join(root, name), "rb") as f:
                self.files[name] = f.read()

    def siblings(self, mode):
        out = []
        for name, data in self.files.items():
            s = {"rfilename": name, "size": len(data)}
            if name.endswith(".safetensors"):
                sha = hashlib.sha256(data).hexdigest()
                pointer = lfs_pointer(sha, len(data))
                s["blobId"] = git_blob_sha1(pointer)
                s["lfs"] = {"sha256": sha, "size": len(data), "pointerSize": len(pointer)}
            else:
                s["blobId"] = git_blob_sha1(data)
            out.append(s)
        if mode == "evil":
            out.append({"rfilename": "../evil.json", "size": 2, "blobId": git_blob_sha1(b"{}")})
        return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    repo = None
    log_path = None
    lock = threading.Lock()

    def log_message(self, fmt, *args):
        pass

    def note(self, status, sent, rng):
        with self.lock, open(self.log_path, "a") as f:
            f.write("%s %s range=%s status=%d sent=%d\n" % (self.command, self.path, rng or "-", status, sent))

    def reply(self, status, body=b"", headers=None, rng=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.note(status, len(body), rng)

    def error(self, status, message):
        self.reply(status, json.dumps({"error": message}).encode(), {"X-Error-Message": message, "Content-Type": "application/json"})

    def send_file(self, data, mode, headers, truncate):
        rng = self.headers.get("Range")
        start, end = 0, len(data) - 1
        status = 200
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if m and mode != "norange":
            start = int(m.group(1))
            if m.group(2):
                end = min(end, int(m.group(2)))
            if start >= len(data):
                self.reply(416, b"", {"Content-Range": "bytes */%d" % len(data)}, rng)
                return
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, len(data))
        body = data[start:end + 1]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if truncate:  # promise the whole body, send a third, hang up
            body = body[: max(1, len(body) // 3)]
            self.close_connection = True
        self.wfile.write(body)
        self.wfile.flush()
        self.note(status, len(body), rng)

    def do_GET(self):
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        # /api/models/{owner}/{name}/revision/{rev}
        if len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] == "revision":
            owner, name, rev = parts[2], parts[3], parts[5]
            if not self.allowed(owner, name):
                return
            if rev not in ("main", COMMIT):
                return self.error(404, "Invalid rev id: %s" % rev)
            if "blobs=true" not in url.query:
                return self.error(400, "this fake hub answers only blobs=true listings")
            body = {"id": owner + "/" + name, "sha": COMMIT, "siblings": self.repo.siblings(name)}
            return self.reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        # /{owner}/{name}/resolve/{rev}/{path...}
        if len(parts) >= 5 and parts[2] == "resolve":
            owner, name, rev, path = parts[0], parts[1], parts[3], "/".join(parts[4:])
            if not self.allowed(owner, name):
                return
            if rev != COMMIT and rev != "main":
                return self.error(404, "Revision not found")
            data = self.repo.files.get(path)
            if data is None or (name == "missing" and path == "generation_config.json"):
                return self.error(404, "Entry not found")
            headers = {"X-Repo-Commit": COMMIT}
            if path.endswith(".safetensors"):
                sha = hashlib.sha256(data).hexdigest()
                headers.update({"X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)), "ETag": '"%s"' % sha,
                                "Location": "/cdn/%s/%s/%s" % (owner, name, path)})
                return self.reply(302, b"", headers)
            headers["ETag"] = '"%s"' % git_blob_sha1(data)
            return self.send_file(data, name, headers, False)
        # /cdn/{owner}/{name}/{path}: the LFS object store
        if len(parts) == 4 and parts[0] == "cdn":
            owner, name, path = parts[1], parts[2], parts[3]
            data = self.repo.files.get(path)
            if data is None or name not in MODES:
                return self.error(404, "no such object")
            if name == "tampered":
                data = data[:100] + bytes([data[100] ^ 0x5A]) + data[101:]
            return self.send_file(data, name, {"ETag": '"%s"' % hashlib.sha256(data).hexdigest()}, name == "truncated")
        return self.error(404, "Repository not found")

    def allowed(self, owner, name):
        if owner != "test" or name not in MODES:
            self.error(404, "Repository not found")
            return False
        if name == "private" and self.headers.get("Authorization") != "Bearer secret":
            self.error(401, "Invalid credentials in Authorization header")
            return False
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=120)
    a = ap.parse_args()
    Handler.repo = Repo(a.root)
    Handler.log_path = a.log
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Timer(a.lifetime, srv.shutdown).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
