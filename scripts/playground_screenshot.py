"""Write ``docs/playground.png``: the playground page (README, "Playground") in headless chromium.

Starts the service on a free local port with cl100k_base and o200k_base, types a short text into
the page, sets the split and chunk controls, hovers the token holding '½' and saves the window, reduced to a
small palette PNG. Needs Debian's chromium and chromium-driver, selenium and pillow (test extra):

    python scripts/playground_screenshot.py [--out docs/playground.png]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (
    "# Exact token counts\n\n"
    "bpecore counts, cuts and chunks text exactly as tiktoken encodes it: "
    "split_at(text, n) keeps the longest prefix that fits in n tokens, "
    "and every chunk stays within max_tokens.\n\n"
    "Non-ASCII costs more: naïve café, Ünïcode, ½ of it.\n"
    "    def count(text): return len(enc.encode(text))\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"the server was not ready after {timeout:.0f} s")


def set_value(driver, element_id: str, value: str) -> None:
    driver.execute_script(
        "const el = document.getElementById(arguments[0]); el.value = arguments[1];"
        "el.dispatchEvent(new Event('input', {bubbles: true}));",
        element_id,
        value,
    )


def shoot(url: str, out: Path) -> None:
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(url + "/?encoding=cl100k_base&encoding=o200k_base")
        time.sleep(1.0)
        set_value(driver, "split-n", "24")
        set_value(driver, "max-tokens", "20")
        set_value(driver, "overlap", "4")
        time.sleep(0.4)
        driver.find_element("id", "text").send_keys(TEXT)
        time.sleep(1.5)
        driver.execute_script(
            "const span = [...document.querySelectorAll('.column .view .t')]"
            "  .find((s) => s.textContent.includes('\u00bd'));"
            "span.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));"
        )
        time.sleep(0.2)
        png = driver.get_screenshot_as_png()
    finally:
        driver.quit()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=96, method=Image.Quantize.FASTOCTREE).save(out, optimize=True)
    print(f"{out}: {image.width}x{image.height}, {out.stat().st_size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "playground.png")
    args = parser.parse_args()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BPESVC_ENCODINGS": json.dumps(["cl100k_base", "o200k_base"]),
        "BPESVC_LOG_LEVEL": "warning",
    }
    cmd = [sys.executable, "-m", "uvicorn", "bpecore_service.main:app", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        shoot(url, args.out)
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
