"""The playground page at /: served with its assets and nothing from another host; POST
/v1/encode's window onto a long text (offsets_range) and token bytes (return_bytes), which the
page reads the tokens on screen through; and the page itself in a real browser.

The browser tests drive Debian's ``chromium`` headless with selenium against a real uvicorn
process. They are marked slow: installing chromium takes longer than the rest of CI's default
run can spare (README, "Playground"); `python -m pytest -m slow tests/service/test_playground.py`
runs them, and they are skipped, with the reason, where chromium, chromedriver or selenium is
missing.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import time
import tomllib
from pathlib import Path

import pytest

import bpecore
from bpecore.chunker import chunk
from bpecore_service.offsets import token_offsets
from bpecore_service.playground import STATIC_DIR

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
TEXTS = [
    "hello world",
    "héllo wörld 🙂🙂 中文字 \n\n  x",
    "🙂" * 7 + "abc",
    "\U0001f9d1\u200d\U0001f91d\u200d\U0001f9d1 é̃ 𝔘𝔫𝔦 ąę  \t\t end",
]


# ----------------------------------------------------------------------------------- the page
def test_page_is_served_with_a_same_origin_policy(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    local = [a for a in assets if a.startswith("playground/")]
    assert {"playground/playground.js", "playground/playground.css"} <= set(local)
    for asset in local:
        assert client.get("/" + asset).status_code == 200, asset


@pytest.mark.parametrize(
    "path", ["/playground/../main.py", "/playground/%2e%2e/main.py", "/playground/..%2fmain.py"]
)
def test_assets_stay_in_their_folder(client, path):
    assert client.get(path).status_code == 404


def test_page_names_no_other_host():
    for path in STATIC_DIR.iterdir():
        text = path.read_text(encoding="utf-8")
        # no absolute URL (http://, https://, ws://, protocol-relative //host) and no CSS import
        assert not re.search(r"\b(?:https?|wss?)://|[\"'(]//|@import", text), path.name


def test_page_leaves_the_api_and_docs_alone(client):
    assert "/" not in client.get("/openapi.json").json()["paths"]
    assert client.get("/docs").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.post("/v1/count", json={"text": "hi"}).json()["count"] == 1


def test_static_files_are_package_data():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "static/*" in pyproject["tool"]["setuptools"]["package-data"]["bpecore_service"]
    assert {p.name for p in STATIC_DIR.iterdir()} == {
        "playground.html",
        "playground.js",
        "playground.css",
    }


# ----------------------------------------------------------------------------------- the encode window
@pytest.mark.parametrize("text", TEXTS)
def test_encode_window_is_a_slice_of_the_whole_texts_offsets(client, text):
    whole = client.post("/v1/encode", json={"text": text, "return_offsets": True}).json()
    assert whole["offsets_first"] == 0
    offsets = whole["offsets"]
    n = len(text)
    for a in range(n):
        for b in sorted({a + 1, min(a + 3, n), n}):
            body = {"text": text, "return_offsets": True, "offsets_range": [a, b]}
            got = client.post("/v1/encode", json=body).json()
            first, window = got["offsets_first"], got["offsets"]
            assert got["tokens"] == whole["tokens"]
            assert window == offsets[first : first + len(window)], (a, b)
            touching = [k for k, o in enumerate(offsets) if o["start"] < b and o["end"] > a]
            # every token on text[a:b], and those before it that hold the rest of its first character
            assert first <= touching[0] and first + len(window) > touching[-1], (a, b)
            # a character has at most 4 bytes: at most 3 tokens before the first that touches
            assert touching[0] - first <= 3 and first + len(window) - 1 == touching[-1], (a, b)


def test_encode_window_of_a_long_text(client, cl100k):
    text = "naïve café 🙂, " * 2000
    tokens = cl100k.encode(text)
    got = client.post(
        "/v1/encode",
        json={"text": text, "return_offsets": True, "offsets_range": [15000, 15100]},
    ).json()
    first = got["offsets_first"]
    expected = token_offsets(cl100k, tokens)[first : first + len(got["offsets"])]
    assert [(o["id"], o["text"], o["start"], o["end"]) for o in got["offsets"]] == expected
    assert 20 < len(got["offsets"]) < 60  # only the window: the text has 18,000 tokens


def test_encode_bytes_are_each_tokens_bytes(client, cl100k):
    text = TEXTS[1]
    got = client.post(
        "/v1/encode", json={"text": text, "return_offsets": True, "return_bytes": True}
    ).json()
    raw = [bytes.fromhex(o["bytes"]) for o in got["offsets"]]
    assert raw == [cl100k.decode_single_token_bytes(t) for t in got["tokens"]]
    assert b"".join(raw) == text.encode()
    plain = client.post("/v1/encode", json={"text": text, "return_offsets": True}).json()
    assert all(o["bytes"] is None for o in plain["offsets"])


@pytest.mark.parametrize("window", [[3, 2], [0, 99], [-1, 2]])
def test_encode_window_out_of_range_is_422(client, window):
    r = client.post(
        "/v1/encode", json={"text": "hello", "return_offsets": True, "offsets_range": window}
    )
    assert r.status_code == 422
    assert r.json()["error"]["type"] in ("invalid_range", "validation_error")


# ----------------------------------------------------------------------------------- in a browser
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

needs_browser = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER and HAVE_SELENIUM),
    reason="the browser tests need Debian's chromium and chromium-driver "
    "(apt-get install chromium chromium-driver) and selenium (the test extra)",
)


def browser(test):
    """A browser test: slow, and skipped without chromium, chromedriver or selenium."""
    return pytest.mark.slow(needs_browser(test))


ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module")
def page_server(start_server):
    server = start_server({"BPESVC_ENCODINGS": json.dumps(ENCODINGS)})
    server.wait_ready()
    yield server
    assert server.stop(), server.output()


@pytest.fixture(scope="module")
def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    d.set_script_timeout(30)
    yield d
    d.quit()


def wait_for(condition, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met after {timeout}s")
        time.sleep(0.02)


def open_page(driver, server, encodings=ENCODINGS):
    query = "&".join(f"encoding={e}" for e in encodings)
    driver.get(f"{server.url}/?{query}")
    wait_for(
        lambda: driver.execute_script("return document.getElementById('status').dataset.ready"),
        what="the encodings list",
    )
    wait_for(
        lambda: len(driver.find_elements("css selector", ".column")) == len(encodings),
        what="a column per encoding",
    )


COLUMNS_JS = """
const app = window.playground;
return [...document.querySelectorAll('.column')].map((c) => {
  const column = app.columns.get(c.dataset.encoding);
  const count = c.querySelector('.count-value').dataset;
  const split = c.querySelector('.split-info').dataset;
  return {
    encoding: c.dataset.encoding, state: count.state, count: +count.count, chars: +count.chars,
    // the token view, split and chunks shown are those of the text in the box now
    current: column.text.s === app.text && column.window !== null
      && column.window.text === column.text,
    split: split.offset === undefined ? null : +split.offset,
    chunks: c.querySelector('.chunks-info').dataset.count || null,
    tokens: c.querySelectorAll('.view .t').length,
  };
});
"""


def english() -> str:
    with gzip.open(SHARED / "corpora" / "english.1mb.txt.gz", "rt", encoding="utf-8") as f:
        return f.read()


def columns(driver) -> list[dict]:
    return driver.execute_script(COLUMNS_JS)


def counted(driver, text: str) -> list[dict] | None:
    """The columns once every count is exact for ``text``."""
    cols = columns(driver)
    n = len(text.encode("utf-16-le")) // 2
    return cols if all(c["state"] == "exact" and c["chars"] == n for c in cols) else None


def settled(driver, text: str) -> list[dict] | None:
    """The columns once, for ``text``, every count is exact, the tokens are drawn and the split
    and chunks have arrived."""
    cols = columns(driver)
    n = len(text.encode("utf-16-le")) // 2
    done = all(
        c["state"] == "exact"
        and c["chars"] == n
        and c["current"]
        and c["tokens"]
        and c["split"] is not None
        and c["chunks"]
        for c in cols
    )
    return cols if done else None


def set_text(driver, text: str) -> None:
    """What a paste does: the box's value replaced, then an input event."""
    driver.execute_script(
        "const box = document.getElementById('text'); box.value = arguments[0];"
        "box.dispatchEvent(new Event('input', {bubbles: true}));",
        text,
    )


def set_control(driver, element_id: str, value) -> None:
    driver.execute_script(
        "const el = document.getElementById(arguments[0]); el.value = arguments[1];"
        "el.dispatchEvent(new Event('input', {bubbles: true}));",
        element_id,
        str(value),
    )


@browser
def test_page_loads_with_no_request_leaving_the_machine(driver, page_server):
    driver.get_log("performance")  # drop what earlier pages logged
    open_page(driver, page_server)
    driver.find_element("id", "text").send_keys("hello")
    wait_for(lambda: settled(driver, "hello"), what="counts")
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.webSocketCreated":
            urls.append(message["params"]["url"])
    urls += driver.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
    )
    local = (f"http://127.0.0.1:{page_server.port}/", f"ws://127.0.0.1:{page_server.port}/")
    assert any(u.startswith(local[1]) for u in urls)  # the count stream was seen
    assert any(u.endswith("/v1/encode") for u in urls)
    outside = [u for u in urls if not u.startswith(local) and not u.startswith("data:")]
    assert outside == []
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


@browser
def test_typed_text_is_counted_as_the_library_counts_it(driver, page_server):
    from selenium.webdriver.common.keys import Keys

    open_page(driver, page_server)
    box = driver.find_element("id", "text")
    box.clear()
    typed = ""
    encs = [bpecore.get_encoding(name) for name in ENCODINGS]
    # appended keystrokes ride the open stream; a deletion or an insertion starts a new one
    for keys, expected in [
        ("Hello wörld", "Hello wörld"),
        ("! Ünïcode: ½ 中文", "Hello wörld! Ünïcode: ½ 中文"),
        (Keys.BACKSPACE * 3, "Hello wörld! Ünïcode: ½"),
        ("  \n\n  lines  and   spaces", "Hello wörld! Ünïcode: ½  \n\n  lines  and   spaces"),
        (Keys.HOME + "«", "Hello wörld! Ünïcode: ½  \n\n«  lines  and   spaces"),
    ]:
        box.send_keys(keys)
        typed = expected
        cols = wait_for(lambda t=typed: settled(driver, t), what=f"counts of {typed!r}")
        assert box.get_property("value") == typed
        assert [c["count"] for c in cols] == [enc.count(typed) for enc in encs], typed
    # every token on screen carries its id and bytes: hover one
    tip = driver.execute_script(
        "const span = document.querySelectorAll('.column .view .t')[2];"
        "span.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));"
        "const tip = document.getElementById('tip'); return tip.hidden ? null : tip.textContent;"
    )
    assert tip
    ids = encs[0].encode(typed)
    assert f"id {ids[2]}" in tip
    assert repr(encs[0].decode_single_token_bytes(ids[2])) in tip


@browser
def test_split_and_chunk_cuts_are_the_librarys(driver, page_server):
    text = english()[:6000]
    open_page(driver, page_server)
    set_control(driver, "split-n", 50)
    set_control(driver, "max-tokens", 120)
    set_control(driver, "overlap", 20)
    time.sleep(0.3)  # the controls' debounce
    set_text(driver, text)
    cols = wait_for(lambda: settled(driver, text), what="split and chunks")
    for col in cols:
        enc = bpecore.get_encoding(col["encoding"])
        assert col["split"] == enc.split_at(text, 50)
        expected = chunk(text, enc, 120, 20)
        assert int(col["chunks"]) == len(expected)
        rows = driver.execute_script(
            "return [...document.querySelectorAll(`.column[data-encoding='${arguments[0]}'] "
            ".chunks .row`)].map((r) => [+r.dataset.start, +r.dataset.end, +r.dataset.tokens])",
            col["encoding"],
        )
        assert rows and rows == [[c.start, c.end, c.tokens] for c in expected[: len(rows)]]
    marks = driver.find_elements("css selector", ".column .view .cut.split")
    assert len(marks) == len(ENCODINGS)  # the split cut drawn in each token view
    assert driver.find_elements("css selector", ".column .view .cut.chunk-start")
    set_control(driver, "keep", "tail")
    wait_for(
        lambda: all(
            c["split"] == bpecore.get_encoding(c["encoding"]).split_at_end(text, 50)
            for c in columns(driver)
        ),
        what="split_at_end",
    )
    set_control(driver, "keep", "head")


# The token view in DOM order: each token span's text and index, and where the cut marks fall.
VIEW_JS = """
const column = document.querySelector(`.column[data-encoding='${arguments[0]}'] .view .rows`);
const pieces = [];
const marks = [];
let text = '';
for (const row of column.children) {
  for (const node of row.children) {
    if (node.classList.contains('t')) {
      pieces.push([+node.dataset.k, node.textContent]);
      text += node.textContent;
    } else if (node.classList.contains('cut')) {
      marks.push([node.classList[1], text]);
    }
    for (const inner of node.querySelectorAll('.cut')) {
      // a mark inside a token: the text before it is the token's text up to the mark
      marks.push([inner.classList[1], text.slice(0, text.length - node.textContent.length)
        + [...node.childNodes].slice(0, [...node.childNodes].indexOf(inner))
          .map((n) => n.textContent).join('')]);
    }
  }
}
const w = window.playground.columns.get(arguments[0]).window;
return {pieces, marks, text, first: w.first};
"""
SHOWN = str.maketrans({"\u21b5": "\n", "\u2192": "\t", "\u240d": "\r"})


@browser
def test_the_token_view_draws_each_token_where_the_library_puts_it(driver, page_server):
    # astral characters (two UTF-16 units in the page, one character to the API), joiners,
    # combining marks, CJK, tabs: offsets must survive the page's UTF-16 <-> code point mapping
    text = (
        "Emoji 🙂🙂 and 🧑\u200d🤝\u200d🧑 join;\tcombining é̃ and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢.\n"
        "中文字符 and ½ of it, then 🙂 again at the end 🙂\n\n"
        "    indented code(x) + 1  # 𝔘 comment\n"
    )
    open_page(driver, page_server)
    set_control(driver, "split-n", 21)
    set_control(driver, "max-tokens", 12)
    set_control(driver, "overlap", 0)
    time.sleep(0.3)
    set_text(driver, text)
    wait_for(lambda: settled(driver, text), what="the token view")
    for name in ENCODINGS:
        enc = bpecore.get_encoding(name)
        view = driver.execute_script(VIEW_JS, name)
        assert view["text"].translate(SHOWN) == text
        offsets = token_offsets(enc, enc.encode(text))
        drawn: dict[int, str] = {}
        for k, piece in view["pieces"]:
            drawn[view["first"] + k] = drawn.get(view["first"] + k, "") + piece.translate(SHOWN)
        shown_to = 0  # a character two tokens share is drawn once, in the first
        for index, (_, _, start, end) in enumerate(offsets):
            assert drawn.get(index, "") == text[max(start, shown_to) : end], (name, index)
            shown_to = max(shown_to, end)
        cuts = {}
        for kind, before in view["marks"]:
            cuts.setdefault(kind, []).append(len(before.translate(SHOWN)))
        assert cuts["split"] == [enc.split_at(text, 21)]
        pieces = chunk(text, enc, 12)
        assert cuts["chunk-start"] == [c.start for c in pieces]
        assert cuts["chunk-end"] == [c.end for c in pieces]


@browser
def test_a_megabyte_paste_stays_responsive(driver, page_server):
    text = english()
    open_page(driver, page_server)
    set_text(driver, text)
    t0 = time.monotonic()
    cols = wait_for(lambda: counted(driver, text), timeout=10, what="counts of 1 MB")
    count_seconds = time.monotonic() - t0
    assert [c["count"] for c in cols] == [bpecore.get_encoding(n).count(text) for n in ENCODINGS]
    cols = wait_for(lambda: settled(driver, text), timeout=20, what="tokens and cuts of 1 MB")
    drawn_seconds = time.monotonic() - t0
    # "within a few seconds", on 2 cores other work shares: see README, "Playground"
    assert count_seconds < 5 and drawn_seconds < 10, (count_seconds, drawn_seconds)
    # virtualised: the page holds a few screens of tokens, not a million characters of them
    assert all(c["tokens"] < 1500 for c in cols), cols
    assert driver.execute_script("return document.querySelectorAll('*').length") < 5000
    # scrolling to the middle draws the tokens there
    driver.execute_script("document.querySelector('.view').scrollTop = 200000")
    first_row = wait_for(
        lambda: driver.execute_script(
            "const row = document.querySelector('.view .row');"
            "return row && row.querySelector('.t') && !document.querySelector('.view .plain')"
            " && row.textContent"
        ),
        timeout=5,
        what="tokens after a scroll",
    )
    assert first_row.replace("\u21b5", "\n").strip() in text
    # typing at the end of the megabyte is one more frame on the stream
    driver.find_element("id", "text").send_keys(" and more")
    t1 = time.monotonic()
    cols = wait_for(lambda: counted(driver, text + " and more"), timeout=10, what="count")
    assert time.monotonic() - t1 < 3
    assert cols[0]["count"] == bpecore.get_encoding(ENCODINGS[0]).count(text + " and more")
