"""The report in a real headless Chromium (selenium): it loads with no console error and no request, the grid is
clickable (a head opens its example maps), hovering a map names its tokens, and a screenshot is not blank."""

import io
import json

import numpy as np
import pytest
from browser import chromium, console_errors, missing
from PIL import Image

from patterncnn.cli import main

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture(scope="module")
def report(tiny_bert, glue_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "census"
    assert main(["census", "--task", "rte", "--task", "sst2", "--model", str(tiny_bert), "--limit", "40",
                 "--max-length", "48", "--glue-dir", str(glue_dir), "--out", str(out), "--report"]) == 0
    return out / "report.html"


def test_the_report_works_in_headless_chromium(report, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    with chromium(tmp_path / "profile") as driver:
        driver.get(report.as_uri())
        assert console_errors(driver) == []
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0  # no request
        cells = driver.find_elements(By.CSS_SELECTOR, "#grid td.cell")
        assert len(cells) == 3 * 4
        # `?` after the letter of a head whose majority other examples could overturn, `*` after a tie's
        heads = json.loads((report.parent / "census.json").read_text())["tasks"]["rte"]["heads"]
        marks = ["*" if c.get("tied") else "?" if not c["clear"] else "" for row in heads for c in row]
        assert [c.text.split()[0][-1:] if c.text.split()[0][-1] in "*?" else "" for c in cells] == marks
        assert driver.find_elements(By.CSS_SELECTOR, "#detail img") == []  # nothing opened yet

        cell = driver.find_element(By.CSS_SELECTOR, "#grid td.cell[data-layer='1'][data-head='2']")
        cell.click()
        assert driver.find_element(By.CSS_SELECTOR, "#detail h3").text == "Layer 1, head 2"
        thumbs = driver.find_elements(By.CSS_SELECTOR, "#detail img.thumb-img")
        assert thumbs and all(driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0",
                                                    t) for t in thumbs)
        selected = driver.find_elements(By.CSS_SELECTOR, "#grid td.cell.selected")
        assert [(c.get_attribute("data-layer"), c.get_attribute("data-head")) for c in selected] == [("1", "2")]

        driver.execute_script("arguments[0].scrollIntoView()", thumbs[0])
        w, h = thumbs[0].size["width"], thumbs[0].size["height"]  # offsets count from the element's centre
        ActionChains(driver).move_to_element_with_offset(thumbs[0], -w // 2 + 2, -h // 2 + 2).perform()
        tip = driver.find_element(By.ID, "tip")
        assert tip.is_displayed() and tip.text == "query 0 [CLS] \u2192 key 0 [CLS]"  # the first query and key token
        ActionChains(driver).move_to_element_with_offset(thumbs[0], w // 2 - 2, -h // 2 + 2).perform()
        assert tip.text.startswith("query 0 [CLS] \u2192 key ") and tip.text.endswith("[SEP]")  # the last key token

        first = "#grid td.cell[data-layer='0'][data-head='0']"  # every click draws the grid anew: find cells again
        before = driver.find_element(By.CSS_SELECTOR, first).get_attribute("style")
        driver.find_element(By.CSS_SELECTOR, "#pattern-buttons button[data-value='diagonal']").click()
        driver.find_element(By.CSS_SELECTOR, "#task-buttons button[data-value='sst2']").click()
        cell = driver.find_element(By.CSS_SELECTOR, first)
        assert cell.text.startswith("D ") and cell.get_attribute("style") != before

        driver.execute_script("document.getElementById('heads').scrollIntoView()")
        png = driver.get_screenshot_as_png()
        assert console_errors(driver) == []
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert img.shape[0] > 500 and img.shape[1] > 800
    assert img.std() > 20 and len(np.unique(img.reshape(-1, 3), axis=0)) > 200  # not blank: the grid, maps, text


def test_a_head_whose_majority_is_not_clear_is_marked(report, tmp_path):
    import shutil

    from selenium.webdriver.common.by import By

    copy = tmp_path / "census"
    shutil.copytree(report.parent, copy)
    data = json.loads((copy / "census.json").read_text())
    data["tasks"]["rte"]["heads"][0][1]["clear"] = False  # as a head of a census of few examples can be
    (copy / "census.json").write_text(json.dumps(data))
    assert main(["report", str(copy), "--overwrite"]) == 0
    with chromium(tmp_path / "profile") as driver:
        driver.get((copy / "report.html").as_uri())
        cell = driver.find_element(By.CSS_SELECTOR, "#grid td.cell[data-layer='0'][data-head='1']")
        assert cell.text.split()[0].endswith("?") and "other examples could give it another majority" in \
            cell.get_attribute("title") and "95% over the examples" in cell.get_attribute("title")
        assert console_errors(driver) == []
