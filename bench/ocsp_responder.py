#!/usr/bin/env python3
"""An OCSP responder for the bench: answers every POST on 127.0.0.1:PORT with one DER response
(made by `openssl ocsp`) and keeps the number of requests answered in COUNT_FILE.

    bench/ocsp_responder.py PORT RESPONSE.der COUNT_FILE
"""
import http.server
import sys
import threading

port, response_path, count_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = open(response_path, "rb").read()
lock = threading.Lock()
count = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_POST(self):
        global count
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/ocsp-response")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with lock:
            count += 1
            with open(count_path, "w") as out:
                out.write(f"{count}\n")

    def log_message(self, *args):
        pass


open(count_path, "w").write("0\n")
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()
