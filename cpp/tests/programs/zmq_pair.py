"""A P/D pair over ZeroMQ (Debian's python3-zmq and libzmq), as serving engines' KV connectors
report "finished" requests: the prefill side's ROUTER is served by a thread and acknowledges each
report; the decode side's DEALER sends one report every 10 ms and waits for its ack. Both close
their sockets and terminate their contexts, so no queued message is lost at exit. libzmq's I/O
and reaper threads wait in epoll on eventfds and TCP sockets: under kvsim launch, in simulated
time (launch_programs_test.py).

usage: zmq_pair.py prefill|decode PREFILL_HOST
"""
import sys
import threading
import time

import zmq

REPORTS = 3
T0 = time.monotonic()


def ms():
    return f"{(time.monotonic() - T0) * 1000:.3f} ms"


def main(role, host):
    ctx = zmq.Context()
    if role == "prefill":
        router = ctx.socket(zmq.ROUTER)
        router.bind(f"tcp://{host}:5570")
        done = threading.Event()

        def serve():
            for _ in range(REPORTS):
                ident, msg = router.recv_multipart()
                router.send_multipart([ident, b"ack " + msg])
            done.set()

        threading.Thread(target=serve, daemon=True).start()
        print("served all:", done.wait(10), ms())
        router.close(linger=1000)  # the last ack still goes out
    else:
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(f"tcp://{host}:5570")
        for i in range(REPORTS):
            time.sleep(0.01)
            dealer.send(f"finished {i}".encode())
            print(dealer.recv().decode(), ms())
        dealer.close()
    ctx.term()
    print(role, "done", ms())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
