"""One headless Chromium for the graph page's tests: Debian's browser and driver driven by Selenium.

The browser and its driver are the system's (/usr/bin/chromium, /usr/bin/chromedriver, from
``apt-get install chromium chromium-driver``), named explicitly so Selenium Manager never
downloads one; ``SKIP`` marks a module's tests skipped without them, without Graphviz's dot,
or (at ``new_driver``) without Selenium. GRADCLI_CHROMIUM / GRADCLI_CHROMEDRIVER name others.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app

CHROMIUM = os.environ.get("GRADCLI_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GRADCLI_CHROMEDRIVER", "/usr/bin/chromedriver")

SKIP = [
    pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed"),
    pytest.mark.skipif(
        not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
        reason="Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
    ),
]

runner = CliRunner()


def cli(*args: str) -> Any:
    """``gradcli ARGS`` in the test's process; it must succeed."""
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert result.exit_code == 0, result.stderr
    return result


def new_driver(webdriver: Any, page_load_timeout: float = 60, script_timeout: float | None = None) -> Any:
    """A headless Chromium session, its console kept (``driver.get_log("browser")``)."""
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,760"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(page_load_timeout)
    if script_timeout is not None:
        driver.set_script_timeout(script_timeout)
    return driver


def open_page(browser: Any, path: Path) -> None:
    """Open a written page and wait for its script to say it is ready."""
    browser.get(path.as_uri())
    assert browser.execute_script("return document.documentElement.dataset.ready") == "true"


def shot(browser: Any, name: str) -> None:
    """Keep a screenshot in GRADCLI_SCREENSHOTS, when it is set."""
    folder = os.environ.get("GRADCLI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / f"{name}.png"))


def severe(browser: Any) -> list[dict]:
    """The console's errors since the last read."""
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
