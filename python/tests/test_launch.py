"""kvsim launch: programs as simulated host processes, their output, status, determinism,
isolation, stalls and limits, and bad usage."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "launch")


def launch(*args, timeout=120, env=None, cwd=None):
    """Runs `python -m kvsim.launch args`; returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kvsim.launch", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd)


def program(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_output_is_prefixed_and_the_status_is_the_worst(tmp_path):
    ok = program(tmp_path, "ok.py", "print('hello from', __name__)\n")
    bad = program(tmp_path, "bad.py", "import sys\nprint('about to fail')\nsys.exit(3)\n")
    done = launch("--names", "good,bad", "--", "python3", ok, ":::", "python3", "-u", bad)
    assert done.returncode == 3, done.stderr
    assert "[good] hello from __main__\n" in done.stdout
    assert "[bad] about to fail\n" in done.stdout
    assert "good (node 0) exited 0" in done.stderr
    assert "bad (node 1) exited 3" in done.stderr


def test_a_programs_exception_ends_only_that_program(tmp_path):
    crash = program(tmp_path, "crash.py", "raise ValueError('broken')\n")
    fine = program(tmp_path, "fine.py", "import time\ntime.sleep(2)\nprint('still here')\n")
    done = launch("--", "python3", crash, ":::", "python3", fine)
    assert done.returncode == 1
    assert "[p0] ValueError: broken" in done.stdout + done.stderr
    assert "[p1] still here" in done.stdout
    assert "p1 (node 1) exited 0 at t=2.000000 s" in done.stderr


def test_clocks_sleeps_pids_and_random_bytes_replay_bit_for_bit(tmp_path):
    source = """
        import datetime, os, random, time
        t0, p0 = time.time(), time.perf_counter()
        time.sleep(0.25)
        print(os.getpid(), time.time() - t0, time.perf_counter() - p0)
        print(datetime.datetime.now().isoformat())
        print(os.urandom(8).hex(), random.random(), sorted({'x', 'y', 'z'}) and list({'a', 'b', 'c'}))
    """
    a = program(tmp_path, "clock.py", source)
    runs = [launch("--", "python3", a, ":::", "python3", a) for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr
    assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)
    lines = runs[0].stdout.splitlines()
    # time.time() is a double near 1.7e9 s, so a difference of 0.25 s comes out as CPython on
    # hardware gives it; perf_counter starts near 0 and keeps it exact.
    assert lines[0] == "[p0] 4000 0.2499997615814209 0.25"
    assert lines[1] == "[p0] 2025-01-01T00:00:00.250000"
    # Each process has its own pid and random bytes.
    assert "[p1] 4001 0.2499997615814209 0.25" in lines
    p0_bytes = [line for line in lines if line.startswith("[p0]")][2].split()[1]
    p1_bytes = [line for line in lines if line.startswith("[p1]")][2].split()[1]
    assert p0_bytes != p1_bytes


def test_an_instants_lines_come_out_program_by_program(tmp_path):
    """At t=0 p1 prints at once and p0 only after four socket calls, each a barrier of the world:
    how many barriers a program passes within one instant must not order the output, so p0's
    line of that instant comes first all the same (a replay once swapped two such lines)."""
    late = program(tmp_path, "late.py", """
        import socket, time
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        s.close()
        print("p0 at t=0", flush=True)
        time.sleep(1)
    """)
    early = program(tmp_path, "early.py", """
        import time
        print("p1 at t=0", flush=True)
        time.sleep(1)
    """)
    done = launch("--", "python3", late, ":::", "python3", early)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["[p0] p0 at t=0", "[p1] p1 at t=0"], done.stdout


def test_wall_clock_flag_reads_the_hosts_clock(tmp_path):
    a = program(tmp_path, "wall.py", "import time\nprint(time.time() > 1.75e9)\n")
    done = launch("--wall-clock", "--", "python3", a)
    assert done.returncode == 0 and "[p0] True" in done.stdout, done.stderr
    done = launch("--", "python3", a)
    assert "[p0] False" in done.stdout


def test_programs_run_in_an_isolated_network_namespace(tmp_path):
    source = """
        import socket
        print(socket.if_nameindex())
        s = socket.socket()
        s.bind(("10.20.30.1", 0))      # the simulated host's address is on loopback
        print("bound")
        c = socket.socket()
        c.settimeout(2)
        try:
            c.connect(("10.20.30.2", 26000))  # the other simulated host: nobody listens
        except OSError as e:
            print("refused", e.errno)
        try:
            socket.create_connection(("8.8.8.8", 53), timeout=2)
        except OSError as e:
            print("unreachable", e.errno)
    """
    a = program(tmp_path, "net.py", source)
    done = launch("--hosts", "10.20.30.1,10.20.30.2", "--", "python3", a, ":::", "python3", "-c",
                  "pass")
    assert done.returncode == 0, done.stderr
    assert "[p0] [(1, 'lo')]" in done.stdout
    assert "[p0] bound" in done.stdout
    assert "[p0] refused 111" in done.stdout       # ECONNREFUSED: the address is local
    assert "[p0] unreachable 101" in done.stdout   # ENETUNREACH: no route out


def test_a_stalled_launch_reports_who_waits_on_what(tmp_path):
    a = program(tmp_path, "stuck.py", """
        import threading
        print("waiting")
        never = threading.Event()
        threading.Thread(target=never.wait, name="helper").start()
        never.wait()
    """)
    b = program(tmp_path, "quick.py", "print('done')\n")
    done = launch("--names", "stuck,quick", "--", "python3", a, ":::", "python3", b)
    assert done.returncode == 124
    text = done.stdout + done.stderr
    assert "every program left waits for something that cannot happen" in done.stderr
    # Both of its threads, and what each waits on.
    assert re.search(r"\[stuck\] waits for thread 0: .*since t=.*; thread 1: ", done.stderr), text
    # Each thread's Python stack, down to the program's own line.
    assert "[stuck]   File \"" + a + "\", line 6 in <module>" in text
    assert "in wait" in text
    assert "stuck (node 0) did not end" in done.stderr
    assert "quick (node 1) exited 0" in done.stderr
    # The report replays to the byte, thread and lock addresses included (no ASLR).
    assert re.search(r"\[stuck\] Thread 0x[0-9a-f]+ ", text), text
    again = launch("--names", "stuck,quick", "--", "python3", a, ":::", "python3", b)
    assert (again.stdout, again.stderr) == (done.stdout, done.stderr)


def test_the_wall_clock_limit_ends_a_program_that_never_waits(tmp_path):
    a = program(tmp_path, "spin.py", "while True:\n    pass\n")
    done = launch("--timeout", "2", "--", "python3", a, timeout=60)
    assert done.returncode == 124
    assert "the wall-clock limit of 2.000000 s passed" in done.stderr
    assert "[p0] waits for nothing kvsim knows of (it runs outside any kvsim call)" in done.stderr
    # where the loop was when the signal came: its `while` or its `pass`
    assert re.search(rf"\[p0\]   File \"{re.escape(a)}\", line [12] in <module>",
                     done.stdout + done.stderr), done.stdout + done.stderr


def test_modules_of_the_programs_directory_are_per_process(tmp_path):
    program(tmp_path, "counter.py", "hits = []\n")
    a = program(tmp_path, "uses.py", """
        import sys, time
        import counter
        counter.hits.append(sys.argv[1])
        time.sleep(1)
        print(counter.hits)
    """)
    done = launch("--", "python3", a, "first", ":::", "python3", a, "second")
    assert done.returncode == 0, done.stderr
    assert "[p0] ['first']" in done.stdout
    assert "[p1] ['second']" in done.stdout


def test_the_environment_devices_and_ascend_tools_of_a_process(tmp_path):
    a = program(tmp_path, "env.py", """
        import os, subprocess
        import torch
        davinci = sorted(d for d in os.listdir("/dev") if d.startswith("davinci"))
        print(os.environ["ROLE"], torch.npu.device_count(), davinci[:3])
        out = subprocess.run(["hccn_tool", "-i", "1", "-ip", "-g"], capture_output=True, text=True)
        print(out.stdout.splitlines()[0])
    """)
    done = launch("--device-ips", "0=192.168.7.1", "--nodes", "1", "--", "ROLE=prompt",
                  "ASCEND_RT_VISIBLE_DEVICES=2,3", "python3", a, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[p0] prompt 2 ['davinci0', 'davinci1', 'davinci2']" in done.stdout
    assert "[p0] ipaddr:192.168.7.2" in done.stdout


def test_one_llmdatadist_per_launched_process(tmp_path):
    a = program(tmp_path, "two.py", """
        from llm_datadist import LLMConfig, LLMDataDist, LLMException, LLMRole
        cfg = LLMConfig()
        cfg.device_id = 0
        cfg.enable_cache_manager = True
        LLMDataDist(LLMRole.DECODER, 1).init(cfg.generate_options())
        try:
            LLMDataDist(LLMRole.DECODER, 2).init(cfg.generate_options())
        except LLMException as e:
            print(e.status_code.name, e)
    """)
    done = launch("--", "python3", a)
    assert done.returncode == 0, done.stderr
    assert "[p0] LLM_FAILED" in done.stdout and "Cannot init multiple LLMDataDists" in done.stdout


def test_a_launch_file(tmp_path):
    a = program(tmp_path, "who.py", """
        import os, socket, sys
        print(sys.argv[1:], os.environ["GREETING"], socket.gethostname() != "")
    """)
    (tmp_path / "launch.yaml").write_text(textwrap.dedent("""
        preset: atlas-a2
        set: {scale_out.bandwidth: 400Gb/s}
        nodes:
          - host_ip: 10.1.1.1
            device_ips: 192.168.10.1
          - host_ip: 10.1.1.2
            device_ips: 192.168.20.1
        processes:
          - name: prompt
            node: 1
            command: python3 who.py --role p
            env: {GREETING: hi}
          - name: decoder
            command: [python3, who.py, --role, d]
            env: {GREETING: hello}
    """))
    done = launch("-f", str(tmp_path / "launch.yaml"))
    assert done.returncode == 0, done.stderr
    assert "[prompt] ['--role', 'p'] hi True" in done.stdout
    assert "[decoder] ['--role', 'd'] hello True" in done.stdout
    assert "prompt (node 1)" in done.stderr and "decoder (node 1)" in done.stderr


def test_hosts_on_10_0_0_x_do_not_collide_with_default_device_addresses(tmp_path):
    # atlas-a2's devices default to 10.0.0.(d+1), and 10.0.0.x hosts are common.
    show = program(tmp_path, "show.py", "import socket\nprint(socket.gethostbyname(socket.gethostname()))\n")
    done = launch("--hosts", "10.0.0.1,10.0.0.2", "--", "python3", show, ":::", "python3", show)
    assert done.returncode == 0, done.stderr
    clash = launch("--hosts", "10.0.0.1", "--device-ips", "0=10.0.0.1", "--", "python3", show)
    assert clash.returncode == 2
    assert "--hosts and --device-ips" in clash.stderr and "must all differ" in clash.stderr


@pytest.mark.parametrize("args, message", [
    ([], "no commands"),
    (["--", "no-such-program-kvsim", "-l"], "'no-such-program-kvsim' is not a program"),
    (["--hosts", "10.0.0.1", "--", "python3", "-c", "1", ":::", "python3", "-c", "2"],
     "--hosts: 1 addresses for 2 nodes"),
    (["--hosts", "10.0.0.300", "--", "python3", "-c", "1"], "'10.0.0.300' is not an IPv4"),
    (["--", "python3", "-c", "1", ":::"], "an empty command"),
    (["--set", "scale_out.bandwith=1Gb/s", "--", "python3", "-c", "1"], "scale_out.bandwith"),
    (["--", "ASCEND_RT_VISIBLE_DEVICES=9", "python3", "-c", "1"],
     "'9' is not a device of its node"),
])
def test_bad_usage_is_status_2_with_a_clear_message(args, message):
    done = launch(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_a_bad_launch_file_names_file_line_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("preset: atlas-a2\nprocesses:\n  - name: a\n    comand: python3 x.py\n")
    done = launch("-f", str(path))
    assert done.returncode == 2
    assert f"{path}:4: processes[0].comand: unknown key" in done.stderr


def test_memory_is_freed_after_another_program_ended(tmp_path):
    """weakref.finalize's exit hook, first registered by a hosted program, stays the
    interpreter's: a program that ends must not switch off the finalizers that free the others'
    NPU tensors."""
    first = program(tmp_path, "first.py", """
        import weakref
        weakref.finalize(type("X", (), {})(), print, "first finalizer")
    """)
    second = program(tmp_path, "second.py", """
        import time, torch, kvsim
        time.sleep(1)
        t = torch.zeros(1 << 20, dtype=torch.int8).npu()
        held = kvsim.current_world().inventory()["memory_bytes"][8]
        del t
        print("held", held, "after", kvsim.current_world().inventory()["memory_bytes"][8])
    """)
    done = launch("--", "python3", first, ":::", "python3", second)
    assert done.returncode == 0, done.stderr
    assert "[p1] held 1048576 after 0" in done.stdout


def test_names_pids_ipv6_sockets_pipes_and_epoll_between_threads(tmp_path):
    """What c10d and gloo need of a host, each seen by a launched Python program: host names that
    resolve to the simulated hosts, the launch's pid, an AF_INET6 server reached over an
    IPv4-mapped address, a pipe and an epoll set that another thread writes or fills."""
    server = program(tmp_path, "server.py", """
        import os, select, socket, threading, time
        print(socket.gethostname(), os.getpid(), socket.gethostbyname("node1"))
        s = socket.socket(socket.AF_INET6)
        s.bind(("::", 29999))
        s.listen()
        conn, peer = s.accept()
        print("accepted from", peer[0], conn.recv(5))
        r, w = os.pipe()  # a thread blocked reading an empty pipe until another writes it
        threading.Thread(target=lambda: (time.sleep(0.5), os.write(w, b"x"))).start()
        print("pipe", os.read(r, 1), round(time.monotonic(), 3))
        ep = select.epoll()  # empty when the wait starts: another thread adds the socket
        threading.Thread(target=lambda: (time.sleep(0.25), ep.register(conn, select.EPOLLIN))).start()
        conn.sendall(b"go")
        print("epoll", ep.poll(5.0), round(time.monotonic(), 3))
    """)
    client = program(tmp_path, "client.py", """
        import socket, time
        time.sleep(0.1)
        infos = socket.getaddrinfo("node0", 29999, type=socket.SOCK_STREAM)
        print([(family.name, addr) for family, _, _, _, addr in infos])
        c = socket.create_connection(("node0", 29999))
        c.sendall(b"hello")
        print("got", c.recv(2))
        c.sendall(b"!")
        time.sleep(1)
        try:
            socket.gethostbyname("ntp.ubuntu.com")
        except OSError as e:
            print("no such host:", type(e).__name__)
    """)
    runs = [launch("--hosts", "10.20.0.1,10.20.0.2", "--", "python3", server, ":::", "python3",
                   client) for _ in range(2)]
    done = runs[0]
    assert done.returncode == 0, done.stdout + done.stderr
    assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)
    out = done.stdout
    assert "[p0] node0 4000 10.20.0.2" in out
    assert "[p1] [('AF_INET', ('10.20.0.1', 29999))]" in out
    assert "[p0] accepted from ::ffff:10.20.0.2 b'hello'" in out
    assert re.search(r"\[p0\] pipe b'x' 0\.6\d*\n", out), out
    assert "[p1] got b'go'" in out
    assert re.search(r"\[p0\] epoll \[\(\d+, 1\)\] 0\.85\d*\n", out), out
    assert "[p1] no such host: gaierror" in out


def test_the_time_stamp_counter_reads_simulated_time(tmp_path):
    """rdtsc is trapped and answered in simulated time (one tick per ns), also in a thread that
    blocks every signal (as libzmq's do); a real fault still reaches the program's handler."""
    a = program(tmp_path, "tsc.py", """
        import ctypes, faulthandler, mmap, signal, sys, threading, time
        faulthandler.enable()
        # rdtsc; shl rdx, 32; or rax, rdx; ret
        code = bytes([0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, 0xc3])
        buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(code)
        rdtsc = ctypes.CFUNCTYPE(ctypes.c_uint64)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        a = rdtsc()
        time.sleep(0.25)
        print("main", rdtsc() - a)
        def blocked():
            signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))
            b = rdtsc()
            time.sleep(0.5)
            print("blocked", rdtsc() - b)
        t = threading.Thread(target=blocked)
        t.start()
        t.join()
        if sys.argv[1:] == ["fault"]:
            ctypes.string_at(0)
    """)
    done = launch("--", "python3", a, ":::", "python3", a, "fault")
    assert "[p0] main 250000000" in done.stdout and "[p0] blocked 500000000" in done.stdout
    assert "p0 (node 0) exited 0" in done.stderr
    assert "[p1] Fatal Python error: Segmentation fault" in done.stdout + done.stderr
    # Killed by the signal; under the sanitizer pass ASan's handler runs after faulthandler's and
    # aborts (abort_on_error=1), exit 134.
    ended = ["p1 (node 1) exited -11", "p1 (node 1) exited 139"]
    if "AddressSanitizer: SEGV" in done.stdout + done.stderr:
        ended.append("p1 (node 1) exited 134")
    assert any(e in done.stderr for e in ended), done.stderr
