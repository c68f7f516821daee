"""Every report page kvsim writes (single run, sweep, serving, sensitivity, validation, fault
campaign), opened in Debian's headless Chromium: no console error or failed load, every image
decodes, and no plot is empty. Chromium is driven over its DevTools pipe
(--remote-debugging-pipe), so nothing listens on a port."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

CLI = os.environ["KVSIM_CLI"]
ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
LIBRARY = os.path.join(ROOT, "scenarios", "library")
SERVING = os.path.join(ROOT, "scenarios", "serving")

# Reads every image of the page onto a canvas: a plot is empty when fewer than 100 of its pixels
# are coloured (axes, ticks and labels are grey; data and its legend are drawn in colour, though
# a series may be grey or drawn over by one).
CHECK_IMAGES = """(async () => {
  const problems = [];
  const images = Array.from(document.images);
  for (const img of images) {
    if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; });
    if (img.naturalWidth === 0) { problems.push('image does not load: ' + img.src); continue; }
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    let coloured = 0;
    for (let i = 0; i < d.length; i += 4) {
      const hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
      if (d[i + 3] > 0 && hi - lo > 60) coloured++;
    }
    if (coloured < 100) problems.push('empty plot: ' + img.src);
  }
  return JSON.stringify({images: images.length, problems: problems});
})()"""


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no chromium: tools/install-deps.sh installs Debian's chromium")


class Browser:
    """Headless Chromium over the DevTools pipe: fd 3 carries commands, fd 4 answers and events,
    each a JSON text ended by a NUL byte."""

    def __init__(self, profile):
        to_chrome_r, self._out = os.pipe()
        self._in, from_chrome_w = os.pipe()

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
             "--allow-file-access-from-files", "--remote-debugging-pipe",
             "--no-first-run", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Chromium is not ours to sanitize: without the sanitizer pass's preloaded runtime.
            env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next = 0
        self.events = []

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        text, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(text)

    def call(self, method, session=None, **params):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            got = self._read()
            if got.get("id") == self._next:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    def wait_for(self, method):
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            got = self._read()
            if got.get("method") == method:
                return got
            self.events.append(got)

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)

    def open(self, path):
        """Loads `path`; the page's errors (console, exceptions, failed loads) and what the image
        check found."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.events.clear()
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session)
        self.call("Page.navigate", session, url="file://" + os.path.abspath(path))
        self.wait_for("Page.loadEventFired")
        result = self.call("Runtime.evaluate", session, expression=CHECK_IMAGES,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the image check failed: {result['exceptionDetails']}")
        checked = json.loads(result["result"]["value"])
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(details.get("exception", {}).get("description") or
                              details.get("text", "an exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", "") + " " +
                              params["entry"].get("url", ""))
        self.call("Target.closeTarget", targetId=target)
        return errors, checked


def kvsim(*args):
    done = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout, done.stderr)


KINDS = ["run", "sweep", "serving-run", "serving-sweep", "sensitivity", "validation",
         "fault-campaign"]


@pytest.fixture(scope="module")
def pages():
    """One small report of each kind kvsim writes, laid out as the main job lays out its study
    (the sweep's page then carries the sensitivity and serving panels): kind -> index.html."""
    out = tempfile.mkdtemp(prefix="kvsim-report-pages-")
    try:
        scenario = os.path.join(LIBRARY, "a2-llama70b-roce.yaml")
        axes = ["--set", "cache.block_tokens=16,128"]
        kvsim("sensitivity", scenario, *axes, "--samples", "0", "-o", f"{out}/study/sensitivity")
        kvsim("sweep", os.path.join(SERVING, "a2-2p2d-mooncake.yaml"), "-j", "2",
              "--set", "hardware.scale_out.bandwidth=100Gb/s,400Gb/s",
              "--set", "workload.trace.window.to=20s", "-o", f"{out}/study/serving")
        kvsim("sweep", scenario, *axes, "-j", "2", "-o", f"{out}/study")
        kvsim("run", scenario, "-q", "-o", f"{out}/run")
        kvsim("run", os.path.join(SERVING, "a2-2p2d-mooncake.yaml"), "-q",
              "--set", "workload.trace.window.to=20s", "-o", f"{out}/serving-run")
        kvsim("validate", "-o", f"{out}/validation")
        kvsim("run", os.path.join(SERVING, "a2-1p1d-link-faults.yaml"), "--faults", "1-3", "-q",
              "--set", "serving.recovery.retries=20", "--set", "serving.recovery.relink=true",
              "-o", f"{out}/faults")
        found = {"run": f"{out}/run", "sweep": f"{out}/study",
                 "serving-run": f"{out}/serving-run",
                 "serving-sweep": f"{out}/study/serving", "sensitivity": f"{out}/study/sensitivity",
                 "validation": f"{out}/validation", "fault-campaign": f"{out}/faults"}
        for kind, folder in found.items():
            found[kind] = os.path.join(folder, "index.html")
            assert os.path.exists(found[kind]), f"{kind}: no index.html in {folder}"
        yield found
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    profile = tempfile.mkdtemp(prefix="kvsim-chromium-")
    b = Browser(profile)
    yield b
    b.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.parametrize("kind", KINDS)
def test_a_report_page_loads_cleanly_in_chromium(pages, browser, kind):
    errors, checked = browser.open(pages[kind])
    assert errors == [], errors
    assert checked["images"] > 0, f"{kind}: a page without plots"
    assert checked["problems"] == [], checked["problems"]
    if kind == "sweep":  # the study's page shows the sensitivity and serving panels
        text = open(pages[kind]).read()
        assert 'src="sensitivity/' in text and 'src="serving/' in text


def test_the_check_catches_a_missing_image_an_empty_plot_and_a_script_error(browser, tmp_path):
    # A broken page, so that the test above is known to be able to fail.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.set_xlabel("bandwidth")
    fig.savefig(tmp_path / "empty.png")
    plt.close(fig)
    (tmp_path / "index.html").write_text(
        '<html><body><img src="empty.png"><img src="gone.png">'
        "<script>undefined_function()</script></body></html>")
    errors, checked = browser.open(tmp_path / "index.html")
    assert any("undefined_function" in e for e in errors), errors
    assert any("gone.png" in e for e in errors), errors
    assert any("empty plot" in p and "empty.png" in p for p in checked["problems"]), checked
    assert any("does not load" in p and "gone.png" in p for p in checked["problems"]), checked
