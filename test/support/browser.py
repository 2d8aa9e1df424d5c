"""A headless Chromium for the page tests, driven by selenium; skipped with the reason when absent.

Debian's ``chromium`` and ``chromium-driver`` packages are used (``apt-get install -y chromium
chromium-driver``; scripts/setup installs them where it may). Selenium is told both paths, so it
never downloads a browser or a driver.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

__all__ = ["browser_paths", "make_browser"]


def browser_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) executables, or None."""
    chrome = os.environ.get("CBCL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CBCL_CHROMEDRIVER") or shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


def make_browser(width: int = 1100, height: int = 800) -> Any:
    """A headless Chromium session; pytest.skip (with the reason) where none can be had."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (requirements/test.txt)")
    paths = browser_paths()
    if paths is None:
        pytest.skip("no chromium/chromedriver on PATH: apt-get install -y chromium chromium-driver "
                    "(or set CBCL_CHROMIUM and CBCL_CHROMEDRIVER)")
    chrome, driver = paths
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.binary_location = chrome
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(driver))
