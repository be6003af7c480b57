"""A real headless Chromium (Debian's chromium and chromium-driver) driven by selenium, for the HTML report's tests.

    with chromium(tmp_path) as driver:
        driver.get(path.as_uri())
        errors = console_errors(driver)

Flags that work as root in a container, and nothing that reaches the network on its own (no component updates,
no background networking, no sync). Tests that need it skip, saying what to install, where it is missing.
"""

import contextlib
import shutil

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1800")


def missing() -> str | None:
    """Why a browser test cannot run here (None when it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "Chromium is not installed (apt-get install -y chromium chromium-driver; .ci/run does it)"
    return None


@contextlib.contextmanager
def chromium(profile_dir):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The page's console messages of level SEVERE (errors, failed loads) since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
