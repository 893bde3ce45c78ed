#!/usr/bin/env python3
"""probe.py ADDR TOKEN ROUNDS TIMEOUT_S PATH...: the latency of each PATH, as a load balancer or a
dashboard sees it under load. Each round sends every PATH once, in turn, each on its own
keep-alive connection (a new one after an error), and times the answer; an answer that does
not come within TIMEOUT_S counts as TIMEOUT_S. Prints one line per path: p50, p99, max (ms) and
the failures. Plain HTTP on loopback, as the load runs in bench/ serve."""
import http.client
import sys
import time


def main():
    if len(sys.argv) < 6:
        sys.exit("usage: probe.py ADDR TOKEN ROUNDS TIMEOUT_S PATH...")
    addr, token, rounds, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    paths = sys.argv[5:]
    host, port = addr.rsplit(":", 1)
    conns = {p: None for p in paths}
    took = {p: [] for p in paths}
    failed = {p: 0 for p in paths}
    headers = {"Authorization": "Bearer " + token, "Accept-Encoding": "gzip"}
    for _ in range(rounds):
        for p in paths:
            start = time.monotonic()
            try:
                if conns[p] is None:
                    conns[p] = http.client.HTTPConnection(host, int(port), timeout=timeout)
                conns[p].request("GET", p, headers=headers)
                reply = conns[p].getresponse()
                reply.read()
                if reply.status >= 300:
                    failed[p] += 1
            except Exception:  # a timeout or a reset: counted, and a new connection next time
                failed[p] += 1
                conns[p].close()
                conns[p] = None
            took[p].append(min(time.monotonic() - start, timeout) * 1000)
    for p in paths:
        ms = sorted(took[p])
        pct = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
        print(f"{p}: p50_ms={pct(0.5):.1f} p99_ms={pct(0.99):.1f} max_ms={ms[-1]:.1f} "
              f"requests={len(ms)} failed={failed[p]}")


main()
