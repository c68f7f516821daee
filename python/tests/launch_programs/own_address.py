"""How serving engines find their own address (vLLM's get_ip: a UDP socket connected to a public
address, then getsockname), and what a datagram gets: EOPNOTSUPP, said once on stderr
(test_launch_messaging.py)."""
import errno
import socket

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("8.8.8.8", 80))  # nothing is sent
print("get_ip", s.getsockname()[0], s.getpeername())
try:
    s.send(b"x")
except OSError as e:
    print("send", errno.errorcode[e.errno])
s.close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5555))
print("bound", s.getsockname())
try:
    s.recvfrom(10)
except OSError as e:
    print("recvfrom", errno.errorcode[e.errno])
try:
    s.bind(("192.0.2.7", 1))
except OSError as e:
    print("bind elsewhere", errno.errorcode[e.errno])
v6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
try:
    v6.connect(("2001:4860:4860::8888", 80))
except OSError as e:
    print("ipv6", errno.errorcode[e.errno])
