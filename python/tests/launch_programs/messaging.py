"""What engines build their side channels on, between two launched processes: ZeroMQ REQ/REP,
PUSH/PULL and PUB/SUB over tcp:// (Debian's python3-zmq), and asyncio streams
(test_launch_messaging.py). Run as `messaging.py a|b MY_HOST PEER_HOST`."""
import sys, time, zmq, asyncio
role, me, peer = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = zmq.Context.instance()
if role == "a":
    rep = ctx.socket(zmq.REP); rep.bind(f"tcp://{me}:6001")
    pull = ctx.socket(zmq.PULL); pull.bind(f"tcp://{me}:6002")
    pub = ctx.socket(zmq.PUB); pub.bind(f"tcp://{me}:6003")
    print("req:", rep.recv()); rep.send(b"pong")
    print("pull:", [pull.recv() for _ in range(3)])
    time.sleep(0.5)  # slow joiner: the subscriber connects first
    for i in range(3):
        pub.send_multipart([b"topic", b"m%d" % i])
    async def serve():
        async def handle(r, w):
            line = await r.readline(); w.write(b"echo " + line); await w.drain(); w.close()
        srv = await asyncio.start_server(handle, me, 6004)
        async with srv:
            await asyncio.sleep(1.0)
    asyncio.run(serve())
else:
    req = ctx.socket(zmq.REQ); req.connect(f"tcp://{peer}:6001")
    push = ctx.socket(zmq.PUSH); push.connect(f"tcp://{peer}:6002")
    sub = ctx.socket(zmq.SUB); sub.connect(f"tcp://{peer}:6003"); sub.setsockopt(zmq.SUBSCRIBE, b"topic")
    req.send(b"ping"); print("rep:", req.recv())
    for i in range(3): push.send(b"p%d" % i)
    print("sub:", [sub.recv_multipart()[1] for _ in range(3)])
    async def client():
        await asyncio.sleep(0.2)
        r, w = await asyncio.open_connection(peer, 6004)
        w.write(b"hello\n"); await w.drain()
        print("stream:", await r.readline()); w.close(); await w.wait_closed()
    asyncio.run(client())
