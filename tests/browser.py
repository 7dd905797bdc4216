"""A real headless Chromium for the inspector's tests, driven by selenium: Debian's
`chromium` and `chromium-driver` (installed by tasks.py and .ci/run). `open_browser()`
says why when there is none, so the tests skip with that reason."""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)


def why_no_browser() -> str | None:
    """None when a headless Chromium can be driven here, else the reason it cannot."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium; tasks.py installs it with the test extra)"
    if not any(shutil.which(name) for name in CHROMIUM_NAMES):
        return "no Chromium on PATH (Debian: apt-get install chromium chromium-driver; tasks.py does it as root)"
    if not any(shutil.which(name) for name in DRIVER_NAMES):
        return "no chromedriver on PATH (Debian: apt-get install chromium-driver)"
    return None


def open_browser(width: int = 1280, height: int = 1000) -> Any:
    """A headless Chromium that records the console (read it with `console_errors`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n))
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = next(shutil.which(n) for n in DRIVER_NAMES if shutil.which(n))
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the page's viewport, not the window's
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return driver


def console_errors(driver: Any) -> list[str]:
    """Severe console entries since the last call (script errors, failed loads)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def load(driver: Any, page: Path) -> None:
    """Open `page` and wait until the inspector says it is ready."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("var r = document.querySelector('.forge-inspector'); return r && r.dataset.ready"))


def screenshot_inspector(page: Path, png: Path, width: int = 1280, height: int = 1100, presses: int = 21) -> Path:
    """A PNG of the inspector on `page`, moved `presses` transitions in: what the README shows
    (tasks.py screenshot writes docs/inspector.png with it)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver = open_browser(width, height)
    try:
        load(driver, page)
        ActionChains(driver).send_keys(*([Keys.ARROW_RIGHT] * presses)).perform()
        png.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
    return png


def main(argv: list[str]) -> int:
    """`python tests/browser.py [PNG]`: run the demo and photograph its inspector page
    (default docs/inspector.png)."""
    from forge.demo import run_demo

    reason = why_no_browser()
    if reason is not None:
        print(f"screenshot: {reason}", file=sys.stderr)
        return 1
    target = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "docs" / "inspector.png"
    with tempfile.TemporaryDirectory() as folder, open("/dev/null", "w") as quiet:
        report = run_demo(Path(folder) / "demo", out=quiet)
        assert report.inspector_path is not None
        screenshot_inspector(report.inspector_path, target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def png_summary(data: bytes) -> tuple[int, int, int]:
    """Width, height and how many distinct byte values the decoded pixels hold."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, width, height = 8, b"", 0, 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    return width, height, len(set(zlib.decompress(idat)))
