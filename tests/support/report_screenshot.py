"""The screenshot of a census report on docs/pages/commands/report.md, taken in headless Chromium.

    python tests/support/report_screenshot.py runs/census docs/pages/img/report.png [--layer 3 --head 5]

Opens RUN_DIR/report.html (write it with `patterncnn report RUN_DIR`) with the same browser and flags as
tests/report/test_report_browser.py, clicks one head of the grid, and saves the page from the grid down.
"""

import argparse
import io
import tempfile
from pathlib import Path

from browser import chromium, console_errors  # beside this script (tests/support/browser.py)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("out")
    p.add_argument("--layer", type=int, default=3)
    p.add_argument("--head", type=int, default=5)
    a = p.parse_args()
    from PIL import Image
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as profile, chromium(profile) as driver:
        driver.set_window_size(1280, 1500)
        driver.get((Path(a.run_dir) / "report.html").resolve().as_uri())
        driver.find_element(By.CSS_SELECTOR, f"#grid td.cell[data-layer='{a.layer}'][data-head='{a.head}']").click()
        driver.execute_script("document.getElementById('heads').scrollIntoView()")
        errors = console_errors(driver)
        if errors:
            raise SystemExit(f"console errors: {errors}")
        png = driver.get_screenshot_as_png()
    img = Image.open(io.BytesIO(png)).convert("RGB")
    img = img.quantize(colors=256, method=Image.Quantize.MEDIANCUT)  # a small file for the repository
    img.save(a.out, optimize=True)
    print(f"wrote {a.out} ({Path(a.out).stat().st_size // 1024} KB, {img.size[0]}x{img.size[1]})")


if __name__ == "__main__":
    main()
