"""Launch files are parsed in Python (kvsim.launch.spec), so they are fuzzed here rather than by
libFuzzer (fuzz/): mutated launch files may fail only with LaunchError, which `kvsim launch`
reports as file, line and key with exit 2."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsim.launch.spec import LaunchError, load_file

SEED = """\
preset: atlas-a2
set: {scale_out.bandwidth: 200Gb/s}
seed: 7
timeout: 30
wall_clock: false
nodes:
  - host_ip: 10.1.1.1
    device_ips: 192.168.10.1
  - host_ip: 10.1.1.2
    device_ips: [192.168.20.1, 192.168.20.2, 192.168.20.3, 192.168.20.4,
                 192.168.20.5, 192.168.20.6, 192.168.20.7, 192.168.20.8]
processes:
  - name: prompt
    node: 1
    command: python3 who.py --role p
    env: {GREETING: hi}
    cwd: .
  - name: decoder
    command: [python3, who.py, --role, d]
"""
TOKENS = ["\n", " ", "  ", "- ", ": ", "{", "}", "[", "]", ",", "&a ", "*a", "!!binary ", "~",
          "null", "-1", "1e400", "99999999999999999999", "nodes", "processes", "command",
          "device_ips", "host_ip", "node", "env", "set", "'", '"', "\t", "\x00", "é", "::: "]


@st.composite
def mutated(draw):
    text = SEED
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.integers(0, 2))
        if kind == 0:
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif kind == 1:
            end = min(len(text), at + draw(st.integers(1, 20)))
            text = text[:at] + text[end:]
        else:
            text = text[:at] + draw(st.text(max_size=6)) + text[at:]
    return text


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=mutated())
def test_mutated_launch_files_fail_only_with_launch_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("launch") / "launch.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        spec = load_file(str(path), lambda preset, overrides: 8)
    except LaunchError as e:
        assert str(path) in str(e), e
        return
    assert spec.processes and spec.nodes >= 1
