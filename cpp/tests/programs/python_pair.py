"""A P/D pair in the shape of a serving engine's KV connector worker, without llm_datadist: the
prefill side serves metadata from a daemon listener thread and counts "finished" reports under a
lock; the decode side waits on an Event, runs its pulls on a ThreadPoolExecutor(1) and reports
each over its own connection; an asyncio client asks the listener for a summary. Run as an OS
process under kvsim launch (launch_programs_test.py), every wait is in simulated time.

usage: python_pair.py prefill|decode MY_HOST PREFILL_HOST
"""
import asyncio
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

PORT = 5569
REQUESTS = 4
T0 = time.monotonic()


def ms():
    return f"{(time.monotonic() - T0) * 1000:.3f} ms"


def prefill(host):
    finished = []
    lock = threading.Lock()
    all_done = threading.Event()
    ready = threading.Event()

    def serve(conn):
        with conn:
            line = conn.makefile().readline().strip()
            if line == "metadata":
                conn.sendall(b"blocks=128 layers=80\n")
            elif line.startswith("finished"):
                with lock:
                    finished.append(int(line.split()[1]))
                    if len(finished) == REQUESTS:
                        all_done.set()
                conn.sendall(b"ok\n")
            elif line == "summary":
                with lock:
                    conn.sendall(f"finished {sorted(finished)}\n".encode())

    def listener():
        srv = socket.socket()
        srv.bind((host, PORT))
        srv.listen()
        ready.set()
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=listener, daemon=True, name="listener").start()
    print("listening:", ready.wait(5), ms())
    print("all finished:", all_done.wait(10), ms())
    time.sleep(0.1)  # the decode side's summary request
    print("prefill done", ms())


def ask(host, line):
    with socket.create_connection((host, PORT), timeout=5) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def decode(host, prefill_host):
    linked = threading.Event()
    meta = {}

    def link():
        for _ in range(50):  # the prefill side may not listen yet
            try:
                meta["v"] = ask(prefill_host, "metadata")
                break
            except ConnectionRefusedError:
                time.sleep(0.01)
        linked.set()

    threading.Thread(target=link, daemon=True).start()
    print("linked:", linked.wait(5), meta.get("v"), ms())

    def pull(req):
        time.sleep(0.005 * (req + 1))  # the transfer's time
        return req, ask(prefill_host, f"finished {req}")

    with ThreadPoolExecutor(1) as pool:
        for req, answer in pool.map(pull, range(REQUESTS)):
            print(f"pulled {req}: {answer}", ms())

    async def summary():
        reader, writer = await asyncio.open_connection(prefill_host, PORT)
        writer.write(b"summary\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        await writer.wait_closed()
        return line.decode().strip()

    print("asyncio:", asyncio.run(summary()), ms())


if __name__ == "__main__":
    role, me, prefill_host = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "prefill":
        prefill(me)
    else:
        decode(me, prefill_host)
