"""ZeroMQ's REQ/REP, PUSH/PULL and PUB/SUB and asyncio streams between two launched Python
processes, in simulated time, replayed bit for bit (issue 28 item 2: what engines build their
side channels on). ROUTER/DEALER runs in the connector example (test_launch_connector.py)."""
import os
import re
import subprocess
import sys

PROGRAM = os.path.join(os.path.dirname(__file__), "launch_programs", "messaging.py")


def launch():
    args = ["--timeout", "100", "--hosts", "10.70.0.1,10.70.0.2", "--",
            "python3", PROGRAM, "a", "10.70.0.1", "10.70.0.2", ":::",
            "python3", PROGRAM, "b", "10.70.0.2", "10.70.0.1"]
    return subprocess.run([sys.executable, "-m", "kvsim.launch", *args], capture_output=True,
                          text=True, timeout=300)


def test_zmq_patterns_and_asyncio_streams_between_processes():
    done = launch()
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "[p0] req: b'ping'" in out and "[p1] rep: b'pong'" in out          # REQ/REP
    assert "[p0] pull: [b'p0', b'p1', b'p2']" in out                          # PUSH/PULL
    assert "[p1] sub: [b'm0', b'm1', b'm2']" in out                           # PUB/SUB
    assert "[p1] stream: b'echo hello\\n'" in out                             # asyncio streams
    # Simulated time: at least the publisher's 0.5 s and the server's 1 s, not the host's.
    ended = float(re.search(r"p0 \(node 0\) exited 0 at t=([0-9.]+) s", done.stderr).group(1))
    assert 1.5 <= ended < 3, done.stderr
    # libzmq's timers read the TSC (trapped and answered in simulated time: a real counter made
    # its reconnect timers, hence these times, vary from run to run).
    for _ in range(2):
        again = launch()
        assert (again.stdout, again.stderr) == (done.stdout, done.stderr)


def test_udp_sockets_give_the_simulated_hosts_address_and_refuse_datagrams():
    """vLLM's get_ip (a UDP socket connected to 8.8.8.8, then getsockname) gives the program's
    simulated host; a datagram fails with EOPNOTSUPP and one line on stderr naming the call,
    rather than leaving the world or waiting in real time."""
    program = os.path.join(os.path.dirname(__file__), "launch_programs", "own_address.py")
    done = subprocess.run([sys.executable, "-m", "kvsim.launch", "--timeout", "60", "--hosts",
                           "10.1.0.5", "--", "python3", program],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout.splitlines()
    assert out == ["[p0] get_ip 10.1.0.5 ('8.8.8.8', 80)", "[p0] send ENOTSUP",
                   "[p0] bound ('0.0.0.0', 5555)", "[p0] recvfrom ENOTSUP",
                   "[p0] bind elsewhere EADDRNOTAVAIL", "[p0] ipv6 ENETUNREACH"], out
    said = [x for x in done.stderr.splitlines() if "UDP socket" in x]
    assert said == ["[p0] kvsim launch: send on a UDP socket: datagrams are not simulated "
                    "(connect, bind and getsockname are); the call fails with EOPNOTSUPP"]
