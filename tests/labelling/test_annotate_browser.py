"""What an annotator sees, in a real browser: Debian's chromium, driven by its chromedriver through selenium, on the
suite's real Label Studio 1.23.

The labelling interface of a pushed map shows a neutral id and the picture, never the encoder, task, layer or head
(nor does the task list), and the picture fits a 1000-pixel window: a map of over 48 tokens stays above the Submit
bar, and the keys 1-5 choose the five labels in the guide's order. `.ci/run` installs chromium and chromium-driver;
elsewhere, without them, the test is skipped, saying so.
"""

import shutil
import time

import pytest
from synthetic import pattern_map

from patterncnn.cli import main
from patterncnn.core.maps import MapStore
from patterncnn.labelling.labelstudio import connect
from patterncnn.labelling.push import blind_id, label_config, shown_fields

pytestmark = pytest.mark.slow
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TAG = "minilm-53aa5117"  # a real encoder tag: the page must not show it
WINDOW = (1280, 1000)  # the browser window, as the issue measured it; the page gets what its bars leave


def store_of(root, sizes):
    """Maps with tokens (T <= 48 draws token labels, a larger T the bare picture), ids spelling encoder, task,
    layer and head as real ones do."""
    store = MapStore.create(root)
    recs = []
    for i, t in enumerate(sizes):
        sep = t // 2 - 1
        tokens = ["[CLS]"] + [f"tok{j}" for j in range(1, sep)] + ["[SEP]"] + [f"tok{j}" for j in range(sep + 1, t - 1)]
        meta = {"id": f"{TAG}_rte_dev_{99990 + i:05d}_L03_H07", "model": "minilm", "task": "rte", "split": "dev",
                "example": 99990 + i, "layer": 3, "head": 7, "T": t, "tokens": tokens + ["[SEP]"], "seps": [sep, t - 1]}
        recs.append((meta, pattern_map("vertical+diagonal", t, sep, seed=i)))
    store.append(recs)
    return store


@pytest.fixture()
def chrome():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed here (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver, what, seconds=180):
    """Poll a JavaScript expression until it is truthy; returns its value."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = driver.execute_script(f"return {what}")
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"the page never showed {what}")


PAGE = """(() => {
  const img = [...document.querySelectorAll('img')].find(i => i.src.startsWith('blob:') && i.complete &&
                                                              i.naturalWidth > 0);
  const submit = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Submit');
  const header = [...document.querySelectorAll('h1,h2,h3,h4,h5,h6')].map(h => h.textContent.trim())
                 .find(t => t.startsWith('map '));
  if (!img || !submit || !header) return null;
  const r = img.getBoundingClientRect(), s = submit.getBoundingClientRect();
  return {header, text: document.body.innerText, natural: [img.naturalWidth, img.naturalHeight],
          img: [r.left, r.top, r.right, r.bottom], submit_top: s.top, view: [innerWidth, innerHeight]};
})()"""


CHECKED = """(() => {
  const on = [...document.querySelectorAll('input[type=radio], input[type=checkbox]')].filter(i => i.checked);
  return on.length ? on.map(i => (i.closest('label') || i.parentElement).textContent.trim()) : null;
})()"""


def test_the_annotator_sees_a_neutral_id_and_the_whole_picture(label_studio, chrome, tmp_path, capsys):
    store = store_of(tmp_path / "maps", [20, 100])
    conn = ["--url", label_studio.url, "--api-key", label_studio.token]
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "blind", *conn]) == 0
    capsys.readouterr()
    project = connect(label_studio.url, label_studio.token).find_project("blind")
    forbidden = [TAG, "minilm", "rte", "99990", "99991", "L03", "H07", "layer", "head"]

    chrome.get(f"{label_studio.url}/user/login/")
    chrome.find_element("name", "email").send_keys(label_studio.email)
    chrome.find_element("name", "password").send_keys(label_studio.password)
    chrome.find_element("css selector", "button[type=submit]").click()
    wait(chrome, "!location.pathname.startsWith('/user/login')")
    chrome.get(f"{label_studio.url}/projects/{project.id}/data?labeling=1")
    seen = {}
    for _ in store.ids:
        page = wait(chrome, PAGE)
        assert page["header"] not in seen
        seen[page["header"]] = page
        assert not [f for f in forbidden if f in page["text"]], page["text"]
        left, top, right, bottom = page["img"]
        assert right <= page["view"][0] and bottom <= page["submit_top"], page  # the whole picture, above Submit
        header = page["header"]
        if len(seen) == 1:  # the keys 1-5 choose the five labels in the guide's order, as annotate.md says
            from selenium.webdriver.common.action_chains import ActionChains

            for key, name in [("2", "diagonal"), ("5", "heterogeneous"), ("1", "vertical")]:
                ActionChains(chrome).send_keys(key).perform()
                wait(chrome, CHECKED, 20)
                assert chrome.execute_script(f"return {CHECKED}") == [f"{name}[{key}]"]  # the choice shows its key
        chrome.execute_script("[...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Skip')"
                              ".click()")
        wait(chrome, f"!document.body.innerText.includes({header!r})")
    assert set(seen) == {blind_id(m) for m in store.ids}
    big = seen[blind_id(store.ids[1])]
    assert big["natural"][1] > big["img"][3] - big["img"][1]  # the 100-token map was shrunk to the view

    chrome.get(f"{label_studio.url}/projects/{project.id}/data")  # the task list, which every member sees
    text = wait(chrome, "document.body.innerText.includes('map ') && document.body.innerText")
    assert not [f for f in forbidden if f in text]
    # nor Label Studio's own columns of the pre-annotation: its model version and its label (helper 103's review)
    assert not [f for f in ("rule-v1", "Prediction results", "Prediction model") if f in text], text


def test_a_project_of_an_earlier_config_gets_the_blind_one(label_studio, tmp_path, capsys):
    store_of(tmp_path / "maps", [16])
    earlier = label_config().replace('value="$ref"', 'value="$map_id"').replace(
        "</View>", '  <Text name="info" value="$info"/>\n</View>')
    ls = connect(label_studio.url, label_studio.token)
    ls.ensure_project("earlier config", earlier)
    assert main(["annotate", "push", str(tmp_path / "maps"), "--project", "earlier config", "--url", label_studio.url,
                 "--api-key", label_studio.token]) == 0
    assert "it has the blind config now" in capsys.readouterr().out
    assert shown_fields(ls.find_project("earlier config").label_config) == {"ref", "image"}
