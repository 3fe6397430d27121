"""What a hostile session costs the daemon through its egress proxy: descriptors and memory.

Run from the repository root: ``.venv/bin/python bench/egress_attack.py [--tunnels N]
[--hosts N] [--max-tunnels N]``.

The proxy serves in this process, as in the daemon. A hostile client in a process of its own (the
system's python3, straight on the proxy's socket: the socat bridge inside a sandbox adds only
its own processes) first opens ``--tunnels`` CONNECT tunnels at once to a silent upstream
(another process) and keeps them open, then tries ``--hosts`` refused hosts, eight at a time.
Meanwhile this process's open descriptors (/proc/self/fd) and resident memory (VmRSS) are
sampled every few milliseconds. It prints the baseline, the peak during each phase, what is
left after, the proxy's remembered hosts, and the refusals per second. Figures, not
assertions: tests/contract/test_egress_bounds.py asserts the bounds on counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from thirdshift.harnesses.egress import MAX_TUNNELS, EgressProxy
from thirdshift.network import EgressAllowlist

CLIENT = r"""
import json, resource, socket, sys, threading, time
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
if sys.argv[1] == "hold":
    server = socket.create_server(("127.0.0.1", 0), backlog=4096)
    print(server.getsockname()[1], flush=True)
    def hold(connection):
        while connection.recv(65536):
            pass
        connection.close()
    while True:
        threading.Thread(target=hold, args=(server.accept()[0],), daemon=True).start()
path, port, tunnels, hosts = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def ask(request):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(30)
    try:
        s.sendall(request)
    except OSError:
        pass
    return s
def status(s):
    answer = b""
    while b"\r\n" not in answer:
        try:
            chunk = s.recv(4096)
        except OSError:
            return "reset"
        if not chunk:
            return "closed"
        answer += chunk
    return answer.split(b" ")[1].decode()
def count(codes):
    found = {}
    for code in codes:
        found[code] = found.get(code, 0) + 1
    return found
started = time.perf_counter()
opened = [ask(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()) for _ in range(tunnels)]
answers = count(status(s) for s in opened)
print(json.dumps({"tunnels": answers, "seconds": time.perf_counter() - started}), flush=True)
sys.stdin.readline()
for s in opened:
    s.close()
print("closed", flush=True)
sys.stdin.readline()
codes = []
def refuse(first):
    for n in range(first, hosts, 8):
        s = ask(f"CONNECT host-{n}.example.net:443 HTTP/1.1\r\n\r\n".encode())
        codes.append(status(s))
        s.close()
started = time.perf_counter()
threads = [threading.Thread(target=refuse, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"refused": count(codes), "seconds": time.perf_counter() - started}), flush=True)
"""


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _resident_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class _Sampler:
    """The peak of descriptors and resident memory since the last ``peak()``."""

    def __init__(self) -> None:
        self._most = (_descriptors(), _resident_kb())
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            now = (_descriptors(), _resident_kb())
            with self._lock:
                self._most = (max(self._most[0], now[0]), max(self._most[1], now[1]))

    def peak(self) -> tuple[int, int]:
        with self._lock:
            most, self._most = self._most, (_descriptors(), _resident_kb())
        return most

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tunnels", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--max-tunnels", type=int, default=MAX_TUNNELS)
    options = parser.parse_args()
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        raise SystemExit("the system's python3 is needed (it plays the hostile session)")
    holder = subprocess.Popen([python, "-c", CLIENT, "hold"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    port = holder.stdout.readline().strip()
    allowlist = EgressAllowlist.of([f"127.0.0.1:{port}"])
    rows: list[tuple[str, int, int]] = []
    try:
        with EgressProxy(allowlist, max_tunnels=options.max_tunnels) as proxy:
            attacker = subprocess.Popen(
                [
                    *(python, "-c", CLIENT, "attack", str(proxy.socket_path), port),
                    *(str(options.tunnels), str(options.hosts)),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert attacker.stdin is not None
            assert attacker.stdout is not None
            rows.append(("baseline", _descriptors(), _resident_kb()))
            sampler = _Sampler()
            tunnels = json.loads(attacker.stdout.readline())
            rows.append((f"{options.tunnels} tunnels, all held", *sampler.peak()))
            attacker.stdin.write("\n")
            attacker.stdin.flush()
            attacker.stdout.readline()
            while proxy.open_connections:
                time.sleep(0.05)
            sampler.peak()  # the refusals' own peak from here
            attacker.stdin.write("\n")
            attacker.stdin.flush()
            refused = json.loads(attacker.stdout.readline())
            rows.append((f"{options.hosts} refused hosts", *sampler.peak()))
            attacker.wait(60)
            sampler.stop()
            rows.append(("after", _descriptors(), _resident_kb()))
            remembered = proxy.remembered_hosts
    finally:
        holder.kill()
        holder.wait(10)
    print(f"max_tunnels {options.max_tunnels}; tunnels answered {tunnels['tunnels']}")
    print(f"refusals {refused['refused']}, {options.hosts / refused['seconds']:,.0f} a second")
    print(f"remembered hosts {remembered}")
    print(f"{'phase':<28} {'descriptors':>12} {'resident':>12}")
    for label, descriptors, resident in rows:
        print(f"{label:<28} {descriptors:>12} {resident / 1024:>10.1f}MB")


if __name__ == "__main__":
    main()
