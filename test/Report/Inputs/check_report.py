#!/usr/bin/env python3
"""Checks a report.html from tools/report/make_report.py as a reader would get it.

    check_report.py REPORT [--chromium PATH --work-dir DIR]

Always, from the file alone: each expected plot is an <img class="plot" id="plot-...">
whose src is a PNG data URL that decodes (pillow) to an image of a sensible size, matching
the img's width and height; nothing refers to another file or the network; no <script>.

With --chromium, headless Chromium opens the report from a file:// URL:
1. a 1400x3000 screenshot, with Chromium's log on stderr: no console message may appear
   (the report has no script, so any is an error, e.g. a blocked resource), and the
   screenshot must not be blank (grey-level spread) and must show the plots (a share of
   strongly coloured pixels, which text and broken-image icons do not have);
2. --dump-dom of a copy with a small probe script added, which on the load event writes each
   image's naturalWidth/naturalHeight and laid-out size into data attributes: every plot
   must have been decoded by the browser at its PNG's size and laid out with a non-zero
   size.
Prints one line per check; exits 1 with the reason on the first failure.
"""
import argparse
import base64
import html.parser
import io
import os
import re
import subprocess
import sys

from PIL import Image, ImageStat

PLOTS = ("memory", "breakdown", "node-times", "activations")
MIN_PLOT_SIZE = (400, 150)
WINDOW = (1400, 3000)
# The report has no script: any console line is an error. Chromium logs them as
# "...:INFO:CONSOLE(12)] "message", source: file:///..." (the level varies by version).
CONSOLE_RE = re.compile(r":CONSOLE|Uncaught|net::ERR_|Not allowed to load local resource")
URL_ATTRS = ("src", "href", "srcset", "poster", "data", "action", "background")
FORBIDDEN_TAGS = ("script", "link", "iframe", "object", "embed", "base")
PROBE = """<script>
window.addEventListener("load", function () {
  for (const img of document.images) {
    const r = img.getBoundingClientRect();
    img.setAttribute("data-natural", img.naturalWidth + "x" + img.naturalHeight);
    img.setAttribute("data-shown", Math.round(r.width) + "x" + Math.round(r.height));
  }
  document.body.setAttribute("data-probe", "loaded");
});
</script>
"""


class Failure(Exception):
    pass


class Tags(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text of <style> elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.styles, self._in_style = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def parse(text):
    p = Tags()
    p.feed(text)
    p.close()
    return p


def plot_images(tags):
    """{plot id: attributes} of the <img class="plot"> elements."""
    found = {}
    for tag, attrs in tags:
        if tag == "img" and "plot" in attrs.get("class", "").split():
            found[attrs.get("id", "").removeprefix("plot-")] = attrs
    missing = [p for p in PLOTS if p not in found]
    if missing:
        raise Failure(f"no <img class=\"plot\"> for: {', '.join(missing)}")
    return found


def decode_png(plot, attrs):
    prefix = "data:image/png;base64,"
    src = attrs.get("src", "")
    if not src.startswith(prefix):
        raise Failure(f"plot {plot}: src is not a PNG data URL: {src[:40]!r}")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(src[len(prefix):], validate=True)))
        image.load()
    except (ValueError, OSError) as e:
        raise Failure(f"plot {plot}: the data URL does not decode to an image: {e}") from None
    if image.format != "PNG":
        raise Failure(f"plot {plot}: the data URL holds {image.format}, not PNG")
    if image.width < MIN_PLOT_SIZE[0] or image.height < MIN_PLOT_SIZE[1]:
        raise Failure(f"plot {plot}: {image.width}x{image.height} is too small")
    if (attrs.get("width"), attrs.get("height")) != (str(image.width), str(image.height)):
        raise Failure(f"plot {plot}: img says {attrs.get('width')}x{attrs.get('height')}, "
                      f"the PNG is {image.width}x{image.height}")
    if ImageStat.Stat(image.convert("L")).stddev[0] < 5:
        raise Failure(f"plot {plot}: the PNG is blank")
    return image.size


def check_self_contained(doc):
    for tag, attrs in doc.tags:
        if tag in FORBIDDEN_TAGS:
            raise Failure(f"<{tag}> in the report: it must need no script and no other file")
        for name in URL_ATTRS:
            value = attrs.get(name)
            if value is not None and not value.startswith("data:"):
                raise Failure(f"<{tag} {name}=\"{value[:60]}\">: refers to another resource")
    for css in doc.styles:
        for m in re.finditer(r"url\(\s*['\"]?([^'\")]*)|@import", css):
            if m.group(0) == "@import" or not m.group(1).startswith("data:"):
                raise Failure(f"the style sheet refers to another resource: {m.group(0)}")


def check_file(path):
    with open(path, encoding="utf-8") as f:
        doc = parse(f.read())
    sizes = {p: decode_png(p, a) for p, a in plot_images(doc.tags).items() if p in PLOTS}
    check_self_contained(doc)
    print(f"static: {len(sizes)} plots decode: " +
          ", ".join(f"{p} {w}x{h}" for p, (w, h) in sizes.items()))
    print("static: self-contained (no script, no external resource)")
    return sizes


def run_chromium(chromium, work, url, *extra):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--hide-scrollbars", "--mute-audio",
           f"--user-data-dir={os.path.join(work, 'chromium-profile')}",
           f"--window-size={WINDOW[0]},{WINDOW[1]}", *extra, url]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        raise Failure(f"chromium did not finish in 180 s: {' '.join(cmd)}") from None
    if done.returncode != 0:
        raise Failure(f"chromium exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def check_screenshot(chromium, work, path):
    shot = os.path.join(work, "screenshot.png")
    if os.path.exists(shot):
        os.unlink(shot)
    done = run_chromium(chromium, work, "file://" + os.path.abspath(path),
                        f"--screenshot={shot}", "--enable-logging=stderr", "--v=0")
    console = [line for line in done.stderr.splitlines() if CONSOLE_RE.search(line)]
    if console:
        raise Failure("console messages while loading the report:\n" + "\n".join(console))
    print("chromium: no console messages")
    if not os.path.exists(shot):
        raise Failure(f"chromium wrote no screenshot:\n{done.stderr[-3000:]}")
    image = Image.open(shot).convert("RGB")
    if image.width < WINDOW[0] // 2 or image.height < WINDOW[1] // 2:
        raise Failure(f"screenshot is {image.width}x{image.height}")
    spread = ImageStat.Stat(image.convert("L")).stddev[0]
    if spread < 10:
        raise Failure(f"the screenshot is blank (grey-level standard deviation {spread:.1f})")
    saturated = image.convert("HSV").getchannel("S").point(lambda s: 255 if s > 80 else 0)
    coloured = ImageStat.Stat(saturated).mean[0] / 255
    if coloured < 0.02:
        raise Failure(f"the screenshot shows no plots: {100 * coloured:.2f}% coloured pixels")
    print(f"chromium: screenshot {image.width}x{image.height}, not blank, "
          "plots drawn (coloured pixels above 2%)")


def check_dom(chromium, work, path, sizes):
    probe = os.path.join(work, "probe.html")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "</body>" not in text:
        raise Failure("the report has no </body>")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", PROBE + "</body>", 1))
    done = run_chromium(chromium, work, "file://" + probe, "--dump-dom")
    doc = parse(done.stdout)
    body = next((a for t, a in doc.tags if t == "body"), {})
    if body.get("data-probe") != "loaded":
        raise Failure("the page's load event never ran (no data-probe in the dumped DOM)")
    for plot, attrs in plot_images(doc.tags).items():
        if plot not in sizes:
            continue
        natural = attrs.get("data-natural")
        if natural != "{}x{}".format(*sizes[plot]):
            raise Failure(f"plot {plot}: the browser decoded it as {natural}, "
                          "expected {}x{}".format(*sizes[plot]))
        shown = attrs.get("data-shown", "0x0").split("x")
        if min(int(v) for v in shown) <= 0:
            raise Failure(f"plot {plot}: laid out as {attrs.get('data-shown')}")
    print(f"chromium: {len(sizes)} plots decoded at their PNG size and laid out")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report")
    ap.add_argument("--chromium", help="headless Chromium to render the report with")
    ap.add_argument("--work-dir", help="where Chromium's profile and screenshot go")
    args = ap.parse_args()
    try:
        sizes = check_file(args.report)
        if args.chromium:
            work = args.work_dir or os.path.dirname(os.path.abspath(args.report))
            os.makedirs(work, exist_ok=True)
            check_screenshot(args.chromium, work, args.report)
            check_dom(args.chromium, work, args.report, sizes)
    except Failure as e:
        print(f"check_report.py: {args.report}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
